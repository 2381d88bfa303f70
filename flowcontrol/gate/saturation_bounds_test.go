package gate_test

// Readings a model server or a scraper gone wrong may send: NaN, the
// infinities, negative counts, fractions out of range, times in the
// future. Each fails closed (issue 21, defect 8).

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
	"pgregory.net/rapid"
)

// Defect 8: a NaN or −Inf KV-cache reading counted as room, and Saturation
// returned NaN. Every reading out of range fails closed, as stale metrics
// do.
func TestSaturationFailsClosedOnReadingsOutOfRange(t *testing.T) {
	good := gate.Metrics{Waiting: 1, Running: 2, KVCache: 0.3} // room 4 under the defaults
	for name, bad := range map[string]gate.Metrics{
		"NaN KV cache":        {KVCache: math.NaN()},
		"-Inf KV cache":       {KVCache: math.Inf(-1)},
		"+Inf KV cache":       {KVCache: math.Inf(1)},
		"negative KV cache":   {KVCache: -0.1},
		"KV cache above 1":    {KVCache: 1.5},
		"negative waiting":    {Waiting: -1, KVCache: 0.1},
		"most negative queue": {Waiting: math.MinInt, KVCache: 0.1},
		"negative running":    {Running: -3, KVCache: 0.1},
	} {
		t.Run(name, func(t *testing.T) {
			clock := newClock()
			g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock})
			g.Update("a", bad)
			if n := acquireAll(g); n != 0 {
				t.Fatalf("admitted %d on a reading %+v", n, bad)
			}
			if s := g.Saturation(); s != 1 {
				t.Fatalf("Saturation() = %v on a reading %+v, want 1", s, bad)
			}
			if st := g.Status(); st.Saturated != 1 || st.Fresh != 0 || st.Budget != 0 {
				t.Fatalf("Status = %+v, want the endpoint saturated, not fresh, no budget", st)
			}
			if err := g.Ready(); err == nil || !strings.Contains(err.Error(), "out of range") {
				t.Fatalf("Ready() = %v, want it to fail closed naming values out of range", err)
			}

			// A good endpoint whose next reading goes bad loses its room at
			// once, rather than keeping the last good reading's.
			clock.Advance(time.Millisecond)
			g.Update("b", good)
			if n := acquireAll(g); n != 4 {
				t.Fatalf("admitted %d on b's good reading, want 4", n)
			}
			clock.Advance(time.Millisecond)
			g.Update("b", bad)
			clock.Advance(time.Millisecond)
			g.Update("a", good)
			if n := acquireAll(g); n != 4 {
				t.Fatalf("admitted %d with a good and b bad, want a's room 4", n)
			}
			if s := g.Saturation(); math.IsNaN(s) || s < 0.5 || s > 1 {
				t.Fatalf("Saturation() = %v, want b counting 1", s)
			}
			// The next good reading counts again.
			clock.Advance(time.Millisecond)
			g.Update("b", good)
			if st := g.Status(); st.Fresh != 2 {
				t.Fatalf("Status = %+v after b's good reading, want both fresh", st)
			}
		})
	}
}

func TestSaturationReadingFromTheFutureFailsClosed(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock})
	// Read an hour from now: it would stay fresh for an hour and shut out
	// every reading before then.
	g.Update("a", gate.Metrics{KVCache: 0.1, ReadAt: clock.Now().Add(time.Hour)})
	if n := acquireAll(g); n != 0 {
		t.Fatalf("admitted %d on a reading from the future", n)
	}
	clock.Advance(time.Millisecond)
	g.Update("a", gate.Metrics{KVCache: 0.1, ReadAt: clock.Now()})
	if n := acquireAll(g); n != 5 {
		t.Fatalf("admitted %d on the next reading, want 5: the future one must not hide it", n)
	}
}

func TestSaturationHugeThresholdsDoNotWrap(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock, QueueDepthThreshold: math.MaxInt, MetricsStalenessThreshold: time.Duration(math.MaxInt64)})
	for _, name := range []string{"a", "b", "c"} {
		g.Update(name, gate.Metrics{KVCache: 0.1})
	}
	if st := g.Status(); st.Room != math.MaxInt64 || st.Budget != math.MaxInt64 {
		t.Fatalf("Status = %+v, want the summed room and budget saturated at MaxInt64", st)
	}
	if !g.TryAcquire(0) {
		t.Fatal("refused with a room of 3×MaxInt")
	}
	if s := g.DetectorSaturation(); s != 0.1/gate.DefaultKVCacheUtilThreshold {
		t.Fatalf("DetectorSaturation() = %v, want the KV cache's 0.1/0.8", s)
	}
	if s := g.Saturation(); math.Abs(s-0.1) > 1e-12 {
		t.Fatalf("Saturation() = %v, want the KV cache's 0.1", s)
	}
}

func TestSaturationBudgetWithoutFreshEndpointsIsZero(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock})
	g.Update("a", gate.Metrics{KVCache: 0.1})
	if n := acquireAll(g); n != 5 {
		t.Fatalf("admitted %d, want 5", n)
	}
	clock.Advance(gate.DefaultMetricsStalenessThreshold)
	if st := g.Status(); st.Budget != 0 || st.Fresh != 0 {
		t.Fatalf("Status = %+v once stale after 5 starts, want no budget", st)
	}
}

func TestSaturationConfigRefusesNonFiniteThresholds(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := gate.Saturation(gate.SaturationConfig{KVCacheUtilThreshold: v})
		if err == nil || !strings.Contains(err.Error(), "KVCacheUtilThreshold") {
			t.Errorf("KVCacheUtilThreshold %v: %v, want an error naming the field", v, err)
		}
	}
}

// drawMetrics draws a reading, hostile about half the time.
func drawMetrics(t *rapid.T, now time.Time) gate.Metrics {
	count := rapid.OneOf(rapid.IntRange(0, 10), rapid.IntRange(math.MinInt, math.MaxInt), rapid.SampledFrom([]int{-1, math.MinInt, math.MaxInt}))
	kv := rapid.OneOf(rapid.Float64Range(0, 1), rapid.Float64(),
		rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), -1e-300, 1 + 1e-15, math.MaxFloat64, -math.MaxFloat64}))
	m := gate.Metrics{Waiting: count.Draw(t, "waiting"), Running: count.Draw(t, "running"), KVCache: kv.Draw(t, "kv")}
	switch rapid.IntRange(0, 3).Draw(t, "readAt") {
	case 1:
		m.ReadAt = now.Add(-time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, "age")))
	case 2:
		m.ReadAt = now.Add(time.Duration(rapid.Int64Range(1, math.MaxInt64).Draw(t, "ahead")))
	}
	return m
}

// inRange reports whether every field of m is in its documented range.
func inRange(m gate.Metrics, now time.Time) bool {
	return m.Waiting >= 0 && m.Running >= 0 && m.KVCache >= 0 && m.KVCache <= 1 && !m.ReadAt.After(now)
}

// TestSaturationProperty feeds one gate drawn readings and another the
// same readings with each out-of-range one replaced by a saturated reading
// (a full queue and KV cache) of the same time: the first never admits
// more than the second, and its gauge stays in [0, 1].
func TestSaturationProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := newClock()
		cfg := gate.SaturationConfig{
			Clock:                clock,
			QueueDepthThreshold:  rapid.OneOf(rapid.IntRange(1, 10), rapid.Just(math.MaxInt)).Draw(t, "queueDepthThreshold"),
			KVCacheUtilThreshold: rapid.OneOf(rapid.Float64Range(math.SmallestNonzeroFloat64, 1), rapid.Just(1.0)).Draw(t, "kvCacheUtilThreshold"),
			SlotsPerEndpoint:     rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 64), rapid.Just(math.MaxInt)).Draw(t, "slotsPerEndpoint"),
		}
		hostile, err := gate.Saturation(cfg)
		if err != nil {
			t.Fatal(err)
		}
		reference, err := gate.Saturation(cfg)
		if err != nil {
			t.Fatal(err)
		}
		names := []string{"a", "b", "c"}
		held := 0 // starts both gates granted and that may be handed back
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "action") {
			case 0:
				clock.Advance(time.Duration(rapid.Int64Range(0, int64(300*time.Millisecond)).Draw(t, "advance")))
			case 1:
				if held > 0 { // a composing gate refused: the start comes back unused
					hostile.Release(0)
					reference.Release(0)
					held--
				}
			default:
				name := rapid.SampledFrom(names).Draw(t, "endpoint")
				now := clock.Now()
				m := drawMetrics(t, now)
				safe := m
				if !inRange(m, now) {
					safe = gate.Metrics{Waiting: math.MaxInt, KVCache: 1, ReadAt: m.ReadAt}
					if m.ReadAt.After(now) {
						safe.ReadAt = now
					}
				}
				hostile.Update(name, m)
				reference.Update(name, safe)
			}
			if s := hostile.Saturation(); math.IsNaN(s) || s < 0 || s > 1 {
				t.Fatalf("Saturation() = %v, want a number in [0, 1]", s)
			}
			if s := hostile.DetectorSaturation(); math.IsNaN(s) || s < 0 || s > 1 {
				t.Fatalf("DetectorSaturation() = %v, want a number in [0, 1]", s)
			}
			got, want := hostile.Status().Budget, reference.Status().Budget
			if got < 0 || got > want {
				t.Fatalf("budget %d on hostile readings, %d on saturated ones in their place", got, want)
			}
			k := rapid.IntRange(0, 3).Draw(t, "starts")
			for range k {
				h, r := hostile.TryAcquire(0), reference.TryAcquire(0)
				if h && !r {
					t.Fatal("admitted on a hostile reading where a saturated one refuses")
				}
				switch {
				case h && r:
					held++
				case r: // keep the two in step
					reference.Release(0)
				}
			}
		}
	})
}
