package flowcontrol

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return epoch.Add(d) }

func TestRateMeterMeasuresWindows(t *testing.T) {
	var m rateMeter
	if got := m.retryAfter(at(time.Hour), 5); got != 0 {
		t.Fatalf("no dispatch yet: RetryAfter %v, want none", got)
	}
	m.record(at(0)) // opens the first window
	for i := 1; i <= 3; i++ {
		m.record(at(time.Duration(i) * 250 * time.Millisecond))
	}
	if m.measured {
		t.Fatal("measured before a window of rateWindow closed")
	}
	if got := m.retryAfter(at(900*time.Millisecond), 5); got != 0 {
		t.Fatalf("RetryAfter %v within the first window, want none", got)
	}
	m.record(at(time.Second)) // 4 dispatches after the start, over 1s
	if !m.measured || m.avg != 4 {
		t.Fatalf("after 1s: measured %v avg %v, want 4/s", m.measured, m.avg)
	}
	// Immediate dispatches (no clock) count into the open window, which
	// the next clock reading closes: 8 more over the next 2s = 4/s.
	for range 8 {
		m.record(time.Time{})
	}
	if got := m.retryAfter(at(3*time.Second), 9); got != 3*time.Second {
		t.Fatalf("9 queued at 4/s: RetryAfter %v, want 3s (2.25s rounded up)", got)
	}
	if m.avg != 4 {
		t.Fatalf("avg %v, want 4", m.avg)
	}
	// A 5s window at 1/s moves the average by 1-e^-1 of the way.
	for i := 1; i <= 5; i++ {
		m.record(at(3*time.Second + time.Duration(i)*time.Second))
	}
	want := 4 + (1-4)*(1-math.Exp(-1))
	if math.Abs(m.avg-want) > 1e-12 {
		t.Fatalf("avg %v, want %v", m.avg, want)
	}
}

func TestRetryAfterBounds(t *testing.T) {
	m := rateMeter{start: epoch, avg: 1000, measured: true}
	if got := m.retryAfter(epoch, 0); got != time.Second {
		t.Fatalf("empty band: %v, want the 1s floor", got)
	}
	if got := m.retryAfter(epoch, 1_000_000); got != 30*time.Second {
		t.Fatalf("huge backlog: %v, want the 30s cap", got)
	}
	m = rateMeter{start: epoch, avg: 0, measured: true}
	if got := m.retryAfter(epoch, 3); got != 30*time.Second {
		t.Fatalf("measured rate 0: %v, want 30s", got)
	}
}

// TestRetryAfterIsWholeBoundedSeconds: whatever the dispatch history, the
// projection is absent before a rate is measured and otherwise a whole
// number of seconds in [1s, 30s].
func TestRetryAfterIsWholeBoundedSeconds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var m rateMeter
		now := epoch
		for _, step := range rapid.SliceOfN(rapid.IntRange(0, 3), 1, 60).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(t, "gap")))
			switch step {
			case 0:
				m.record(now)
			case 1:
				m.record(time.Time{})
			default:
				startedBefore := !m.start.IsZero()
				got := m.retryAfter(now, rapid.Int64Range(0, 1<<40).Draw(t, "queued"))
				if got == 0 {
					if m.measured {
						t.Fatalf("no Retry-After with a measured rate %v", m.avg)
					}
					continue
				}
				if !startedBefore || got < time.Second || got > 30*time.Second || got%time.Second != 0 {
					t.Fatalf("RetryAfter %v (window started %v)", got, startedBefore)
				}
			}
			if m.avg < 0 || math.IsNaN(m.avg) || math.IsInf(m.avg, 0) {
				t.Fatalf("avg %v", m.avg)
			}
		}
	})
}

func TestBandSetSearch(t *testing.T) {
	set := &bandSet{desc: []*band{{priority: 9}, {priority: 4}, {priority: 0}, {priority: -3}}}
	cases := []struct {
		p     int
		i     int
		found bool
	}{{10, 0, false}, {9, 0, true}, {5, 1, false}, {4, 1, true}, {1, 2, false}, {0, 2, true}, {-1, 3, false}, {-3, 3, true}, {-4, 4, false}}
	for _, tc := range cases {
		if i, found := set.search(tc.p); i != tc.i || found != tc.found {
			t.Errorf("search(%d) = %d, %v; want %d, %v", tc.p, i, found, tc.i, tc.found)
		}
	}
}
