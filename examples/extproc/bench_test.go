package extproc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// The ext_proc adapter's cost per request, as Envoy's ext_proc filter
// drives it with envoy.yaml's processing mode (request and response headers
// sent, bodies not): one gRPC stream per HTTP request, on one client
// connection over an in-memory listener (bufconn), carrying request_headers
// (answered CONTINUE once admitted), response_headers without end_of_stream
// (answered with the headroom mutation) and the close that ends the
// response. The controller has one band and a gate that never queues
// (MaxInFlight(100000)), so flow control is on and admission is immediate.
// mode=serial runs one request at a time; mode=parallel runs a request on
// each of GOMAXPROCS goroutines at once (b.RunParallel), streams side by
// side on the one connection.
//
// The baseline is BenchmarkNoopExtProc in the same run: the same client,
// messages and connection against a server that answers every message
// with a bare CONTINUE. The adapter's budget is 1.05 times its time per
// request.
//
//	go test -run '^$' -bench 'ExtProc' -benchmem -count 6 .
func BenchmarkExtProc(b *testing.B) {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(100000)}},
		Gate:  gate.MaxInFlight(100000),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer fc.Close()
	srv, err := extproc.NewServer(extproc.Config{Controller: fc})
	if err != nil {
		b.Fatal(err)
	}
	runExtProcBench(b, srv, func(resp *extprocv3.ProcessingResponse) error {
		// The adapter stamps the headroom: 100000 places, none queued.
		if v, ok := setRawValue(resp.GetResponseHeaders().GetResponse().GetHeaderMutation(), "x-llm-d-flow-band-headroom-requests"); !ok || string(v) != "100000" {
			return fmt.Errorf("headroom = %q, %v; want 100000", v, ok)
		}
		return nil
	})
}

// BenchmarkNoopExtProc is the baseline of BenchmarkExtProc: the same
// streams against noopServer, an ext_proc server that answers every message
// with a bare CONTINUE and holds no state. What BenchmarkExtProc costs
// beyond it is the adapter's own: classification, admission, the headroom
// mutation and its larger messages.
func BenchmarkNoopExtProc(b *testing.B) {
	runExtProcBench(b, noopServer{}, func(resp *extprocv3.ProcessingResponse) error {
		if m := resp.GetResponseHeaders().GetResponse().GetHeaderMutation(); m != nil {
			return fmt.Errorf("no-op server answered response_headers with a mutation: %v", m)
		}
		return nil
	})
}

// noopServer is an ext_proc server that does nothing: it answers each
// message, whatever its kind, with CONTINUE in the reply of that kind, and
// ends the stream when Envoy closes it.
type noopServer struct {
	extprocv3.UnimplementedExternalProcessorServer
}

func (noopServer) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
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
			return fmt.Errorf("noop: unsupported message %T", req.GetRequest())
		}
		if err := srv.Send(resp); err != nil {
			return err
		}
	}
}

// benchRequestHeaders and benchResponseHeaders are the messages of one
// chat completion as Envoy sends them (lowercase names, values in
// raw_value), built once: the client's cost is the same for both servers.
var (
	benchRequestHeaders = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
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
	benchResponseHeaders = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
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

// runExtProcBench serves srv on a bufconn listener and runs the benchmark's
// streams against it, one request per iteration. checkResponseHeaders
// vets the reply to response_headers.
func runExtProcBench(b *testing.B, srv extprocv3.ExternalProcessorServer, checkResponseHeaders func(*extprocv3.ProcessingResponse) error) {
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = g.Serve(lis)
	}()
	defer func() {
		g.Stop()
		<-served
	}()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := extprocv3.NewExternalProcessorClient(conn)
	// One request first, so that the connection is up before timing starts.
	if err := benchOneRequest(client, checkResponseHeaders); err != nil {
		b.Fatal(err)
	}

	b.Run("mode=serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := benchOneRequest(client, checkResponseHeaders); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mode=parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := benchOneRequest(client, checkResponseHeaders); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// benchOneRequest is one HTTP request as Envoy's filter handles it: a
// stream, request_headers, response_headers, close.
func benchOneRequest(client extprocv3.ExternalProcessorClient, checkResponseHeaders func(*extprocv3.ProcessingResponse) error) error {
	s, err := client.Process(context.Background())
	if err != nil {
		return err
	}
	if err := s.Send(benchRequestHeaders); err != nil {
		return err
	}
	resp, err := s.Recv()
	if err != nil {
		return err
	}
	if rh := resp.GetRequestHeaders(); rh == nil || rh.GetResponse().GetStatus() != extprocv3.CommonResponse_CONTINUE {
		return fmt.Errorf("request_headers answered %v, want CONTINUE", resp)
	}
	if err := s.Send(benchResponseHeaders); err != nil {
		return err
	}
	if resp, err = s.Recv(); err != nil {
		return err
	}
	if rh := resp.GetResponseHeaders(); rh == nil || rh.GetResponse().GetStatus() != extprocv3.CommonResponse_CONTINUE {
		return fmt.Errorf("response_headers answered %v, want CONTINUE", resp)
	}
	if err := checkResponseHeaders(resp); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	if resp, err := s.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after close: got %v, %v; want io.EOF", resp, err)
	}
	return nil
}

// setRawValue returns the raw value m sets for name, and whether it sets
// one. It allocates nothing, so that the check costs the adapter's
// benchmark no more than the baseline's.
func setRawValue(m *extprocv3.HeaderMutation, name string) ([]byte, bool) {
	for _, opt := range m.GetSetHeaders() {
		if opt.GetHeader().GetKey() == name {
			return opt.GetHeader().GetRawValue(), true
		}
	}
	return nil, false
}
