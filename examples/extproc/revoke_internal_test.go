package extproc

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// fakeStream is an ext_proc stream whose every message the test hands
// over and takes back itself: Send blocks until the test reads the reply,
// so the test can hold the adapter in a Send while a message and a
// revocation both arrive, which no real connection can arrange.
type fakeStream struct {
	grpc.ServerStream // nil: Process uses only Context, Recv and Send
	ctx               context.Context
	in                chan received
	out               chan *extprocv3.ProcessingResponse
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func (f *fakeStream) Recv() (*extprocv3.ProcessingRequest, error) {
	select {
	case m := <-f.in:
		return m.req, m.err
	case <-f.ctx.Done():
		return nil, status.FromContextError(f.ctx.Err()).Err()
	}
}

func (f *fakeStream) Send(resp *extprocv3.ProcessingResponse) error {
	select {
	case f.out <- resp:
		return nil
	case <-f.ctx.Done():
		return status.FromContextError(f.ctx.Err()).Err()
	}
}

// serve runs s.Process on a fakeStream and, as gRPC does once the handler
// returns, cancels the stream's context; done delivers Process's error.
func serve(t *testing.T, s *Server) (f *fakeStream, done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f = &fakeStream{ctx: ctx, in: make(chan received), out: make(chan *extprocv3.ProcessingResponse)}
	errc := make(chan error, 1)
	go func() {
		err := s.Process(f)
		cancel()
		errc <- err
	}()
	return f, errc
}

func requestHeaders(priority string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
			{Key: "x-test-priority", RawValue: []byte(priority)},
		}}},
	}}
}

func responseBody(endOfStream bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte("data: token\n\n"), EndOfStream: endOfStream},
	}}
}

// TestRevocationMeetsAPendingMessage: the adapter is busy sending a reply
// (Envoy is slow to read it) while Envoy's next message and the
// revocation both arrive. A message that ends the response or the stream
// wins: the model server or Envoy has finished, nothing is evicted and
// the adapter's Done confirms the revocation. Any other message loses to
// the ImmediateResponse.
func TestRevocationMeetsAPendingMessage(t *testing.T) {
	cases := []struct {
		name    string
		pending received
		evicted bool // the stream is answered with an ImmediateResponse
	}{
		{"the last body chunk", received{req: responseBody(true)}, false},
		{"response trailers", received{req: &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
			ResponseTrailers: &extprocv3.HttpTrailers{},
		}}}, false},
		{"the stream's end", received{err: io.EOF}, false},
		{"a body chunk", received{req: responseBody(false)}, true},
	}
	for _, tc := range cases {
		synctest.Test(t, func(t *testing.T) {
			var issued, confirmed atomic.Int64
			fc, err := flowcontrol.New(flowcontrol.Config{
				Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
				FallbackPriority: 10,
				Gate:             gate.MaxInFlight(1),
				Eviction:         &flowcontrol.Eviction{},
				Revocations: func(r flowcontrol.Revocation) {
					switch r.Step {
					case flowcontrol.RevocationIssued:
						issued.Add(1)
					case flowcontrol.RevocationConfirmed:
						confirmed.Add(1)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer fc.Close()
			s, err := NewServer(Config{
				Controller: fc,
				Classify:   flowhttp.HeaderClassifier{PriorityHeader: "x-test-priority"}.ClassifyHeader,
			})
			if err != nil {
				t.Fatal(err)
			}
			f, done := serve(t, s)
			f.in <- received{req: requestHeaders("-1")}
			if resp := <-f.out; resp.GetRequestHeaders() == nil {
				t.Fatalf("%s: got %v, want CONTINUE", tc.name, resp)
			}
			// The response headers' reply waits in Send; the next message
			// waits behind it.
			f.in <- received{req: &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
				ResponseHeaders: &extprocv3.HttpHeaders{},
			}}}
			synctest.Wait() // the adapter is in Send
			f.in <- tc.pending
			synctest.Wait() // the reader holds the message
			chat := make(chan error, 1)
			fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "chat", Priority: 10}},
				func(adm *flowcontrol.Admission, err error) {
					if err == nil {
						defer adm.Done()
					}
					chat <- err
				})
			synctest.Wait()
			if got := issued.Load(); got != 1 {
				t.Fatalf("%s: %d revocations issued, want 1", tc.name, got)
			}
			if resp := <-f.out; resp.GetResponseHeaders() == nil {
				t.Fatalf("%s: got %v, want the response headers' reply", tc.name, resp)
			}
			if tc.pending.err == nil {
				resp := <-f.out
				switch ir := resp.GetImmediateResponse(); {
				case tc.evicted && ir.GetDetails() != "evicted-priority":
					t.Errorf("%s: got %v, want the evicted-priority ImmediateResponse", tc.name, resp)
				case !tc.evicted && ir != nil:
					t.Errorf("%s: got %v after the response ended, want its own reply", tc.name, resp)
				}
				if !tc.evicted {
					select {
					case f.in <- received{err: io.EOF}: // Envoy ends the stream
					case <-f.ctx.Done(): // Process has returned already: reported below
					}
				}
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: Process = %v, want nil", tc.name, err)
				}
			case resp := <-f.out:
				t.Fatalf("%s: the adapter sent %v, want the stream ended", tc.name, resp)
			}
			if err := <-chat; err != nil {
				t.Errorf("%s: chat: %v, want dispatched", tc.name, err)
			}
			if got := confirmed.Load(); got != 1 {
				t.Errorf("%s: %d revocations confirmed, want 1", tc.name, got)
			}
			synctest.Wait()
			if got := fc.InFlight(); got != 0 {
				t.Errorf("%s: in flight = %d after both ended, want 0", tc.name, got)
			}
		})
	}
}
