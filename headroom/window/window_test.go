package window_test

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegate/sluice/headroom/window"
	"pgregory.net/rapid"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newWindow(t testing.TB, cfg window.Config) *window.Window {
	t.Helper()
	w, err := window.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// fill acquires until the window refuses and returns the tickets.
func fill(t testing.TB, w *window.Window, now time.Time) []window.Ticket {
	t.Helper()
	var ts []window.Ticket
	for {
		tk, ok := w.TryAcquire(now)
		if !ok {
			return ts
		}
		ts = append(ts, tk)
		if len(ts) > 1<<20 {
			t.Fatal("window never refused")
		}
	}
}

func accepted() window.Feedback { return window.Feedback{Signal: window.Accepted} }

func saturated() window.Feedback { return window.Feedback{Signal: window.Saturated} }

// round sends a full window and accepts every request; it returns the
// number sent.
func round(t testing.TB, w *window.Window, now time.Time) int {
	t.Helper()
	ts := fill(t, w, now)
	for _, tk := range ts {
		w.Done(now, tk, accepted())
	}
	return len(ts)
}

func TestSlowStartDoublesPerRound(t *testing.T) {
	w := newWindow(t, window.Config{})
	var got []int
	for range 6 {
		got = append(got, round(t, w, t0))
	}
	want := []int{1, 2, 4, 8, 16, 32}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sizes per round %v, want %v", got, want)
	}
}

func TestAdditiveIncreaseAfterDecrease(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 20})
	tk, _ := w.TryAcquire(t0)
	w.Done(t0, tk, saturated()) // 20 → 10, slow start over
	var got []int
	for range 4 {
		got = append(got, round(t, w, t0))
	}
	// 10 accepts at +1/cwnd each lift 10 to just under 11 (the window grows
	// as it goes), then 11, 12: about one per round.
	want := []int{10, 10, 11, 12}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sizes per round %v, want %v", got, want)
	}
}

func TestMaxBoundsGrowth(t *testing.T) {
	w := newWindow(t, window.Config{Max: 5})
	for range 10 {
		round(t, w, t0)
	}
	if got := w.Limit(); got != 5 {
		t.Errorf("limit %d, want Max 5", got)
	}
}

func TestDecreaseOncePerFlight(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 16})
	flight := fill(t, w, t0)
	if len(flight) != 16 {
		t.Fatalf("sent %d, want 16", len(flight))
	}
	// Every request of the flight is rejected: one decrease.
	for _, tk := range flight {
		w.Done(t0, tk, saturated())
	}
	st := w.State()
	if st.Decreases != 1 || st.Limit != 8 || st.SlowStartThreshold != 8 {
		t.Fatalf("after a rejected flight: %+v, want 1 decrease to 8", st)
	}
	// A request sent after the decrease belongs to a new flight.
	tk, ok := w.TryAcquire(t0)
	if !ok {
		t.Fatal("window closed without Retry-After")
	}
	w.Done(t0, tk, saturated())
	if st := w.State(); st.Decreases != 2 || st.Limit != 4 {
		t.Errorf("after a rejection of the next flight: %+v, want 2 decreases, limit 4", st)
	}
}

func TestDecreaseStopsAtMin(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 4, Min: 3})
	for range 5 {
		tk, _ := w.TryAcquire(t0)
		w.Done(t0, tk, saturated())
	}
	if got := w.Limit(); got != 3 {
		t.Errorf("limit %d, want Min 3", got)
	}
}

func TestFailedChangesNothing(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 4})
	before := w.State()
	tk, _ := w.TryAcquire(t0)
	w.Done(t0, tk, window.Feedback{Signal: window.Failed})
	if after := w.State(); after != before {
		t.Errorf("a failure changed the window: %+v, was %+v", after, before)
	}
}

func TestExpiredShrinksOncePerFlight(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 8})
	for _, tk := range fill(t, w, t0) {
		w.Done(t0, tk, window.Feedback{Signal: window.Expired})
	}
	if st := w.State(); st.Decreases != 1 || st.Limit != 4 {
		t.Errorf("after a flight of expiries: %+v, want one decrease to 4", st)
	}
}

// TestRetryAfterOfAnExpiryClosesWindow: an expiry's Retry-After pauses the
// window as a refusal's does, besides the one decrease it earns; its queue
// duration changes nothing more.
func TestRetryAfterOfAnExpiryClosesWindow(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 4})
	flight := fill(t, w, t0)
	h := http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-ttl-expired"},
		"X-Llm-D-Flow-Queue-Duration-Ms": {"3000"}, "Retry-After": {"3"}}
	w.Done(t0, flight[0], window.Read(http.StatusTooManyRequests, h, t0))
	if got := w.ClosedUntil(); !got.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("closed until %v, want t0+3s", got)
	}
	if st := w.State(); st.Decreases != 1 || st.Limit != 2 {
		t.Errorf("after an expiry: %+v, want one decrease to 2", st)
	}
	for _, tk := range flight[1:] {
		w.Done(t0, tk, window.Feedback{Signal: window.Accepted})
	}
	if _, ok := w.TryAcquire(t0.Add(3*time.Second - time.Nanosecond)); ok {
		t.Error("sent before the expiry's Retry-After ended")
	}
	if _, ok := w.TryAcquire(t0.Add(3 * time.Second)); !ok {
		t.Error("refused once the expiry's Retry-After ended")
	}
}

func TestRetryAfterClosesWindow(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 4})
	flight := fill(t, w, t0)
	w.Done(t0, flight[0], window.Feedback{Signal: window.Saturated, RetryAfter: 5 * time.Second})
	// A shorter Retry-After later does not shorten the closure.
	w.Done(t0.Add(time.Second), flight[1], window.Feedback{Signal: window.Failed, RetryAfter: time.Second})
	w.Done(t0.Add(time.Second), flight[2], window.Feedback{Signal: window.Failed})
	// One in flight, under the halved limit of 2: only the closure refuses.
	if got := w.ClosedUntil(); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("closed until %v, want t0+5s", got)
	}
	if _, ok := w.TryAcquire(t0.Add(5*time.Second - time.Nanosecond)); ok {
		t.Error("sent before Retry-After ended")
	}
	if _, ok := w.TryAcquire(t0.Add(5 * time.Second)); !ok {
		t.Error("window still closed when Retry-After ended")
	}
}

func TestHeadroomCapsWindow(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 20, Share: 1})
	flight := fill(t, w, t0) // 20 in flight
	// The band reports room for 3 more: 19 still in flight + 3.
	w.Done(t0, flight[0], window.Feedback{Signal: window.Accepted, Headroom: 3, HeadroomKnown: true})
	st := w.State()
	if !st.Capped || st.HeadroomCap != 22 || st.Limit != 21 {
		t.Fatalf("after headroom 3 with 19 in flight: %+v, want cap 22, limit min(cwnd 21, 22)", st)
	}
	if got := len(fill(t, w, t0)); got != 2 {
		t.Errorf("sent %d more, want 2", got)
	}

	// No room: only the requests already in flight.
	w.Done(t0, flight[1], window.Feedback{Signal: window.Accepted, Headroom: 0, HeadroomKnown: true})
	if got := w.Limit(); got != 20 {
		t.Errorf("limit %d with 20 in flight and no headroom, want 20", got)
	}
	if _, ok := w.TryAcquire(t0); ok {
		t.Error("sent with no headroom")
	}

	// A success without the header lifts the cap.
	w.Done(t0, flight[2], accepted())
	if st := w.State(); st.Capped || st.Limit < 21 {
		t.Errorf("after a success without headroom: %+v, want uncapped", st)
	}
}

func TestHeadroomZeroKeepsOneProbe(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 8})
	tk, _ := w.TryAcquire(t0)
	w.Done(t0, tk, window.Feedback{Signal: window.Accepted, Headroom: 0, HeadroomKnown: true})
	if got := len(fill(t, w, t0)); got != 1 {
		t.Errorf("sent %d with nothing in flight and no headroom, want 1 probe (Min)", got)
	}
}

func TestRejectionMeansNoHeadroom(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 10, Share: 1})
	flight := fill(t, w, t0)
	w.Done(t0, flight[0], window.Feedback{Signal: window.Accepted, Headroom: 50, HeadroomKnown: true})
	w.Done(t0, flight[1], saturated())
	st := w.State()
	if !st.Capped || st.HeadroomCap != 8 {
		t.Errorf("after a rejection with 8 in flight: %+v, want cap 8", st)
	}
	// Without a headroom observation before, a rejection sets no cap.
	w2 := newWindow(t, window.Config{Initial: 10})
	tk, _ := w2.TryAcquire(t0)
	w2.Done(t0, tk, saturated())
	if w2.State().Capped {
		t.Error("a rejection capped a window that never saw headroom")
	}
}

func TestHalfTheHeadroom(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 20})
	flight := fill(t, w, t0)
	// 19 in flight, room for 5 more: the window takes ⌊5/2⌋ = 2 of them.
	w.Done(t0, flight[0], window.Feedback{Signal: window.Accepted, Headroom: 5, HeadroomKnown: true})
	if got := len(fill(t, w, t0)); got != 2 {
		t.Errorf("sent %d more with headroom 5, want 2", got)
	}
	// Room for 1: half of it rounds down to none.
	w.Done(t0, flight[1], window.Feedback{Signal: window.Accepted, Headroom: 1, HeadroomKnown: true})
	if _, ok := w.TryAcquire(t0); ok {
		t.Error("took the last place in the band")
	}
}

func TestHeadroomCapHoldsGrowth(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 4, Share: 1})
	for range 10 {
		ts := fill(t, w, t0)
		for _, tk := range ts {
			w.Done(t0, tk, window.Feedback{Signal: window.Accepted, Headroom: 2, HeadroomKnown: true})
		}
	}
	// Each response leaves at most 2 + in flight: the cap binds, so the
	// congestion window stops growing instead of running away.
	if st := w.State(); st.CongestionWindow > 8 {
		t.Errorf("congestion window %.1f grew under a cap of at most %d", st.CongestionWindow, st.InFlight+2)
	}
}

func TestQueueDelayShrinksByATenth(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 10, TargetQueueDelay: 100 * time.Millisecond})
	slow := window.Feedback{Signal: window.Accepted, QueueDelay: 150 * time.Millisecond, QueueDelayKnown: true}
	for _, tk := range fill(t, w, t0) {
		w.Done(t0, tk, slow)
	}
	st := w.State()
	if st.Decreases != 1 || st.CongestionWindow != 9 {
		t.Fatalf("after a slow flight: %+v, want one decrease to 9", st)
	}
	// At the target the window grows again, additively.
	fast := window.Feedback{Signal: window.Accepted, QueueDelay: 100 * time.Millisecond, QueueDelayKnown: true}
	for _, tk := range fill(t, w, t0) {
		w.Done(t0, tk, fast)
	}
	if got := w.State().CongestionWindow; got < 9.9 || got >= 10.1 {
		t.Errorf("congestion window %.2f after one round at the target, want about 10", got)
	}
}

func TestDoneWithoutAcquirePanics(t *testing.T) {
	w := newWindow(t, window.Config{})
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "window: ") {
			t.Errorf("recovered %v, want a window: panic", r)
		}
	}()
	w.Done(t0, window.Ticket{}, accepted())
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		field string
		cfg   window.Config
	}{
		{"Min", window.Config{Min: -1}},
		{"Max", window.Config{Max: -1}},
		{"Max", window.Config{Min: 4, Max: 2}},
		{"Initial", window.Config{Initial: 8, Max: 4}},
		{"Initial", window.Config{Initial: 1, Min: 2, Max: 4}},
		{"Share", window.Config{Share: 1.5}},
		{"Share", window.Config{Share: -0.5}},
		{"Share", window.Config{Share: math.NaN()}},
		{"Backoff", window.Config{Backoff: 1}},
		{"Backoff", window.Config{Backoff: -0.5}},
		{"Backoff", window.Config{Backoff: math.NaN()}},
		{"TargetQueueDelay", window.Config{TargetQueueDelay: -time.Second}},
	} {
		if _, err := window.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.cfg, err, tc.field)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 4, Max: 16})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				tk, ok := w.TryAcquire(t0)
				if !ok {
					continue
				}
				if n := w.InFlight(); n > 16 {
					t.Errorf("%d in flight above Max 16", n)
				}
				fb := accepted()
				if (g+i)%7 == 0 {
					fb = saturated()
				}
				w.Done(t0, tk, fb)
			}
		})
	}
	wg.Wait()
	if n := w.InFlight(); n != 0 {
		t.Errorf("%d in flight after every request is done", n)
	}
}

// A random mix of sends and responses never breaks the window's invariants:
// the limit stays within [Min, Max]; right after a response with headroom h
// and n requests left in flight, the limit is at most max(Min, n + ⌊Share×h⌋);
// the window answers each signal in its documented direction (a refusal, an
// expiry or a slow success never widens it, a prompt success never narrows
// it, a failure changes nothing); a Retry-After never shortens a closure.
func TestWindowInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		minW := rapid.IntRange(1, 4).Draw(rt, "min")
		maxW := rapid.IntRange(minW, 64).Draw(rt, "max")
		share := rapid.SampledFrom([]float64{0.25, 0.5, 1}).Draw(rt, "share")
		w, err := window.New(window.Config{Min: minW, Max: maxW, Share: share, TargetQueueDelay: time.Second})
		if err != nil {
			rt.Fatal(err)
		}
		now := t0
		var flight []window.Ticket
		for range rapid.IntRange(1, 200).Draw(rt, "steps") {
			now = now.Add(rapid.SampledFrom([]time.Duration{0, time.Millisecond, time.Second}).Draw(rt, "advance"))
			if rapid.Bool().Draw(rt, "send") || len(flight) == 0 {
				limit := w.Limit()
				tk, ok := w.TryAcquire(now)
				if ok {
					flight = append(flight, tk)
				}
				if ok && len(flight) > limit {
					rt.Fatalf("sent a request beyond the limit %d", limit)
				}
				if !ok && len(flight) < limit && !now.Before(w.ClosedUntil()) {
					rt.Fatalf("refused with %d in flight under limit %d and the window open", len(flight), limit)
				}
				continue
			}
			i := rapid.IntRange(0, len(flight)-1).Draw(rt, "which")
			fb := window.Feedback{Signal: rapid.SampledFrom([]window.Signal{window.Accepted, window.Saturated, window.Evicted, window.Expired, window.Failed}).Draw(rt, "signal")}
			if rapid.Bool().Draw(rt, "headroom known") {
				fb.Headroom, fb.HeadroomKnown = rapid.Int64Range(-2, 20).Draw(rt, "headroom"), true
			}
			if rapid.Bool().Draw(rt, "queue delay known") {
				fb.QueueDelay, fb.QueueDelayKnown = rapid.SampledFrom([]time.Duration{0, 2 * time.Second}).Draw(rt, "queue delay"), true
			}
			if rapid.Bool().Draw(rt, "retry after") {
				fb.RetryAfter = rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second}).Draw(rt, "retry after value")
			}
			before := w.State()
			w.Done(now, flight[i], fb)
			flight = append(flight[:i], flight[i+1:]...)
			st := w.State()

			if st.InFlight != len(flight) {
				rt.Fatalf("in flight %d, want %d", st.InFlight, len(flight))
			}
			if st.Limit < minW || st.Limit > maxW {
				rt.Fatalf("limit %d outside [%d, %d]", st.Limit, minW, maxW)
			}
			if st.CongestionWindow < float64(minW) || st.CongestionWindow > float64(maxW) {
				rt.Fatalf("congestion window %.2f outside [%d, %d]", st.CongestionWindow, minW, maxW)
			}
			if fb.HeadroomKnown {
				bound := len(flight) + int(share*float64(max(fb.Headroom, 0)))
				if st.Limit > max(minW, bound) {
					rt.Fatalf("limit %d after headroom %d with %d in flight (share %v): above %d", st.Limit, fb.Headroom, len(flight), share, max(minW, bound))
				}
			}
			if st.Decreases > before.Decreases+1 {
				rt.Fatalf("decreases jumped from %d to %d on one response", before.Decreases, st.Decreases)
			}
			slow := fb.QueueDelayKnown && fb.QueueDelay > time.Second
			switch {
			case fb.Signal == window.Saturated || fb.Signal == window.Evicted || fb.Signal == window.Expired || (fb.Signal == window.Accepted && slow):
				if st.CongestionWindow > before.CongestionWindow {
					rt.Fatalf("%v (slow %v) widened the window from %.2f to %.2f", fb.Signal, slow, before.CongestionWindow, st.CongestionWindow)
				}
			case fb.Signal == window.Accepted:
				if st.CongestionWindow < before.CongestionWindow {
					rt.Fatalf("a prompt success narrowed the window from %.2f to %.2f", before.CongestionWindow, st.CongestionWindow)
				}
			default:
				if st.CongestionWindow != before.CongestionWindow || st.Decreases != before.Decreases {
					rt.Fatalf("a failure changed the window: %+v, was %+v", st, before)
				}
			}
			if st.ClosedUntil.Before(before.ClosedUntil) {
				rt.Fatalf("closure shortened from %v to %v", before.ClosedUntil, st.ClosedUntil)
			}
			if fb.RetryAfter > 0 && st.ClosedUntil.Before(now.Add(fb.RetryAfter)) {
				rt.Fatalf("Retry-After %v at %v: closed only until %v", fb.RetryAfter, now, st.ClosedUntil)
			}
		}
	})
}

// A dispatcher reads each response with Read, sends what the window allows
// and feeds the response back. Time is a parameter, so the example runs on a
// fixed clock.
func Example() {
	w, err := window.New(window.Config{Initial: 8})
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
	fmt.Println("sent:", len(flight))

	// The router accepted the first request; its band has room for 4 more.
	ok := http.Header{}
	ok.Set("x-llm-d-flow-band-headroom-requests", "4")
	ok.Set("x-llm-d-flow-queue-duration-ms", "120")
	w.Done(now, flight[0], window.Read(http.StatusOK, ok, now))
	fmt.Println("limit after headroom 4:", w.Limit(), "(7 in flight + half of 4)")

	// The second was refused: the band was full. The window halves, once for
	// this flight, and stays closed for the Retry-After.
	full := http.Header{}
	full.Set("x-llm-d-request-dropped-reason", "rejected-saturated")
	full.Set("Retry-After", "1")
	fb := window.Read(http.StatusTooManyRequests, full, now)
	w.Done(now, flight[1], fb)
	fmt.Println(fb.Signal, "limit:", w.Limit())

	// Three more complete half a second later, with room to spare.
	now = now.Add(500 * time.Millisecond)
	ok.Set("x-llm-d-flow-band-headroom-requests", "10")
	for _, t := range flight[2:5] {
		w.Done(now, t, window.Read(http.StatusOK, ok, now))
	}
	_, open := w.TryAcquire(now)
	fmt.Println("in flight:", w.InFlight(), "limit:", w.Limit(), "open before Retry-After:", open)
	_, open = w.TryAcquire(now.Add(500 * time.Millisecond))
	fmt.Println("open after Retry-After:", open)
	// Output:
	// sent: 8
	// limit after headroom 4: 9 (7 in flight + half of 4)
	// saturated limit: 4
	// in flight: 3 limit: 5 open before Retry-After: false
	// open after Retry-After: true
}
