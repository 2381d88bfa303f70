package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
)

// lockedGate hides a gate's optional interfaces: a controller behind it
// takes its locked admission path, as it does behind a View's gate.
type lockedGate struct{ g gate.Gate }

func (l lockedGate) TryAcquire(p int) bool { return l.g.TryAcquire(p) }
func (l lockedGate) Release(p int)         { l.g.Release(p) }

// syncedView returns a View of one replica, synced, with the whole budget.
func syncedView(b *testing.B, budget int64) *fleet.View {
	clock := clocktest.New(time.Unix(1000, 0))
	v, err := fleet.New(fleet.Config{Store: fleet.NewMemory(clock.Now), ID: "bench", Replicas: 1,
		Budget: budget, Period: time.Second, Clock: clock})
	if err != nil {
		b.Fatal(err)
	}
	return v
}

func sync2(b *testing.B, v *fleet.View) {
	for range 2 {
		if err := v.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if st := v.Status(); st.Fallback != fleet.Synced || st.Share != 64 {
		b.Fatalf("view not synced: %+v", st)
	}
}

// BenchmarkAdmission is one uncontended admission and its Done through a
// controller with two bands and room: with the fleet view on (the gate is
// the View's, one replica, synced) against its baselines, the view off —
// gate.MaxInFlight(64), which takes the controller's lock-free path, and
// the same gate behind a wrapper that hides its count, which takes the
// locked path a View's gate takes. The view's own cost is "view on"
// against "off, locked path"; no store round trip is on this path.
func BenchmarkAdmission(b *testing.B) {
	run := func(b *testing.B, g gate.Gate, before func(*flowcontrol.FlowController)) {
		fc, err := flowcontrol.New(flowcontrol.Config{
			Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
			FallbackPriority: -1,
			Gate:             g,
		})
		if err != nil {
			b.Fatal(err)
		}
		defer fc.Close()
		if before != nil {
			before(fc)
		}
		ctx := context.Background()
		req := flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "t", Priority: -1}}
		b.ReportAllocs()
		for b.Loop() {
			adm, err := fc.EnqueueAndWait(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			adm.Done()
		}
	}
	b.Run("path=lockfree/view=off", func(b *testing.B) { run(b, gate.MaxInFlight(64), nil) })
	b.Run("path=locked/view=off", func(b *testing.B) { run(b, lockedGate{gate.MaxInFlight(64)}, nil) })
	b.Run("path=locked/view=on", func(b *testing.B) {
		v := syncedView(b, 64)
		run(b, v.Gate(), func(*flowcontrol.FlowController) { sync2(b, v) })
	})
}

// BenchmarkGate is the gate alone, a TryAcquire and its Release: a View's
// gate against its baseline, gate.MaxInFlight's.
func BenchmarkGate(b *testing.B) {
	run := func(b *testing.B, g gate.Gate) {
		b.ReportAllocs()
		for b.Loop() {
			if !g.TryAcquire(-1) {
				b.Fatal("refused")
			}
			g.Release(-1)
		}
	}
	b.Run("view=off", func(b *testing.B) { run(b, gate.MaxInFlight(64)) })
	b.Run("view=on", func(b *testing.B) {
		v := syncedView(b, 64)
		g := v.Gate()
		_ = g.(gate.BoundGate).Bind(staticController{})
		sync2(b, v)
		run(b, g)
	})
}

// staticController is a gate.Controller with two bands.
type staticController struct{}

func (staticController) Nudge()            {}
func (staticController) Priorities() []int { return []int{10, -1} }
