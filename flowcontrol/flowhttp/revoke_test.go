package flowhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/headroom"
)

// evictingController returns a controller with bands 10 and -1 under
// MaxInFlight(1) that evicts in flight (llm-d's enableEviction): a request
// of band 10 that finds the slot held by one of band -1 revokes it.
func evictingController(t *testing.T, obs func(flowcontrol.Event)) *flowcontrol.FlowController {
	t.Helper()
	return newController(t, flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
		FallbackPriority: 10,
		Gate:             gate.MaxInFlight(1),
		Eviction:         &flowcontrol.Eviction{},
		Observer:         obs,
	})
}

// upstreamSaw is what a test upstream saw once its context ended: the
// context's cause, and the error of a write it tried after.
type upstreamSaw struct {
	cause    error
	writeErr error
}

// batchUpstream serves band 10 at once with "interactive". A request of
// band -1 is held: it sets headers (and, when streaming, writes and
// flushes a first event), reports on started, waits for its context to
// end, then tries to write a late status, header and body, and reports
// what it saw on saw.
type batchUpstream struct {
	streaming bool
	started   chan struct{}
	saw       chan upstreamSaw
}

func newBatchUpstream(streaming bool) *batchUpstream {
	return &batchUpstream{streaming: streaming, started: make(chan struct{}, 1), saw: make(chan upstreamSaw, 1)}
}

func (u *batchUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(priorityHeader) != "-1" {
		io.WriteString(w, "interactive")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Backend", "set before the revocation")
	w.Header().Set(flowcontrol.DroppedReasonHeader, "spoofed")
	if u.streaming {
		io.WriteString(w, "data: 1\n\n")
		http.NewResponseController(w).Flush()
	}
	u.started <- struct{}{}
	<-r.Context().Done()
	w.Header().Set("X-Late", "set after the revocation")
	w.WriteHeader(http.StatusOK)
	_, err := io.WriteString(w, "data: late\n\n")
	u.saw <- upstreamSaw{cause: context.Cause(r.Context()), writeErr: err}
}

// A batch request whose upstream has written nothing when a request of a
// higher band revokes it is answered as flow control answers a drop: 429,
// evicted-priority, the victim band's Retry-After and the OpenAI body.
// The upstream's context is cancelled with a cause that says why, and
// nothing it writes after reaches the client.
func TestRevokedBeforeAnyByteAnswers429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu     sync.Mutex
			events []flowcontrol.Outcome
		)
		fc := evictingController(t, func(e flowcontrol.Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Effective.Priority == -1 {
				events = append(events, e.Outcome)
			}
		})
		up := newBatchUpstream(false)
		gw := startMem(newHandler(t, fc, up))
		defer gw.Close()

		batch := goSend(t.Context(), gw.Client, -1)
		<-up.started
		interactive := goSend(t.Context(), gw.Client, 10)

		res := <-batch
		if res.err != nil || res.status != http.StatusTooManyRequests {
			t.Fatalf("revoked request: %d %v, want 429", res.status, res.err)
		}
		saw := <-up.saw
		var rej *flowcontrol.RejectionError
		if !errors.Is(saw.cause, flowhttp.ErrRevoked) || !errors.Is(saw.cause, flowcontrol.ErrEvictedPriority) || !errors.As(saw.cause, &rej) {
			t.Fatalf("upstream context cause %v: want ErrRevoked and ErrEvictedPriority, with the RejectionError", saw.cause)
		}
		if rej.Outcome != flowcontrol.OutcomeEvictedPriority || rej.RetryAfter <= 0 {
			t.Errorf("cause's RejectionError: outcome %v, RetryAfter %v; want evicted-priority with a Retry-After", rej.Outcome, rej.RetryAfter)
		}
		if !errors.Is(saw.writeErr, flowcontrol.ErrEvictedPriority) {
			t.Errorf("upstream's write after the revocation returned %v, want the revocation's cause", saw.writeErr)
		}

		if got := res.header.Values(flowcontrol.DroppedReasonHeader); !slices.Equal(got, []string{"evicted-priority"}) {
			t.Errorf("dropped reason %q, want [evicted-priority]", got)
		}
		wantRetry := strconv.FormatInt(int64((rej.RetryAfter+time.Second-1)/time.Second), 10)
		if got := res.header.Values("Retry-After"); !slices.Equal(got, []string{wantRetry}) {
			t.Errorf("Retry-After %q, want [%s] (the revocation's, in whole seconds)", got, wantRetry)
		}
		if got := res.header.Values(flowhttp.QueueDurationHeader); !slices.Equal(got, []string{"0"}) {
			t.Errorf("queue duration %q, want [0]: it was dispatched at once", got)
		}
		if got := res.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type %q, want application/json", got)
		}
		for _, name := range []string{"X-Backend", "X-Late", headroom.HeaderName} {
			if v, ok := res.header[http.CanonicalHeaderKey(name)]; ok {
				t.Errorf("the 429 carries %s %q", name, v)
			}
		}
		if strings.Contains(res.body, "late") {
			t.Errorf("the upstream's late body reached the client: %q", res.body)
		}
		e := decodeError(t, res.body)
		if e.code() != "evicted-priority" || e.Error.Type != wantType[http.StatusTooManyRequests] {
			t.Errorf("body code %q type %q, want evicted-priority, %s", e.code(), e.Error.Type, wantType[http.StatusTooManyRequests])
		}

		if res := <-interactive; res.err != nil || res.status != http.StatusOK || res.body != "interactive" {
			t.Errorf("interactive request: %d %q %v, want 200 interactive", res.status, res.body, res.err)
		}
		synctest.Wait()
		if n := fc.InFlight(); n != 0 {
			t.Errorf("InFlight %d once both ended, want 0", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []flowcontrol.Outcome{flowcontrol.OutcomeDispatched, flowcontrol.OutcomeEvictedPriority}; !slices.Equal(events, want) {
			t.Errorf("band -1 outcomes %v, want %v", events, want)
		}
	})
}

// The same through a reverse proxy, as a router runs it: the revocation
// cancels the proxy's call (the backend sees its request end), the 502 the
// proxy then writes is discarded, and the client is answered 429.
func TestRevokedBeforeAnyByteThroughProxy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := evictingController(t, nil)
		started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
		backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(priorityHeader) == "-1" {
				started <- struct{}{}
				<-r.Context().Done()
				cancelled <- struct{}{}
				return
			}
			io.WriteString(w, "interactive")
		})
		client, stop := memGateway(t, fc, backend)
		defer stop()

		batch := goSend(t.Context(), client, -1)
		<-started
		interactive := goSend(t.Context(), client, 10)
		res := <-batch
		if res.err != nil || res.status != http.StatusTooManyRequests || res.header.Get(flowcontrol.DroppedReasonHeader) != "evicted-priority" {
			t.Fatalf("revoked request: %d %q %v, want 429 evicted-priority", res.status, res.header.Get(flowcontrol.DroppedReasonHeader), res.err)
		}
		if e := decodeError(t, res.body); e.code() != "evicted-priority" {
			t.Errorf("body code %q, want evicted-priority", e.code())
		}
		if res := <-interactive; res.err != nil || res.status != http.StatusOK {
			t.Errorf("interactive request: %d %v", res.status, res.err)
		}
		// The backend notices the proxy's cancelled call when its
		// connection closes, some time after the client's answer.
		synctest.Wait()
		select {
		case <-cancelled:
		default:
			t.Error("the backend's request did not end: the upstream call was not cancelled")
		}
		if n := fc.InFlight(); n != 0 {
			t.Errorf("InFlight %d once both ended, want 0", n)
		}
	})
}

// A stream revoked after its first event cannot be answered 429 any more:
// the client reads the event, then a body that breaks off
// (io.ErrUnexpectedEOF), never a clean end; nothing written after the
// revocation reaches it. Directly, and through a reverse proxy.
func TestRevokedMidStreamAbortsTheStream(t *testing.T) {
	for _, proxied := range []bool{false, true} {
		t.Run("proxied="+strconv.FormatBool(proxied), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fc := evictingController(t, nil)
				up := newBatchUpstream(true)
				var client *http.Client
				if proxied {
					c, stop := memGateway(t, fc, up)
					defer stop()
					client = c
				} else {
					gw := startMem(newHandler(t, fc, up))
					defer gw.Close()
					client = gw.Client
				}

				// The client reads the first event before the request of
				// band 10 is sent: the response has begun where it counts.
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://gateway/v1/completions", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set(priorityHeader, "-1")
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("batch stream: %v %v, want 200", resp, err)
				}
				defer resp.Body.Close()
				first := make([]byte, len("data: 1\n\n"))
				if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "data: 1\n\n" {
					t.Fatalf("first event %q, %v", first, err)
				}
				interactive := goSend(t.Context(), client, 10)
				rest, err := io.ReadAll(resp.Body)
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("revoked stream ended with %v, want io.ErrUnexpectedEOF (cut short, not a clean end)", err)
				}
				if len(rest) != 0 {
					t.Errorf("after the first event the client read %q, want nothing more", rest)
				}
				if saw := <-up.saw; !proxied && !errors.Is(saw.cause, flowcontrol.ErrEvictedPriority) {
					t.Errorf("upstream context cause %v, want ErrEvictedPriority", saw.cause)
				}
				if res := <-interactive; res.err != nil || res.status != http.StatusOK {
					t.Errorf("interactive request: %d %v", res.status, res.err)
				}
				synctest.Wait()
				if n := fc.InFlight(); n != 0 {
					t.Errorf("InFlight %d once both ended, want 0", n)
				}
			})
		})
	}
}

// A revocation that races the upstream's own end: whichever wins, the
// client sees either the whole answer, a 429 evicted-priority, or a
// response cut off, never anything else; the slot comes back once (the
// interactive request runs, and nothing is left in flight), and no
// goroutine is left. Real goroutines, not a bubble, so the two meet in
// every order.
func TestRevocationRacesCompletion(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	fc := evictingController(t, nil)
	var release chan struct{}
	started := make(chan struct{}, 1)
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(priorityHeader) != "-1" {
			io.WriteString(w, "interactive")
			return
		}
		started <- struct{}{}
		<-release
		io.WriteString(w, "done")
	})
	gw := startMem(newHandler(t, fc, backend))
	defer gw.Close()

	counts := map[string]int{}
	for i := range 40 {
		release = make(chan struct{})
		batch := goSend(t.Context(), gw.Client, -1)
		<-started
		// The interactive request is admitted directly, which takes about
		// as long as the upstream's end; a few yields more or less on
		// either side shift which comes first.
		interactive := make(chan error, 1)
		go func() {
			for range i % 3 {
				runtime.Gosched()
			}
			adm, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "interactive", Priority: 10}})
			if err == nil {
				adm.Done()
			}
			interactive <- err
		}()
		for range i % 5 {
			runtime.Gosched()
		}
		close(release)

		res := <-batch
		switch {
		case res.err != nil:
			counts["cut"]++
		case res.status == http.StatusOK && res.body == "done":
			counts["whole"]++
		case res.status == http.StatusTooManyRequests && res.header.Get(flowcontrol.DroppedReasonHeader) == "evicted-priority":
			decodeError(t, res.body)
			counts["429"]++
		default:
			t.Fatalf("round %d: batch request answered %d %q %q", i, res.status, res.header, res.body)
		}
		select {
		case err := <-interactive:
			if err != nil {
				t.Fatalf("round %d: interactive request: %v", i, err)
			}
		case <-time.After(watchdog):
			t.Fatalf("round %d: the interactive request never ran: the batch slot was not returned", i)
		}
		if n := fc.InFlight(); n != 0 {
			t.Fatalf("round %d: InFlight %d after both ended, want 0", i, n)
		}
	}
	t.Logf("batch outcomes: %v", counts)
}

// A wrapped handler that panics while its admission may be revoked still
// returns the slot, and its watcher ends with it.
func TestRevocableHandlerPanicReleasesTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := evictingController(t, nil)
		gw := startMem(newHandler(t, fc, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			panic("upstream bug")
		})))
		defer gw.Close()
		if res := <-goSend(t.Context(), gw.Client, -1); res.err == nil {
			t.Fatalf("a panicking handler answered %d %q, want the connection cut", res.status, res.body)
		}
		synctest.Wait()
		if n := fc.InFlight(); n != 0 {
			t.Errorf("InFlight %d after the panic, want 0", n)
		}
	})
}
