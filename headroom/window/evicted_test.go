package window_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicegate/sluice/headroom/window"
)

// An eviction is a refusal for room: fed the same responses, a window
// that hears Evicted where another hears Saturated ends in the same
// state — capped at what it has in flight, shrunk once, closed until the
// Retry-After — and that state differs from before the eviction.
func TestEvictionActsAsSaturation(t *testing.T) {
	run := func(sig window.Signal) (before, after window.State, w *window.Window) {
		w = newWindow(t, window.Config{Initial: 10})
		flight := fill(t, w, t0)
		w.Done(t0, flight[0], window.Feedback{Signal: window.Accepted, Headroom: 30, HeadroomKnown: true})
		before = w.State()
		// Two victims of one decision: one signal.
		w.Done(t0, flight[1], window.Feedback{Signal: sig, RetryAfter: 2 * time.Second})
		w.Done(t0, flight[2], window.Feedback{Signal: sig, RetryAfter: time.Second})
		return before, w.State(), w
	}
	sBefore, sAfter, _ := run(window.Saturated)
	before, after, w := run(window.Evicted)
	if before != sBefore || after != sAfter {
		t.Errorf("Evicted: %+v → %+v; Saturated: %+v → %+v; want the same", before, after, sBefore, sAfter)
	}
	if !after.Capped || after.HeadroomCap != 7 {
		t.Errorf("after the evictions with 7 in flight: cap %d (capped %v), want 7", after.HeadroomCap, after.Capped)
	}
	if after.Decreases != before.Decreases+1 || after.CongestionWindow != before.CongestionWindow/2 {
		t.Errorf("window %v → %v with %d → %d decreases: want one halving", before.CongestionWindow, after.CongestionWindow, before.Decreases, after.Decreases)
	}
	if want := t0.Add(2 * time.Second); !after.ClosedUntil.Equal(want) {
		t.Errorf("closed until %v, want %v (the longer Retry-After)", after.ClosedUntil, want)
	}
	if _, ok := w.TryAcquire(t0.Add(time.Second)); ok {
		t.Error("sent before the eviction's Retry-After passed")
	}
}

// Once its Retry-After has passed, an evicted request may be sent again:
// it is Retryable, and the window, with room under its limit, lets it go.
func TestEvictedIsRetriedAfterItsRetryAfter(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 4})
	flight := fill(t, w, t0)
	h := http.Header{}
	h.Set(window.DroppedReasonHeader, window.ReasonEvictedPriority)
	h.Set("Retry-After", "3")
	fb := window.Read(http.StatusTooManyRequests, h, t0)
	if fb.Signal != window.Evicted || !fb.Signal.Retryable() || fb.RetryAfter != 3*time.Second {
		t.Fatalf("Read = %+v (retryable %v), want a retryable eviction after 3s", fb, fb.Signal.Retryable())
	}
	for _, tk := range flight[:2] {
		w.Done(t0, tk, fb)
	}
	if w.Limit() != 2 || w.InFlight() != 2 {
		t.Fatalf("limit %d with %d in flight after the evictions, want 2 and 2", w.Limit(), w.InFlight())
	}
	w.Done(t0, flight[2], accepted())
	if _, ok := w.TryAcquire(t0.Add(3*time.Second - time.Nanosecond)); ok {
		t.Error("the retry went before the Retry-After passed")
	}
	if _, ok := w.TryAcquire(t0.Add(3 * time.Second)); !ok {
		t.Error("the retry was refused once the Retry-After passed, with room under the limit")
	}
}

func TestSignalNamesAndRetryable(t *testing.T) {
	for _, c := range []struct {
		s         window.Signal
		name      string
		retryable bool
	}{
		{window.Accepted, "accepted", false},
		{window.Saturated, "saturated", true},
		{window.Expired, "expired", true},
		{window.Failed, "failed", false},
		{window.Evicted, "evicted", true},
		{window.Signal(0), "Signal(0)", false},
	} {
		if got := c.s.String(); got != c.name {
			t.Errorf("Signal(%d).String() = %q, want %q", int(c.s), got, c.name)
		}
		if got := c.s.Retryable(); got != c.retryable {
			t.Errorf("%v.Retryable() = %v, want %v", c.s, got, c.retryable)
		}
	}
}

// A router that evicts in flight answers a revoked request 429
// evicted-priority with a Retry-After. The dispatcher treats it as a
// refusal for room: the window shrinks and pauses, and the request goes
// again once the pause is over.
func Example_eviction() {
	w, err := window.New(window.Config{Initial: 4})
	if err != nil {
		panic(err)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var flight []window.Ticket
	for {
		t, ok := w.TryAcquire(now)
		if !ok {
			break
		}
		flight = append(flight, t)
	}

	evicted := http.Header{}
	evicted.Set("x-llm-d-request-dropped-reason", "evicted-priority")
	evicted.Set("Retry-After", "2")
	fb := window.Read(http.StatusTooManyRequests, evicted, now)
	w.Done(now, flight[0], fb)
	fmt.Println(fb.Signal, "retryable:", fb.Signal.Retryable(), "limit:", w.Limit())

	// Two of the others complete a second later.
	now = now.Add(time.Second)
	for _, t := range flight[1:3] {
		w.Done(now, t, window.Read(http.StatusOK, http.Header{}, now))
	}
	_, sent := w.TryAcquire(now)
	fmt.Println("in flight:", w.InFlight(), "limit:", w.Limit(), "retry sent after 1s:", sent)
	_, sent = w.TryAcquire(now.Add(time.Second))
	fmt.Println("retry sent after 2s:", sent)
	// Output:
	// evicted retryable: true limit: 2
	// in flight: 1 limit: 2 retry sent after 1s: false
	// retry sent after 2s: true
}
