// Package procbench is what the ext_proc adapter's benchmarks share: a
// no-op ext_proc server, the baseline every adapter figure is compared
// with, and one HTTP request as Envoy's ext_proc filter sends it.
package procbench

import (
	"context"
	"errors"
	"fmt"
	"io"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// Noop is an ext_proc server that does nothing: it answers each message,
// whatever its kind, with CONTINUE in the reply of that kind, and ends the
// stream when Envoy closes it. Register it as the adapter is registered.
type Noop struct {
	extprocv3.UnimplementedExternalProcessorServer
}

// Process serves one stream.
func (Noop) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := srv.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp := &extprocv3.ProcessingResponse{}
		switch req.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp.Response = &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp.Response = &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}
		case *extprocv3.ProcessingRequest_RequestBody:
			resp.Response = &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}
		case *extprocv3.ProcessingRequest_ResponseBody:
			resp.Response = &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}
		case *extprocv3.ProcessingRequest_RequestTrailers:
			resp.Response = &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}
		case *extprocv3.ProcessingRequest_ResponseTrailers:
			resp.Response = &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}
		default:
			return fmt.Errorf("procbench: unsupported message %T", req.GetRequest())
		}
		if err := srv.Send(resp); err != nil {
			return err
		}
	}
}

// RequestHeaders and ResponseHeaders are the messages of one chat
// completion as Envoy sends them (lowercase names, values in raw_value),
// built once: the client's cost is the same whatever the server. They
// are shared; do not change them.
var (
	RequestHeaders = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(
			":authority", "pool.example",
			":path", "/v1/chat/completions",
			":method", "POST",
			":scheme", "http",
			"user-agent", "OpenAI/Python 1.99.0",
			"content-type", "application/json",
			"accept", "application/json",
			"content-length", "187",
			"x-llm-d-inference-fairness-id", "tenant-a",
			"x-forwarded-proto", "http",
			"x-request-id", "5f0c2a5e-8d53-4c7e-9d4b-2f1e0a6b7c11",
		)},
	}}
	ResponseHeaders = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(
			":status", "200",
			"content-type", "application/json",
			"content-length", "312",
			"date", "Wed, 02 Dec 2026 17:00:00 GMT",
			"server", "uvicorn",
			"x-envoy-upstream-service-time", "1",
		)},
	}}
)

func headerMap(kv ...string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return m
}

// Request is one HTTP request as Envoy's filter handles it with
// envoy.yaml's processing mode (headers sent, bodies not): a stream on
// client, RequestHeaders (which must be answered CONTINUE),
// ResponseHeaders without end_of_stream (answered CONTINUE, the reply
// passed to check, which may be nil), then the close that ends the
// response, which the server must answer by ending the stream.
func Request(ctx context.Context, client extprocv3.ExternalProcessorClient, check func(*extprocv3.ProcessingResponse) error) error {
	s, err := client.Process(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(RequestHeaders); err != nil {
		return err
	}
	resp, err := s.Recv()
	if err != nil {
		return err
	}
	if rh := resp.GetRequestHeaders(); rh == nil || rh.GetResponse().GetStatus() != extprocv3.CommonResponse_CONTINUE {
		return fmt.Errorf("request_headers answered %v, want CONTINUE", resp)
	}
	if err := s.Send(ResponseHeaders); err != nil {
		return err
	}
	if resp, err = s.Recv(); err != nil {
		return err
	}
	if rh := resp.GetResponseHeaders(); rh == nil || rh.GetResponse().GetStatus() != extprocv3.CommonResponse_CONTINUE {
		return fmt.Errorf("response_headers answered %v, want CONTINUE", resp)
	}
	if check != nil {
		if err := check(resp); err != nil {
			return err
		}
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	if resp, err := s.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after close: got %v, %v; want io.EOF", resp, err)
	}
	return nil
}

// SetRawValue returns the raw value m sets for name, and whether it sets
// one. It allocates nothing, so that a check costs the adapter's
// benchmark no more than the baseline's.
func SetRawValue(m *extprocv3.HeaderMutation, name string) ([]byte, bool) {
	for _, opt := range m.GetSetHeaders() {
		if opt.GetHeader().GetKey() == name {
			return opt.GetHeader().GetRawValue(), true
		}
	}
	return nil, false
}
