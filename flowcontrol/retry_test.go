package flowcontrol

import (
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return epoch.Add(d) }

func TestDrainMeterCountsBusyTimeOnly(t *testing.T) {
	var m drainMeter
	m.busy(at(0))
	for i := 1; i <= 3; i++ {
		m.dispatched(at(time.Duration(i) * 250 * time.Millisecond))
	}
	if m.measured {
		t.Fatal("measured before rateWindow of busy time")
	}
	m.idle(at(800 * time.Millisecond)) // 0.8s busy, 3 dispatches
	// A long idle stretch adds nothing: the window still holds 0.8s.
	m.busy(at(45 * time.Second))
	if m.roll(at(45 * time.Second)); m.measured {
		t.Fatal("after idle: measured, with 0.8s of busy time")
	}
	m.dispatched(at(45*time.Second + 200*time.Millisecond)) // 1s busy, 4 dispatches
	if !m.measured || m.avg != 4 {
		t.Fatalf("after 1s busy: measured %v avg %v, want 4/s", m.measured, m.avg)
	}
	// An idle minute between two dispatches adds nothing: the next window
	// holds 1s of busy time and one dispatch, and moves the average by
	// 1-e^(-1/5) of the way to 1/s.
	start := 45*time.Second + 200*time.Millisecond
	m.idle(at(start))
	m.busy(at(start + time.Minute))
	m.dispatched(at(start + time.Minute + time.Second))
	want := 4 + (1-4)*(1-math.Exp(-0.2))
	if math.Abs(m.avg-want) > 1e-12 {
		t.Fatalf("avg %v, want %v", m.avg, want)
	}
}

func TestRetryAfterSpreadsRefusals(t *testing.T) {
	m := drainMeter{avg: 2, measured: true} // one place every 500ms
	now := epoch
	var got []time.Duration
	for range 5 {
		got = append(got, m.retryAfter(now, 1))
	}
	// Promised at 0.5, 1, 1.5, 2, 2.5s: rounded up.
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("RetryAfter %v, want %v", got, want)
	}
	// Promises in the past do not hold later refusals back.
	if got := m.retryAfter(now.Add(time.Minute), 1); got != time.Second {
		t.Fatalf("a minute later: %v, want 1s", got)
	}
}

func TestRetryAfterBounds(t *testing.T) {
	m := drainMeter{avg: 1000, measured: true}
	if got := m.retryAfter(epoch, 1); got != time.Second {
		t.Fatalf("fast drain: %v, want the 1s floor", got)
	}
	m = drainMeter{avg: 0.001, measured: true}
	if got := m.retryAfter(epoch, 1); got != 30*time.Second {
		t.Fatalf("slow drain: %v, want the 30s cap", got)
	}
	if got := m.retryAfter(epoch, 1); got != 30*time.Second {
		t.Fatalf("slow drain, second refusal: %v, want the 30s cap", got)
	}
	m = drainMeter{avg: 0, measured: true}
	if got := m.retryAfter(epoch, 1); got != 30*time.Second {
		t.Fatalf("measured rate 0: %v, want 30s", got)
	}
}

// TestRetryAfterPriorSpreadsTheFirstBurst: before a rate is measured the
// scope drains, by the prior, one place per PriorServiceTime per admission
// in flight; the refusals are spread at that rate, and the promises carry
// over to the measured rate.
func TestRetryAfterPriorSpreadsTheFirstBurst(t *testing.T) {
	var m drainMeter
	now := epoch
	var got []time.Duration
	for range 9 {
		got = append(got, m.retryAfter(now, 4)) // a place every 250ms
	}
	want := []time.Duration{1, 1, 1, 1, 2, 2, 2, 2, 3}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(got, want) {
		t.Fatalf("RetryAfter %v, want %v (4 in flight, one place every %v)", got, want, PriorServiceTime/4)
	}
	// Nothing in flight counts as one: one place per PriorServiceTime.
	var empty drainMeter
	if got := empty.retryAfter(now, 0); got != ceilSeconds(PriorServiceTime) {
		t.Fatalf("nothing in flight: %v, want %v", got, ceilSeconds(PriorServiceTime))
	}
	// Once measured (2/s), the next promise follows the last of the
	// prior's, at 2.25s, by 500ms.
	m.avg, m.measured = 2, true
	if got := m.retryAfter(now, 4); got != 3*time.Second {
		t.Fatalf("first measured refusal: %v, want 3s (promised at 2.75s)", got)
	}
}

// TestRetryAfterIsWholeBoundedSeconds: whatever the history and the
// admissions in flight, the value is a whole number of seconds in
// [1s, 30s], before a rate is measured (the prior) as after.
func TestRetryAfterIsWholeBoundedSeconds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var m drainMeter
		now := epoch
		busy := false
		for _, step := range rapid.SliceOfN(rapid.IntRange(0, 3), 1, 80).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(t, "gap")))
			switch step {
			case 0:
				if !busy {
					m.busy(now)
					busy = true
				}
			case 1:
				if busy {
					m.dispatched(now)
				}
			case 2:
				if busy {
					m.idle(now)
					busy = false
				}
			default:
				got := m.retryAfter(now, rapid.IntRange(0, 1<<20).Draw(t, "in flight"))
				if got < time.Second || got > 30*time.Second || got%time.Second != 0 {
					t.Fatalf("RetryAfter %v", got)
				}
			}
			if m.avg < 0 || math.IsNaN(m.avg) || math.IsInf(m.avg, 0) {
				t.Fatalf("avg %v", m.avg)
			}
		}
	})
}
