package flowhttp_test

// End-to-end tests where time matters. Each runs in a synctest bubble on its
// fake clock: client, gateway (flowhttp around an httputil.ReverseProxy) and
// backend are real net/http servers and clients, connected by in-memory
// pipes instead of loopback sockets so that synctest.Wait can tell when
// every request is parked.

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
)

// holdHeader asks the test backends to wait for the test before answering.
const holdHeader = "x-hold"

// result is one response seen by a client goroutine.
type result struct {
	status int
	header http.Header
	body   string
	err    error
}

// memGateway starts, in the current bubble, a backend serving backend and a
// gateway (a flowhttp Handler for fc around a reverse proxy to it), and
// returns a client for the gateway and a function that closes both.
func memGateway(t *testing.T, fc *flowcontrol.FlowController, backend http.Handler) (*http.Client, func()) {
	be := startMem(backend)
	gw := startMem(newHandler(t, fc, proxyTo(t, "http://backend", be.tr)))
	return gw.Client, func() { gw.Close(); be.Close() }
}

// goSend sends a request for band priority on a new goroutine; the result
// arrives on the returned channel.
func goSend(ctx context.Context, client *http.Client, priority int, headers ...string) <-chan result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://gateway/v1/completions", nil)
	if err != nil {
		ch := make(chan result, 1)
		ch <- result{err: err}
		return ch
	}
	req.Header.Set(priorityHeader, strconv.Itoa(priority))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return goDo(client, req)
}

// oneSlot is a controller configuration of band alone behind a counting
// gate with one slot.
func oneSlot(band flowcontrol.BandConfig) flowcontrol.Config {
	return flowcontrol.Config{Bands: []flowcontrol.BandConfig{band}, Gate: newCountingGate(1)}
}

// sendMany sends n requests of band 0 through client, each on a goroutine
// of its own, and returns their results' channels once every goroutine
// is blocked (in the bubble: queued, or waiting for its answer).
func sendMany(t *testing.T, client *http.Client, n int) []<-chan result {
	var chs []<-chan result
	for range n {
		chs = append(chs, goSend(t.Context(), client, 0))
	}
	synctest.Wait()
	return chs
}

// startHeld starts memGateway(fc) in front of a holdingBackend, closed when
// the test ends, and sends it a request of band 0 that the backend holds.
// It returns once the backend works on that request.
func startHeld(t *testing.T, fc *flowcontrol.FlowController) (client *http.Client, backend *holdingBackend, held <-chan result) {
	backend = newHoldingBackend()
	client, stop := memGateway(t, fc, backend)
	t.Cleanup(stop)
	held = goSend(t.Context(), client, 0, holdHeader, "1")
	<-backend.working
	return client, backend, held
}

// holdingBackend answers at once, unless the request carries holdHeader:
// then it reports on working and waits until respond is closed. It counts
// its calls.
type holdingBackend struct {
	working chan struct{}
	respond chan struct{}
	calls   atomic.Int64
	delay   time.Duration // service time of every request
}

func newHoldingBackend() *holdingBackend {
	return &holdingBackend{working: make(chan struct{}, 64), respond: make(chan struct{})}
}

func (b *holdingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.calls.Add(1)
	if r.Header.Get(holdHeader) != "" {
		b.working <- struct{}{}
		<-b.respond
	}
	time.Sleep(b.delay)
	io.WriteString(w, "tokens")
}

// queued returns the length of band priority.
func queued(t *testing.T, fc *flowcontrol.FlowController, priority int) int64 {
	t.Helper()
	s, err := fc.CapacitySnapshot(priority)
	if err != nil {
		t.Fatal(err)
	}
	return s.QueuedRequests
}

// TestResponseTimeSampling: the headroom a client sees is read when its
// response headers are written, not when it was admitted. The first request
// is admitted into an empty band (headroom 10 then); three more queue behind
// it while the backend works, and its response reports 7. Each of those
// then reports the band as it is when its own response starts.
func TestResponseTimeSampling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := newController(t, oneSlot(band(0, 10)))
		client, backend, first := startHeld(t, fc)
		if n := queued(t, fc, 0); n != 0 {
			t.Fatalf("band length %d at admission, want 0 (headroom 10)", n)
		}
		later := sendMany(t, client, 3)
		if n := queued(t, fc, 0); n != 3 {
			t.Fatalf("band length %d while the backend works, want 3", n)
		}
		close(backend.respond)

		res := <-first
		if res.err != nil || res.status != http.StatusOK {
			t.Fatalf("first request: %d %v", res.status, res.err)
		}
		if got := res.header.Values(headroom.HeaderName); !slices.Equal(got, []string{"7"}) {
			t.Errorf("first request: headroom %q, want [7] (read at response time, not 10 from admission)", got)
		}
		// The queued requests start one by one as each one before them
		// finishes; each response starts while the ones behind it wait.
		var values []string
		for _, ch := range later {
			res := <-ch
			if res.err != nil || res.status != http.StatusOK {
				t.Fatalf("queued request: %d %v", res.status, res.err)
			}
			values = append(values, res.header.Get(headroom.HeaderName))
		}
		slices.Sort(values)
		if want := []string{"10", "8", "9"}; !slices.Equal(values, want) {
			t.Errorf("queued requests: headroom %q, want %q", values, want)
		}
	})
}

// TestQueueDurationHeader: the queue-duration header carries the whole
// milliseconds spent in EnqueueAndWait: 0 for a request dispatched at once,
// 1500 for one that waited 1500.7 ms.
func TestQueueDurationHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := newController(t, oneSlot(band(0, 10)))
		client, backend, first := startHeld(t, fc)
		second := goSend(t.Context(), client, 0)
		synctest.Wait()
		time.Sleep(1500*time.Millisecond + 700*time.Microsecond)
		close(backend.respond)

		for _, c := range []struct {
			name string
			ch   <-chan result
			want string
		}{{"dispatched at once", first, "0"}, {"queued 1500.7ms", second, "1500"}} {
			res := <-c.ch
			if res.err != nil {
				t.Fatal(res.err)
			}
			if got := res.header.Values(flowhttp.QueueDurationHeader); !slices.Equal(got, []string{c.want}) {
				t.Errorf("%s: %s %q, want [%s]", c.name, flowhttp.QueueDurationHeader, got, c.want)
			}
		}
	})
}

// TestRetryAfterOverHTTP: once the band has a measured drain rate, a
// capacity rejection carries Retry-After in whole seconds, rounded up.
// Eight requests drain from the band's queue at 4 per second of busy time;
// then, with the band full, refused requests are told to come back one
// drain interval (250 ms) after the one before: 1 s for the first four,
// 2 s for the next.
func TestRetryAfterOverHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := newController(t, oneSlot(band(0, 10)))
		backend := newHoldingBackend()
		backend.delay = 250 * time.Millisecond
		client, stop := memGateway(t, fc, backend)
		defer stop()

		// Warm-up: eight requests queue behind a held one and leave the
		// queue one per 250 ms once it is released.
		warmHeld := goSend(t.Context(), client, 0, holdHeader, "1")
		<-backend.working
		warm := sendMany(t, client, 8)
		backend.respond <- struct{}{} // releases the held one alone
		for _, ch := range append(warm, warmHeld) {
			if res := <-ch; res.status != http.StatusOK {
				t.Fatalf("warm-up: status %d, %v", res.status, res.err)
			}
		}
		held := goSend(t.Context(), client, 0, holdHeader, "1")
		<-backend.working
		waiting := sendMany(t, client, 10)
		if n := queued(t, fc, 0); n != 10 {
			t.Fatalf("band length %d, want 10 (full)", n)
		}

		// The controller spreads the refused requests over the time the band
		// needs to make room: one drain interval (250 ms) apart, each
		// rounded up to whole seconds.
		var retryAfter []string
		for range 6 {
			res := <-goSend(t.Context(), client, 0)
			if res.status != http.StatusTooManyRequests || res.header.Get(flowcontrol.DroppedReasonHeader) != "rejected-saturated" {
				t.Fatalf("rejection: %d %q, want 429 rejected-saturated", res.status, res.header.Get(flowcontrol.DroppedReasonHeader))
			}
			if e := decodeError(t, res.body); e.code() != "rejected-saturated" || e.Error.Type != "rate_limit_exceeded" {
				t.Errorf("body %+v", e)
			}
			retryAfter = append(retryAfter, res.header.Values("Retry-After")...)
		}
		if want := []string{"1", "1", "1", "1", "2", "2"}; !slices.Equal(retryAfter, want) {
			t.Errorf("Retry-After %q, want %q", retryAfter, want)
		}

		close(backend.respond)
		for _, ch := range append(waiting, held) {
			if res := <-ch; res.status != http.StatusOK {
				t.Errorf("queued request: status %d, %v", res.status, res.err)
			}
		}
	})
}

// TestExpiryOverHTTP: a request that waits out its band's TTL is answered
// 429 rejected-ttl-expired exactly at the TTL, with the time it waited and
// its band's Retry-After (30: the band dispatched nothing in those 2s), and
// never reaches the backend.
func TestExpiryOverHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 2 * time.Second
		b := band(0, 10)
		b.TTL = ttl
		fc := newController(t, oneSlot(b))
		client, backend, held := startHeld(t, fc)
		start := time.Now()
		res := <-goSend(t.Context(), client, 0)
		if waited := time.Since(start); waited != ttl {
			t.Errorf("answered after %v, want the TTL %v", waited, ttl)
		}
		if res.status != http.StatusTooManyRequests || res.header.Get(flowcontrol.DroppedReasonHeader) != "rejected-ttl-expired" {
			t.Errorf("expiry: %d %q, want 429 rejected-ttl-expired", res.status, res.header.Get(flowcontrol.DroppedReasonHeader))
		}
		if got := res.header.Values("Retry-After"); !slices.Equal(got, []string{"30"}) {
			t.Errorf("Retry-After %q on an expiry, want [30]", got)
		}
		if got, want := routerHeaders(res.header), map[string][]string{flowhttp.QueueDurationHeader: {"2000"}}; !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("expiry carries %v, want %v", got, want)
		}
		if n := backend.calls.Load(); n != 1 {
			t.Errorf("backend called %d times, want 1 (the held request only)", n)
		}
		close(backend.respond)
		<-held
	})
}

// TestCancelledWhileQueued: a client that gives up while its request is
// queued takes it out of the queue at once; it never reaches the backend and
// takes no slot.
func TestCancelledWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var outcomes []flowcontrol.Outcome
		gt := newCountingGate(1)
		fc := newController(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{band(0, 10)},
			Gate:  gt,
			Observer: func(ev flowcontrol.Event) {
				mu.Lock()
				outcomes = append(outcomes, ev.Outcome)
				mu.Unlock()
			},
		})
		client, backend, held := startHeld(t, fc)
		ctx, cancel := context.WithCancel(t.Context())
		gone := goSend(ctx, client, 0)
		synctest.Wait()
		if n := queued(t, fc, 0); n != 1 {
			t.Fatalf("band length %d, want 1", n)
		}
		cancel()
		if res := <-gone; !errors.Is(res.err, context.Canceled) {
			t.Errorf("cancelled client: %v, want context.Canceled", res.err)
		}
		synctest.Wait()
		if n := queued(t, fc, 0); n != 0 {
			t.Errorf("band length %d after the client left, want 0", n)
		}
		close(backend.respond)
		<-held
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(outcomes)
		if want := []flowcontrol.Outcome{flowcontrol.OutcomeDispatched, flowcontrol.OutcomeRejectedContextCancelled}; !slices.Equal(outcomes, want) {
			t.Errorf("outcomes %v, want %v", outcomes, want)
		}
		if n := backend.calls.Load(); n != 1 {
			t.Errorf("backend called %d times, want 1", n)
		}
		if a := gt.acquired.Load(); a != 1 {
			t.Errorf("%d slots taken, want 1", a)
		}
	})
}
