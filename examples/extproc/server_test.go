package extproc_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/headroom"
)

// priorityFromHeader classifies by an explicit priority header, so tests can
// ask for any band.
func priorityFromHeader(c *extproc.Config) {
	c.Classify = flowhttp.HeaderClassifier{PriorityHeader: "x-test-priority"}.ClassifyHeader
}

// oneSlot is a controller config with one band and room for one request in
// flight, so a second request queues.
func oneSlot(band flowcontrol.BandConfig) flowcontrol.Config {
	return flowcontrol.Config{Bands: []flowcontrol.BandConfig{band}, Gate: gate.MaxInFlight(1)}
}

// ungated is a controller config with one band and no gate: every request
// it has room for starts at once.
func ungated(band flowcontrol.BandConfig) flowcontrol.Config {
	return flowcontrol.Config{Bands: []flowcontrol.BandConfig{band}}
}

// immediate returns resp's ImmediateResponse, failing the test at once if
// it is not one, and checks its status.
func immediate(t *testing.T, resp *extprocv3.ProcessingResponse, status int) *extprocv3.ImmediateResponse {
	t.Helper()
	ir := resp.GetImmediateResponse()
	if ir == nil {
		t.Fatalf("got %v, want an ImmediateResponse", resp)
	}
	if got := int(ir.GetStatus().GetCode()); got != status {
		t.Errorf("status = %d, want %d", got, status)
	}
	return ir
}

// admitOne starts a harness over oneSlot with band 0 of ten places, opens
// a stream on it and admits its request.
func admitOne(t *testing.T) (*harness, *envoyStream) {
	t.Helper()
	h := newHarness(t, oneSlot(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(10)}), nil)
	es := h.open()
	es.admit()
	return h, es
}

// spoofed are the router-owned headers a misbehaving backend sends, in
// several cases and several lines, around an ordinary header.
var spoofed = []string{
	"x-llm-d-flow-band-headroom-requests", "999",
	"X-LLM-D-Flow-Band-Headroom-Requests", "1000",
	"content-type", "text/event-stream",
	"x-llm-d-flow-queue-duration-ms", "0",
	"x-llm-d-flow-band-headroom", "5",
}

func pairs(kv ...string) []header {
	hs := []header{{":status", "200"}}
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, header{kv[i], kv[i+1]})
	}
	return hs
}

func TestAdmittedStreamContinuesAndStampsHeadroom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, oneSlot(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(100)}), nil)

		a := h.open()
		a.admit(flowhttp.FairnessIDHeader, "tenant-a")
		// Three more requests wait behind a: the band holds 3 of 100.
		for range 3 {
			h.open().sendRequestHeaders()
		}
		synctest.Wait()
		if n := h.queued(0); n != 3 {
			t.Fatalf("band 0 holds %d requests, want 3 queued behind a", n)
		}

		m := a.responseHeaders(false, spoofed...)
		if v, ok := setValue(t, m, headroom.HeaderName); !ok || v != "97" {
			t.Errorf("headroom set = %q, %v; want 97 (capacity 100, 3 queued)", v, ok)
		}
		got := applyMutation(pairs(spoofed...), m)
		if vs := values(got, headroom.HeaderName); !slices.Equal(vs, []string{"97"}) {
			t.Errorf("client sees headroom %q, want exactly [97]: the backend's copies must go", vs)
		}
		if vs := values(got, flowhttp.QueueDurationHeader); len(vs) != 1 {
			t.Errorf("client sees queue duration %q, want exactly one value", vs)
		} else if _, err := strconv.ParseUint(vs[0], 10, 64); err != nil {
			t.Errorf("queue duration %q is not a whole number of milliseconds", vs[0])
		}
		if vs := values(got, "x-llm-d-flow-band-headroom"); len(vs) != 0 {
			t.Errorf("client sees provisional headroom header %q, want none", vs)
		}
		if vs := values(got, "content-type"); !slices.Equal(vs, []string{"text/event-stream"}) {
			t.Errorf("content-type = %q: the mutation must leave other headers alone", vs)
		}
		a.close()
	})
}

func TestQueueDurationReportsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, a := admitOne(t)
		b := h.queueOne()
		// b waits 250.7 ms on the bubble's clock; the header counts whole
		// milliseconds.
		time.Sleep(250*time.Millisecond + 700*time.Microsecond)
		// a's response ends with its headers: a's slot goes to b.
		if v, _ := setValue(t, a.responseHeaders(true), flowhttp.QueueDurationHeader); v != "0" {
			t.Errorf("a: queue duration %q, want 0 (dispatched at once)", v)
		}
		if resp := b.recv(); resp.GetRequestHeaders() == nil {
			t.Fatalf("b: got %v, want CONTINUE once a finished", resp)
		}
		m := b.responseHeaders(true)
		v, ok := setValue(t, m, flowhttp.QueueDurationHeader)
		if !ok {
			t.Fatal("no queue duration for an admitted request")
		}
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			t.Errorf("queue duration %q is not an integer", v)
		} else if v != "250" {
			t.Errorf("b: queue duration %q, want 250 (queued 250.7 ms)", v)
		}
		a.close()
		b.close()
	})
}

func TestFallbackReadsEffectiveBandAfterProvisioning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, ungated(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(10)}), priorityFromHeader)

		s := h.open()
		s.admit("x-test-priority", "5")
		// The control plane provisions band 5 while the model works.
		if err := h.fc.ProvisionBand(flowcontrol.BandConfig{Priority: 5, RequestCapacity: capacity.Bounded(50)}); err != nil {
			t.Fatal(err)
		}
		m := s.responseHeaders(false)
		if v, ok := setValue(t, m, headroom.HeaderName); !ok || v != "10" {
			t.Errorf("headroom = %q, %v; want 10, band 0's (the band that admitted the request), not band 5's 50", v, ok)
		}
		s.close()
	})
}

func TestHeadroomSampledAtResponseTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, oneSlot(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(100)}), nil)
		a := h.open()
		a.admit() // the band is empty now: 100 left at admission
		var waiting []*envoyStream
		for range 19 {
			w := h.open()
			w.sendRequestHeaders()
			waiting = append(waiting, w)
		}
		synctest.Wait()
		if n := h.queued(0); n != 19 {
			t.Fatalf("band 0 holds %d requests, want 19 queued", n)
		}
		m := a.responseHeaders(false)
		if v, _ := setValue(t, m, headroom.HeaderName); v != "81" {
			t.Errorf("headroom = %q, want 81: read when the response headers pass, not at admission (100)", v)
		}
		for _, w := range waiting {
			w.cancel()
		}
		a.close()
	})
}

func TestFullBandRejectedSaturated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, oneSlot(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(1)}), nil)
		// Requests that leave the queue give the band a drain rate to
		// project Retry-After from. The controller measures it over at
		// least a second of time with waiters: here each request waits
		// 50 ms behind the one before, 20 per second.
		a := h.open()
		a.admit()
		for range 20 {
			next := h.open()
			next.sendRequestHeaders()
			synctest.Wait()
			time.Sleep(50 * time.Millisecond)
			a.responseHeaders(true)
			a.close()
			if resp := next.recv(); resp.GetRequestHeaders() == nil {
				t.Fatalf("warm-up: got %v, want CONTINUE", resp)
			}
			a = next
		}
		b := h.queueOne()

		c := h.open()
		ir := immediate(t, c.requestHeaders(), http.StatusTooManyRequests)
		if v, ok := setValue(t, ir.GetHeaders(), flowcontrol.DroppedReasonHeader); !ok || v != "rejected-saturated" {
			t.Errorf("%s = %q, %v; want rejected-saturated", flowcontrol.DroppedReasonHeader, v, ok)
		}
		v, ok := setValue(t, ir.GetHeaders(), "retry-after")
		if !ok {
			t.Error("no Retry-After on a capacity rejection after the band has dispatched")
		} else if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 30 {
			t.Errorf("Retry-After = %q, want whole seconds in [1, 30]", v)
		} else if v != "1" {
			// One request waits in a band that dispatches 20 per second: 50 ms,
			// rounded up to whole seconds.
			t.Errorf("Retry-After = %q, want 1", v)
		}
		wantRateLimited(t, ir.GetBody(), "rejected-saturated")
		// The adapter ends a rejected stream: Envoy sends nothing more on it.
		if _, err := c.s.Recv(); !errors.Is(err, io.EOF) {
			t.Errorf("after the ImmediateResponse: %v, want io.EOF", err)
		}
		b.cancel()
		a.close()
	})
}

func TestClosedControllerRejectsShuttingDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, ungated(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(10)}), nil)
		h.fc.Close()
		ir := immediate(t, h.open().requestHeaders(), http.StatusServiceUnavailable)
		if v, _ := setValue(t, ir.GetHeaders(), flowcontrol.DroppedReasonHeader); v != "rejected-shutting-down" {
			t.Errorf("%s = %q, want rejected-shutting-down", flowcontrol.DroppedReasonHeader, v)
		}
		if v, ok := setValue(t, ir.GetHeaders(), "retry-after"); ok {
			t.Errorf("Retry-After = %q on a shutdown rejection, want none", v)
		}
	})
}

func TestCancelWhileQueuedLeavesQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := make(chan flowcontrol.Event, 16)
		cfg := oneSlot(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(10)})
		cfg.Observer = func(e flowcontrol.Event) { events <- e }
		h := newHarness(t, cfg, nil)

		a := h.open()
		a.admit()
		if e := <-events; e.Outcome != flowcontrol.OutcomeDispatched {
			t.Fatalf("a: outcome %v, want dispatched", e.Outcome)
		}
		b := h.queueOne()

		b.cancel() // the client went away while b waited
		if e := <-events; e.Outcome != flowcontrol.OutcomeRejectedContextCancelled {
			t.Fatalf("b: outcome %v, want cancelled", e.Outcome)
		}
		if n := h.queued(0); n != 0 {
			t.Errorf("band 0 still holds %d requests after the cancellation was reported", n)
		}
		// Nothing of b lingers in the headroom either.
		if v, _ := setValue(t, a.responseHeaders(false), headroom.HeaderName); v != "10" {
			t.Errorf("headroom = %q, want 10 (the cancelled request left no trace)", v)
		}
		a.close()
		if got := h.fc.InFlight(); got != 0 {
			t.Errorf("in flight = %d after a closed and b cancelled, want 0", got)
		}
	})
}

func TestCancelAfterDispatchReleasesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, a := admitOne(t)
		if got := h.fc.InFlight(); got != 1 {
			t.Fatalf("in flight = %d after admission, want 1", got)
		}
		a.cancel() // Envoy resets the stream: the client went away mid-response
		synctest.Wait()
		if got := h.fc.InFlight(); got != 0 {
			t.Fatalf("in flight = %d after a's stream was reset, want 0", got)
		}
		b := h.open()
		b.admit() // the only slot is free again
		b.close()
	})
}

func TestResponseCompleteReleasesSlot(t *testing.T) {
	// T.Run cannot be called in a bubble, so each case has its own.
	t.Run("headers end the response", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, a := admitOne(t)
			a.responseHeaders(true)
			// Released before Envoy closes the stream.
			synctest.Wait()
			if got := h.fc.InFlight(); got != 0 {
				t.Errorf("in flight = %d once the response headers ended the response, want 0", got)
			}
			a.close()
		})
	})
	t.Run("body mode STREAMED holds the slot to the last chunk", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, a := admitOne(t)
			a.responseHeaders(false)
			for i, last := range []bool{false, false, true} {
				if i == 0 && h.fc.InFlight() != 1 {
					t.Fatalf("in flight = %d while the body streams, want 1", h.fc.InFlight())
				}
				err := a.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
					ResponseBody: &extprocv3.HttpBody{Body: []byte("data: token\n\n"), EndOfStream: last},
				}})
				if err != nil {
					t.Fatal(err)
				}
				if a.recv().GetResponseBody() == nil {
					t.Fatal("response_body not answered with a body response")
				}
			}
			synctest.Wait()
			if got := h.fc.InFlight(); got != 0 {
				t.Errorf("in flight = %d after the last body chunk, want 0", got)
			}
			a.close()
		})
	})
}

func TestUnadmittedOrUnknownHeadroomLeavesHeaderOut(t *testing.T) {
	failing := capacity.ReaderFunc(func(int) (capacity.Snapshot, error) {
		return capacity.Snapshot{}, errors.New("registry unavailable")
	})
	cases := []struct {
		name   string
		band   flowcontrol.BandConfig
		adjust func(*extproc.Config)
		admit  bool
	}{
		{name: "unbounded band", band: flowcontrol.BandConfig{Priority: 0}, admit: true},
		{name: "failing capacity reader", band: flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(10)},
			adjust: func(c *extproc.Config) { c.Capacity = failing }, admit: true},
		{name: "missing band in the reader", band: flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(10)},
			adjust: func(c *extproc.Config) { c.Capacity = &capacity.Bands{} }, admit: true},
		{name: "not admitted", band: flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(10)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, ungated(tc.band), tc.adjust)
				s := h.open()
				if tc.admit {
					s.admit()
				}
				response := []string{"content-type", "application/json", "content-length", "42"}
				m := s.responseHeaders(false, append(slices.Clone(spoofed), response...)...)
				if v, ok := setValue(t, m, headroom.HeaderName); ok {
					t.Errorf("headroom set to %q, want it left out", v)
				}
				_, hasQueue := setValue(t, m, flowhttp.QueueDurationHeader)
				if hasQueue != tc.admit {
					t.Errorf("queue duration set = %v, want %v (only admitted requests report it)", hasQueue, tc.admit)
				}
				// The response itself passes untouched; only the backend's copies
				// of the router's headers are gone.
				got := applyMutation(pairs(append(slices.Clone(spoofed), response...)...), m)
				want := pairs(append([]string{"content-type", "text/event-stream"}, response...)...)
				if tc.admit {
					got = deleteHeader(got, flowhttp.QueueDurationHeader)
				}
				if !slices.Equal(got, want) {
					t.Errorf("response headers became %v, want %v", got, want)
				}
				s.close()
				if n := h.fc.InFlight(); n != 0 {
					t.Errorf("in flight = %d after the stream closed, want 0", n)
				}
			})
		})
	}
}

func TestRequestHeadersTwiceIsAProtocolError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}}, nil)
		s := h.open()
		s.admit()
		s.sendRequestHeaders()
		_, err := s.s.Recv()
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("second request_headers: %v, want FailedPrecondition", err)
		}
		synctest.Wait()
		if got := h.fc.InFlight(); got != 0 {
			t.Errorf("in flight = %d after a protocol error, want 0", got)
		}
	})
}

func TestClassifiedRequestReachesTheController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := make(chan flowcontrol.Event, 1)
		h := newHarness(t, flowcontrol.Config{
			Bands:    []flowcontrol.BandConfig{{Priority: 0}, {Priority: 10}},
			Observer: func(e flowcontrol.Event) { events <- e },
		}, func(c *extproc.Config) {
			c.Classify = flowhttp.HeaderClassifier{Objectives: map[string]int{"chat": 10}}.ClassifyHeader
		})
		s := h.open()
		s.admit(flowhttp.DeprecatedFairnessIDHeader, "tenant-b", flowhttp.DefaultObjectiveHeader, "chat")
		e := <-events
		want := flowcontrol.FlowKey{ID: "tenant-b", Priority: 10}
		if e.Requested != want || e.Effective != want {
			t.Errorf("requested %v, effective %v; want both %v", e.Requested, e.Effective, want)
		}
		s.close()
	})
}

// countingGate wraps a gate and counts slots taken and returned, to check
// that every admission is released exactly once.
type countingGate struct {
	inner              gate.Gate
	acquired, released atomic.Int64
}

func (g *countingGate) TryAcquire(priority int) bool {
	if g.inner.TryAcquire(priority) {
		g.acquired.Add(1)
		return true
	}
	return false
}

func (g *countingGate) Release(priority int) {
	g.released.Add(1)
	g.inner.Release(priority)
}

func TestConcurrentStreamsLeaveNothingBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Goroutines from before the test (the runtime's, the test
		// framework's) are not this test's to end.
		ignore := goleak.IgnoreCurrent()
		gt := &countingGate{inner: gate.MaxInFlight(4)}
		bands := []int{10, 0, -10}
		cfg := flowcontrol.Config{Gate: gt}
		for _, p := range bands {
			cfg.Bands = append(cfg.Bands, flowcontrol.BandConfig{Priority: p, RequestCapacity: capacity.Bounded(20)})
		}
		var outcomes [5]atomic.Int64
		cfg.Observer = func(e flowcontrol.Event) { outcomes[e.Outcome].Add(1) }
		h := newHarness(t, cfg, priorityFromHeader)

		const streams = 300
		var admitted, rejected, cancelled atomic.Int64
		var wg sync.WaitGroup
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), 0))
				ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
				defer cancel()
				stream, err := h.client.Process(ctx)
				if err != nil {
					t.Errorf("stream %d: %v", i, err)
					return
				}
				priority := strconv.Itoa(bands[rng.IntN(len(bands))])
				err = stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
					RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap("x-test-priority", priority)},
				}})
				if err != nil {
					t.Errorf("stream %d: %v", i, err)
					return
				}
				if rng.IntN(8) == 0 {
					cancel() // gone while queued (or just admitted)
					cancelled.Add(1)
					return
				}
				resp, err := stream.Recv()
				if err != nil {
					t.Errorf("stream %d: %v", i, err)
					return
				}
				if resp.GetImmediateResponse() != nil {
					rejected.Add(1)
					return
				}
				admitted.Add(1)
				if rng.IntN(8) == 0 {
					cancel() // gone mid-response
					return
				}
				err = stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
					ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(":status", "200")},
				}})
				if err == nil {
					_, err = stream.Recv()
				}
				if err == nil {
					err = stream.CloseSend()
				}
				if err == nil {
					_, err = stream.Recv()
				}
				if !errors.Is(err, io.EOF) {
					t.Errorf("stream %d: %v, want io.EOF at the end", i, err)
				}
			}()
		}
		wg.Wait()
		// Streams the clients abandoned finish on the server side (cancelled
		// waits, released slots, observer calls) once every goroutine is idle.
		synctest.Wait()
		if got := h.fc.InFlight(); got != 0 {
			t.Errorf("in flight = %d after every stream ended, want 0", got)
		}
		for _, p := range bands {
			if n := h.queued(p); n != 0 {
				t.Errorf("band %d holds %d requests after every stream ended, want 0", p, n)
			}
		}
		// A stream cancelled right after its request headers may never reach
		// the controller; every one that did has exactly one outcome.
		total := int64(0)
		for i := range outcomes {
			total += outcomes[i].Load()
		}
		if total > streams {
			t.Errorf("%d outcomes for %d streams", total, streams)
		}
		// The observer runs outside the controller's lock, possibly just after
		// the waiter has its admission; synctest.Wait above let it finish.
		if got, want := outcomes[flowcontrol.OutcomeDispatched].Load(), gt.acquired.Load(); got != want {
			t.Errorf("observer saw %d dispatches, gate granted %d slots", got, want)
		}
		dispatched := outcomes[flowcontrol.OutcomeDispatched].Load()
		if admitted.Load() > dispatched {
			t.Errorf("clients saw %d admissions, controller dispatched %d", admitted.Load(), dispatched)
		}
		total = 0
		for i := range outcomes {
			total += outcomes[i].Load()
		}
		if rejected.Load() > total-dispatched {
			t.Errorf("clients saw %d rejections, controller reported %d non-dispatch outcomes", rejected.Load(), total-dispatched)
		}
		if got, want := gt.released.Load(), gt.acquired.Load(); got != want {
			t.Errorf("gate: %d slots released for %d taken; each admission must be released exactly once", got, want)
		}
		if admitted.Load() == 0 || rejected.Load() == 0 {
			t.Errorf("admitted %d, rejected %d: the load should produce both", admitted.Load(), rejected.Load())
		}
		t.Logf("streams %d: admitted %d, rejected %d, cancelled by client %d; controller outcomes %v",
			streams, admitted.Load(), rejected.Load(), cancelled.Load(), []int64{
				outcomes[0].Load(), outcomes[1].Load(), outcomes[2].Load(), outcomes[3].Load(), outcomes[4].Load()})
		h.stop()
		// Once every goroutine of the bubble has exited or blocked, none
		// may be left but those from before.
		synctest.Wait()
		goleak.VerifyNone(t, ignore)
	})
}
