package extproc_test

import (
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// steps records what Config.Revocations and the Observer hear.
type steps struct {
	mu          sync.Mutex
	revocations map[flowcontrol.RevocationStep]int
	outcomes    map[flowcontrol.Outcome]int
}

func newSteps() *steps {
	return &steps{revocations: map[flowcontrol.RevocationStep]int{}, outcomes: map[flowcontrol.Outcome]int{}}
}

func (s *steps) revocation(r flowcontrol.Revocation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revocations[r.Step]++
}

func (s *steps) observe(e flowcontrol.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes[e.Outcome]++
}

func (s *steps) count(step flowcontrol.RevocationStep) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revocations[step]
}

func (s *steps) heard(o flowcontrol.Outcome) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outcomes[o]
}

// evicting is a controller config with a sheddable band -1 and an
// interactive band 10 under one slot, evicting as llm-d's enableEviction
// does, its gate counting the slots taken and returned.
func evicting(gt *countingGate, rec *steps) flowcontrol.Config {
	return flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 10, RequestCapacity: capacity.Bounded(10)},
			{Priority: -1, RequestCapacity: capacity.Bounded(10)},
		},
		FallbackPriority: 10,
		Gate:             gt,
		Eviction:         &flowcontrol.Eviction{},
		Revocations:      rec.revocation,
		Observer:         rec.observe,
	}
}

// evictingHarness starts a harness over evicting with one slot, classified
// by priorityFromHeader, and returns its counting gate and its recorder.
func evictingHarness(t *testing.T) (*countingGate, *steps, *harness) {
	t.Helper()
	gt := &countingGate{inner: gate.MaxInFlight(1)}
	rec := newSteps()
	return gt, rec, newHarness(t, evicting(gt, rec), priorityFromHeader)
}

// readers counts the adapter's reader goroutines (inbox.read) alive now.
func readers() int {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "extproc.(*inbox).read(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A batch request (band -1) holds the only slot when an interactive one
// (band 10) arrives: the batch admission is revoked, and its stream is
// answered with the ImmediateResponse that makes Envoy reset the request
// to the model server — 429, evicted-priority, Retry-After and the
// OpenAI-shaped body — then ends. The slot comes back exactly once and
// goes to the interactive request.
func TestRevokedAdmissionGetsImmediateResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gt, rec, h := evictingHarness(t)

		batch := h.open()
		batch.admit("x-test-priority", "-1")
		batch.responseHeaders(false) // the completion streams
		if got := h.fc.InFlight(); got != 1 {
			t.Fatalf("in flight = %d with the batch request admitted, want 1", got)
		}
		synctest.Wait()
		if n := readers(); n != 1 {
			t.Fatalf("%d reader goroutines with one revocable admission, want 1", n)
		}
		time.Sleep(2 * time.Second)

		chat := h.open()
		chat.sendRequestHeaders("x-test-priority", "10")
		ir := immediate(t, batch.recv(), http.StatusTooManyRequests)
		if v, _ := setValue(t, ir.GetHeaders(), flowcontrol.DroppedReasonHeader); v != "evicted-priority" {
			t.Errorf("%s = %q, want evicted-priority", flowcontrol.DroppedReasonHeader, v)
		}
		if v, ok := setValue(t, ir.GetHeaders(), "retry-after"); !ok {
			t.Error("no Retry-After on an eviction")
		} else if n, err := strconv.Atoi(v); err != nil || n < 1 {
			t.Errorf("Retry-After = %q, want whole seconds ≥ 1", v)
		}
		// It was dispatched at once: it waited 0 ms, not the 2 s it ran.
		if v, _ := setValue(t, ir.GetHeaders(), flowhttp.QueueDurationHeader); v != "0" {
			t.Errorf("queue duration = %q, want 0", v)
		}
		if v, _ := setValue(t, ir.GetHeaders(), "content-type"); v != "application/json" {
			t.Errorf("content-type = %q, want application/json", v)
		}
		if ir.GetDetails() != "evicted-priority" {
			t.Errorf("details %q, want evicted-priority", ir.GetDetails())
		}
		wantRateLimited(t, ir.GetBody(), "evicted-priority")
		// The adapter ends the stream cleanly after the answer.
		if _, err := batch.s.Recv(); !errors.Is(err, io.EOF) {
			t.Errorf("batch: after the ImmediateResponse got %v, want io.EOF", err)
		}

		if resp := chat.recv(); resp.GetRequestHeaders() == nil {
			t.Fatalf("chat: got %v, want CONTINUE once the batch slot came back", resp)
		}
		synctest.Wait()
		if got := h.fc.InFlight(); got != 1 {
			t.Errorf("in flight = %d, want 1: the chat request's only", got)
		}
		if got, want := gt.released.Load(), gt.acquired.Load()-1; got != want || got != 1 {
			t.Errorf("gate: %d slots released of %d taken, want exactly the batch slot back", got, gt.acquired.Load())
		}
		if got := rec.count(flowcontrol.RevocationIssued); got != 1 {
			t.Errorf("revocations issued %d, want 1", got)
		}
		if got := rec.count(flowcontrol.RevocationConfirmed); got != 1 {
			t.Errorf("revocations confirmed %d, want 1 (the adapter's Done)", got)
		}
		if got := rec.heard(flowcontrol.OutcomeEvictedPriority); got != 1 {
			t.Errorf("observer heard %d evictions, want 1", got)
		}

		chat.responseHeaders(true)
		chat.close()
		synctest.Wait()
		if n := readers(); n != 0 {
			t.Errorf("%d reader goroutines left with every stream ended, want 0: a reader ends with its stream", n)
		}
		if got := h.fc.InFlight(); got != 0 {
			t.Errorf("in flight = %d after both streams ended, want 0", got)
		}
	})
}

// A response that completed before the revocation keeps its answer: the
// slot was released, so there is nothing to revoke, and the interactive
// request gets the slot without an eviction.
func TestCompletedResponseIsNotEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gt, rec, h := evictingHarness(t)

		batch := h.open()
		batch.admit("x-test-priority", "-1")
		batch.responseHeaders(true) // the whole response: headers only
		chat := h.open()
		chat.admit("x-test-priority", "10")
		// Envoy ends the batch stream after its last message; the adapter
		// sends nothing more on it.
		batch.close()
		if got := rec.count(flowcontrol.RevocationIssued); got != 0 {
			t.Errorf("revocations issued %d, want 0", got)
		}
		if got, want := gt.released.Load(), int64(1); got != want {
			t.Errorf("gate: %d slots released, want %d", got, want)
		}
		chat.responseHeaders(true)
		chat.close()
	})
}

// A revocation that races the stream's own end — the client going away,
// or Envoy closing the stream — returns the slot exactly once, whichever
// the adapter sees first, and the interactive request is dispatched.
func TestRevocationRacingTheStreamsEnd(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		for range 10 {
			synctest.Test(t, func(t *testing.T) {
				gt, rec, h := evictingHarness(t)

				batch := h.open()
				batch.admit("x-test-priority", "-1")
				chat := h.open()
				chat.sendRequestHeaders("x-test-priority", "10")
				switch how {
				case "cancel":
					batch.cancel()
				case "close":
					if err := batch.s.CloseSend(); err != nil {
						t.Fatal(err)
					}
				}
				// Whatever the batch stream got (an ImmediateResponse, its
				// end, or its cancellation) does not matter here; the slot
				// does.
				if resp := chat.recv(); resp.GetRequestHeaders() == nil {
					t.Fatalf("%s: chat got %v, want CONTINUE", how, resp)
				}
				synctest.Wait()
				if got := gt.released.Load(); got != 1 {
					t.Errorf("%s: gate released %d slots, want exactly 1", how, got)
				}
				if got := h.fc.InFlight(); got != 1 {
					t.Errorf("%s: in flight = %d, want 1 (chat)", how, got)
				}
				if issued, confirmed := rec.count(flowcontrol.RevocationIssued), rec.count(flowcontrol.RevocationConfirmed); issued != confirmed || issued > 1 {
					t.Errorf("%s: %d revocations issued, %d confirmed; want as many confirmed, at most 1", how, issued, confirmed)
				}
				chat.responseHeaders(true)
				chat.close()
				synctest.Wait()
				if n := readers(); n != 0 {
					t.Errorf("%s: %d reader goroutines left, want 0", how, n)
				}
			})
		}
	}
}

// An admission that can never be revoked (no eviction, no guarantee)
// costs no goroutine: the adapter reads the stream itself.
func TestUnrevocableAdmissionStartsNoReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a := admitOne(t)
		a.responseHeaders(false)
		synctest.Wait()
		if n := readers(); n != 0 {
			t.Errorf("%d reader goroutines for an admission that cannot be revoked, want 0", n)
		}
		a.close()
	})
}
