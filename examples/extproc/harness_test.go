package extproc_test

// Every test that talks to the adapter runs inside a testing/synctest bubble:
// the controller, the gRPC server, the gRPC client and the test itself all
// live in it, connected by in-memory pipes instead of loopback sockets. Pipe
// reads and writes block on channels, which synctest counts as durable, so
// synctest.Wait returns exactly when every stream has gone as far as it can
// (a request queued, a slot released), and time.Sleep moves the fake clock
// that the controller's rate meter and queue times read.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/pipenet"
	"github.com/sluicegate/sluice/internal/testhttp"
)

// harness is an ext_proc Server on an in-memory gRPC listener and a client
// that speaks to it the way Envoy's ext_proc filter does. It must be built
// inside a synctest bubble.
type harness struct {
	t      *testing.T
	fc     *flowcontrol.FlowController
	client extprocv3.ExternalProcessorClient
	stop   func() // idempotent; also registered with t.Cleanup
}

// newHarness starts, in the current bubble, a controller for cfg and a
// Server over it. adjust, if not nil, may change the Server's config before
// it is built.
func newHarness(t *testing.T, cfg flowcontrol.Config, adjust func(*extproc.Config)) *harness {
	t.Helper()
	fc, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatalf("flowcontrol.New: %v", err)
	}
	scfg := extproc.Config{Controller: fc}
	if adjust != nil {
		adjust(&scfg)
	}
	srv, err := extproc.NewServer(scfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	lis := pipenet.Listen()
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = g.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///pipe",
		grpc.WithContextDialer(lis.DialAddr),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		g.Stop()
		<-served
		fc.Close()
	}
	t.Cleanup(stop)
	return &harness{t: t, fc: fc, client: extprocv3.NewExternalProcessorClient(conn), stop: stop}
}

// envoyStream is one HTTP request as Envoy's ext_proc filter handles it:
// request_headers, then response_headers, then close.
type envoyStream struct {
	t      *testing.T
	s      extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
}

// streamTimeout bounds every test stream on the bubble's fake clock: if the
// adapter wedges, every goroutine blocks, the clock jumps to the deadline and
// the test fails at once instead of hanging.
const streamTimeout = 30 * time.Second

// open starts an ext_proc stream; cancelling it is what Envoy does when the
// client goes away.
func (h *harness) open() *envoyStream {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	s, err := h.client.Process(ctx)
	if err != nil {
		cancel()
		h.t.Fatalf("Process: %v", err)
	}
	es := &envoyStream{t: h.t, s: s, cancel: cancel}
	h.t.Cleanup(cancel)
	return es
}

// headerMap builds an Envoy header list from name, value pairs, values in
// raw_value as Envoy sends them by default.
func headerMap(kv ...string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return m
}

// sendRequestHeaders sends the request_headers message without waiting.
func (es *envoyStream) sendRequestHeaders(kv ...string) {
	es.t.Helper()
	base := []string{":method", "POST", ":path", "/v1/completions", ":authority", "pool.example"}
	err := es.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(append(base, kv...)...)},
	}})
	if err != nil {
		es.t.Fatalf("send request_headers: %v", err)
	}
}

// recv waits for the adapter's next message.
func (es *envoyStream) recv() *extprocv3.ProcessingResponse {
	es.t.Helper()
	resp, err := es.s.Recv()
	if err != nil {
		es.t.Fatalf("recv: %v", err)
	}
	return resp
}

// requestHeaders sends request_headers and waits for the decision.
func (es *envoyStream) requestHeaders(kv ...string) *extprocv3.ProcessingResponse {
	es.t.Helper()
	es.sendRequestHeaders(kv...)
	return es.recv()
}

// admit sends request_headers and fails the test unless the reply is CONTINUE.
func (es *envoyStream) admit(kv ...string) {
	es.t.Helper()
	resp := es.requestHeaders(kv...)
	rh := resp.GetRequestHeaders()
	if rh == nil {
		es.t.Fatalf("request_headers reply = %v, want request_headers CONTINUE", resp)
	}
	if st := rh.GetResponse().GetStatus(); st != extprocv3.CommonResponse_CONTINUE {
		es.t.Fatalf("request_headers status = %v, want CONTINUE", st)
	}
}

// responseHeaders sends response_headers (":status" 200 plus kv) and returns
// the mutation the adapter answers with.
func (es *envoyStream) responseHeaders(endOfStream bool, kv ...string) *extprocv3.HeaderMutation {
	es.t.Helper()
	err := es.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{
			Headers:     headerMap(append([]string{":status", "200"}, kv...)...),
			EndOfStream: endOfStream,
		},
	}})
	if err != nil {
		es.t.Fatalf("send response_headers: %v", err)
	}
	resp := es.recv()
	rh := resp.GetResponseHeaders()
	if rh == nil {
		es.t.Fatalf("response_headers reply = %v, want response_headers", resp)
	}
	if st := rh.GetResponse().GetStatus(); st != extprocv3.CommonResponse_CONTINUE {
		es.t.Fatalf("response_headers status = %v, want CONTINUE", st)
	}
	if rh.GetResponse().GetBodyMutation() != nil || rh.GetResponse().GetTrailers() != nil {
		es.t.Fatalf("response_headers reply touches more than headers: %v", rh)
	}
	return rh.GetResponse().GetHeaderMutation()
}

// close half-closes the stream as Envoy does after the last message and
// waits for the adapter to end it.
func (es *envoyStream) close() {
	es.t.Helper()
	if err := es.s.CloseSend(); err != nil {
		es.t.Fatalf("CloseSend: %v", err)
	}
	if resp, err := es.s.Recv(); !errors.Is(err, io.EOF) {
		es.t.Fatalf("after close: got %v, %v; want io.EOF", resp, err)
	}
}

// header is one header line.
type header struct{ name, value string }

// applyMutation applies m to hs the way Envoy's ext_proc filter does: names
// compared without regard to case, every remove_headers entry first (each
// deleting all copies), then every set_headers entry (overwrite: all copies
// replaced by one).
func applyMutation(hs []header, m *extprocv3.HeaderMutation) []header {
	out := append([]header(nil), hs...)
	for _, name := range m.GetRemoveHeaders() {
		out = deleteHeader(out, name)
	}
	for _, opt := range m.GetSetHeaders() {
		if opt.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
			panic("applyMutation: only OVERWRITE_IF_EXISTS_OR_ADD is modelled")
		}
		name := strings.ToLower(opt.GetHeader().GetKey())
		out = append(deleteHeader(out, name), header{name, string(opt.GetHeader().GetRawValue())})
	}
	return out
}

func deleteHeader(hs []header, name string) []header {
	kept := hs[:0:0]
	for _, h := range hs {
		if !strings.EqualFold(h.name, name) {
			kept = append(kept, h)
		}
	}
	return kept
}

// values returns every value of name in hs, in order.
func values(hs []header, name string) []string {
	var vs []string
	for _, h := range hs {
		if strings.EqualFold(h.name, name) {
			vs = append(vs, h.value)
		}
	}
	return vs
}

// setValue returns the value m sets for name and whether it sets one. It
// fails the test if m fills the deprecated value field: Envoy takes raw_value
// and rejects a header option with both.
func setValue(t *testing.T, m *extprocv3.HeaderMutation, name string) (string, bool) {
	t.Helper()
	for _, opt := range m.GetSetHeaders() {
		if opt.GetHeader().GetValue() != "" {
			t.Errorf("set_headers %q fills value; want raw_value only", opt.GetHeader().GetKey())
		}
		if strings.EqualFold(opt.GetHeader().GetKey(), name) {
			return string(opt.GetHeader().GetRawValue()), true
		}
	}
	return "", false
}

// queueOne opens a stream and sends its request headers, and returns it
// once the request waits in band 0, alone there; it fails the test unless
// the request queues.
func (h *harness) queueOne() *envoyStream {
	h.t.Helper()
	es := h.open()
	es.sendRequestHeaders()
	synctest.Wait()
	if n := h.queued(0); n != 1 {
		h.t.Fatalf("band 0 holds %d requests, want the new request queued", n)
	}
	return es
}

// wantRateLimited reports an error unless body is the OpenAI error object
// with a message, the type rate_limit_exceeded and the code code.
func wantRateLimited(t *testing.T, body []byte, code string) {
	t.Helper()
	var e testhttp.OpenAIError
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Type != "rate_limit_exceeded" ||
		e.Error.Code == nil || *e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("body = %s (%v), want the OpenAI error with type rate_limit_exceeded and code %s", body, err, code)
	}
}

// queued returns band priority's queued-request count.
func (h *harness) queued(priority int) int64 {
	h.t.Helper()
	s, err := h.fc.CapacitySnapshot(priority)
	if err != nil {
		h.t.Fatalf("CapacitySnapshot(%d): %v", priority, err)
	}
	return s.QueuedRequests
}
