package gate_test

import (
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// The gates' own cost per admission, as the controller calls them: a
// plain gate's TryAcquire and Release, a metered gate's TryAcquire, Took
// and Returned. The baseline is gate.MaxInFlight in the same run.
//
//	go test -run '^$' -bench Gate -count 5 ./flowcontrol/gate
func BenchmarkGate(b *testing.B) {
	plain := func(g gate.Gate) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !g.TryAcquire(0) {
					b.Fatal("refused")
				}
				g.Release(0)
			}
		}
	}
	metered := func(g gate.MeteredGate, refill func()) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			slot := gate.Slot{Priority: 0, Cost: 700}
			use := gate.Usage{Slot: slot, Held: time.Second, FirstToken: 80 * time.Millisecond}
			i := 0
			for b.Loop() {
				if !g.TryAcquire(0) {
					if refill == nil {
						b.Fatal("refused")
					}
					refill()
					if !g.TryAcquire(0) {
						b.Fatal("refused after a refill")
					}
				}
				g.Took(slot)
				g.Returned(use)
				i++
			}
		}
	}
	saturation := func() (*gate.SaturationGate, func()) {
		clock := newClock()
		g, _ := gate.Saturation(gate.SaturationConfig{Clock: clock, QueueDepthThreshold: 1 << 30, MetricsStalenessThreshold: time.Hour})
		refill := func() {
			clock.Advance(time.Millisecond)
			g.Update("e", gate.Metrics{})
		}
		refill()
		return g, refill
	}
	concurrency := func(mode string) *gate.ConcurrencyGate {
		g, _ := gate.Concurrency(gate.ConcurrencyConfig{Mode: mode, MaxConcurrency: 64, MaxTokenConcurrency: 100_000})
		return g
	}

	b.Run("gate=MaxInFlight", plain(gate.MaxInFlight(64)))
	sat, refill := saturation()
	b.Run("gate=Saturation", metered(sat, refill))
	b.Run("gate=Concurrency/mode=requests", metered(concurrency(gate.ModeRequests), nil))
	b.Run("gate=Concurrency/mode=tokens", metered(concurrency(gate.ModeTokens), nil))
	b.Run("gate=Concurrency/mode=hybrid", metered(concurrency(gate.ModeHybrid), nil))
	adaptive, _ := gate.Adaptive(gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: 64})
	b.Run("gate=Adaptive", metered(adaptive, nil))
	sat, refill = saturation()
	b.Run("gate=All(Saturation,Concurrency)", metered(gate.All(sat, concurrency(gate.ModeHybrid)).(gate.MeteredGate), refill))
}

// A band ceiling's cost per admission: TryAcquire through gate.Ceiling
// beside the bare gate it wraps (the baseline), each called as the
// controller calls it, on the lowest of three bands, whose ceiling admits.
//
//	go test -run '^$' -bench Ceiling -count 5 ./flowcontrol/gate
func BenchmarkCeiling(b *testing.B) {
	bands := []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}, {Priority: -5}}
	bind := func(b *testing.B, g gate.Gate) {
		fc, err := flowcontrol.New(flowcontrol.Config{Bands: bands, Gate: g})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(fc.Close)
	}
	// Each run builds its gate afresh: a gate serves one controller, and
	// the benchmark function runs more than once.
	run := func(newGate func() gate.Gate) func(*testing.B) {
		return func(b *testing.B) {
			g := newGate()
			bind(b, g)
			slot := gate.Slot{Priority: -5, Cost: 700}
			use := gate.Usage{Slot: slot, Held: time.Second}
			m, metered := g.(gate.MeteredGate)
			b.ReportAllocs()
			for b.Loop() {
				if !g.TryAcquire(-5) {
					b.Fatal("refused")
				}
				if metered {
					m.Took(slot)
					m.Returned(use)
				} else {
					g.Release(-5)
				}
			}
		}
	}
	static, _ := gate.StaticUsageLimit(0.9)
	holdback, _ := gate.PriorityHoldback(gate.PriorityHoldbackConfig{MinCeiling: 0.5})
	maxInFlight := func() gate.Gate { return gate.MaxInFlight(64) }
	concurrency := func() gate.Gate {
		g, _ := gate.Concurrency(gate.ConcurrencyConfig{Mode: gate.ModeHybrid, MaxConcurrency: 64, MaxTokenConcurrency: 100_000})
		return g
	}
	ceiling := func(inner func() gate.Gate, policy func() gate.UsageLimitPolicy) func() gate.Gate {
		return func() gate.Gate { return gate.Ceiling(inner(), policy()) }
	}
	same := func(p gate.UsageLimitPolicy) func() gate.UsageLimitPolicy {
		return func() gate.UsageLimitPolicy { return p }
	}

	b.Run("gate=MaxInFlight", run(maxInFlight))
	b.Run("gate=Ceiling(MaxInFlight,static)", run(ceiling(maxInFlight, same(static))))
	b.Run("gate=Ceiling(MaxInFlight,holdback)", run(ceiling(maxInFlight, same(holdback))))
	b.Run("gate=Ceiling(MaxInFlight,softreflective)", run(ceiling(maxInFlight, gate.SoftReflectiveCeiling)))
	b.Run("gate=Concurrency", run(concurrency))
	b.Run("gate=Ceiling(Concurrency,holdback)", run(ceiling(concurrency, same(holdback))))
	// The saturation gate with declared slots, so far from full that the
	// holdback's ceiling always admits: the share of the slots in use is
	// read at each offer.
	saturation := func() gate.Gate {
		g, _ := gate.Saturation(gate.SaturationConfig{Clock: newClock(), QueueDepthThreshold: 1 << 30, SlotsPerEndpoint: 1 << 40, MetricsStalenessThreshold: time.Hour})
		g.Update("e", gate.Metrics{Running: 1})
		return g
	}
	b.Run("gate=Saturation", run(saturation))
	b.Run("gate=Ceiling(Saturation,holdback)", run(ceiling(saturation, same(holdback))))
}
