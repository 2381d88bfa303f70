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
	if got := m.retryAfter(at(time.Hour)); got != 0 {
		t.Fatalf("nothing measured: RetryAfter %v, want none", got)
	}
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
	if got := m.retryAfter(at(45 * time.Second)); got != 0 || m.measured {
		t.Fatalf("after idle: RetryAfter %v measured %v, want none", got, m.measured)
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
		got = append(got, m.retryAfter(now))
	}
	// Promised at 0.5, 1, 1.5, 2, 2.5s: rounded up.
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("RetryAfter %v, want %v", got, want)
	}
	// Promises in the past do not hold later refusals back.
	if got := m.retryAfter(now.Add(time.Minute)); got != time.Second {
		t.Fatalf("a minute later: %v, want 1s", got)
	}
}

func TestRetryAfterBounds(t *testing.T) {
	m := drainMeter{avg: 1000, measured: true}
	if got := m.retryAfter(epoch); got != time.Second {
		t.Fatalf("fast drain: %v, want the 1s floor", got)
	}
	m = drainMeter{avg: 0.001, measured: true}
	if got := m.retryAfter(epoch); got != 30*time.Second {
		t.Fatalf("slow drain: %v, want the 30s cap", got)
	}
	if got := m.retryAfter(epoch); got != 30*time.Second {
		t.Fatalf("slow drain, second refusal: %v, want the 30s cap", got)
	}
	m = drainMeter{avg: 0, measured: true}
	if got := m.retryAfter(epoch); got != 30*time.Second {
		t.Fatalf("measured rate 0: %v, want 30s", got)
	}
}

// TestRetryAfterIsWholeBoundedSeconds: whatever the history, the value is
// absent before a rate is measured and otherwise a whole number of seconds
// in [1s, 30s].
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
				got := m.retryAfter(now)
				if got == 0 {
					if m.measured {
						t.Fatalf("no Retry-After with a measured rate %v", m.avg)
					}
					continue
				}
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
