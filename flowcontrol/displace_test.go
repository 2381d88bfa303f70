package flowcontrol_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
)

// TestDisplacementWorkedExample is the example of Config.NoDisplacement.
func TestDisplacementWorkedExample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(10)}},
			Gate:  flowcontrol.MaxInFlight(0),
		})
		var a []*call
		for range 9 {
			a = append(a, start(context.Background(), fc, req("A", 0)))
			synctest.Wait()
		}
		start(context.Background(), fc, req("B", 0))
		synctest.Wait()
		c1 := start(context.Background(), fc, req("C", 0))
		synctest.Wait()
		rej := a[8].rejection(t)
		require.Equal(t, flowcontrol.OutcomeEvictedQueuePressure, rej.Outcome)
		require.ErrorIs(t, rej, flowcontrol.ErrEvictedQueuePressure)
		require.Equal(t, http.StatusTooManyRequests, rej.Outcome.HTTPStatus())
		require.Equal(t, "evicted-queue-pressure", rej.Outcome.String())
		require.False(t, c1.finished())
		c2 := start(context.Background(), fc, req("C", 0))
		synctest.Wait()
		require.Equal(t, flowcontrol.OutcomeEvictedQueuePressure, a[7].rejection(t).Outcome)
		require.False(t, c2.finished())
		_, err := fc.EnqueueAndWait(context.Background(), req("A", 0))
		require.ErrorIs(t, err, flowcontrol.ErrRejectedSaturated, "A holds 7, over its share")
		s, _ := fc.FlowSnapshot(0, "A")
		require.Equal(t, int64(7), s.QueuedRequests)
		s, _ = fc.FlowSnapshot(0, "C")
		require.Equal(t, int64(2), s.QueuedRequests)
		require.Equal(t, int64(10), queued(t, fc, 0))
	})
}

// TestNoDisplacementRejects: with displacement off, a full band refuses.
func TestNoDisplacementRejects(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(2)}},
		Gate:           flowcontrol.MaxInFlight(0),
		NoDisplacement: true,
	})
	a1 := submit(context.Background(), fc, req("A", 0))
	a2 := submit(context.Background(), fc, req("A", 0))
	_, err := fc.EnqueueAndWait(context.Background(), req("B", 0))
	require.ErrorIs(t, err, flowcontrol.ErrRejectedSaturated)
	require.False(t, a1.finished())
	require.False(t, a2.finished())
}

// TestGlobalDisplacementNeverTakesFromAHigherBand: for a controller-wide
// capacity, a request displaces only from its own band or those below,
// though every band's flows count for its share.
func TestGlobalDisplacementNeverTakesFromAHigherBand(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands:           []flowcontrol.BandConfig{{Priority: 5}, {Priority: 0}, {Priority: -5}},
		RequestCapacity: bounded(6),
		Gate:            flowcontrol.MaxInFlight(0),
	})
	var high, low []*call
	for range 3 {
		high = append(high, submit(context.Background(), fc, req("H", 5)))
	}
	for range 3 {
		low = append(low, submit(context.Background(), fc, req("L", -5)))
	}
	// A flow of band 0 holds nothing, under its share of 6/3: it displaces
	// the newest of band -5's, the only flow at or below its band, though
	// band 5's flow holds as much.
	mid := submit(context.Background(), fc, req("M", 0))
	require.False(t, mid.finished())
	require.True(t, low[2].finished())
	require.Equal(t, flowcontrol.OutcomeEvictedQueuePressure, low[2].rejection(t).Outcome)
	// Another flow of band 0: L holds 2, more than it would hold: L again.
	mid2 := submit(context.Background(), fc, req("N", 0))
	require.False(t, mid2.finished())
	require.Equal(t, flowcontrol.OutcomeEvictedQueuePressure, low[1].rejection(t).Outcome)
	// A third: below band 0 only L's 1 is left, no more than it would hold.
	mid3 := submit(context.Background(), fc, req("O", 0))
	require.True(t, mid3.finished())
	require.Equal(t, flowcontrol.OutcomeRejectedSaturated, mid3.rejection(t).Outcome)
	for _, h := range high {
		require.False(t, h.finished())
	}
	require.False(t, low[0].finished())
}

// TestCostDisplacement: a full cost capacity displaces by cost, as many
// requests of the flow holding the most as the arrival needs.
func TestCostDisplacement(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, CostCapacity: bounded(100)}},
		Gate:  flowcontrol.MaxInFlight(0),
	})
	var big []*call
	for range 10 {
		big = append(big, submit(context.Background(), fc, flowcontrol.Request{Key: key("big", 0), Cost: 10}))
	}
	small := submit(context.Background(), fc, flowcontrol.Request{Key: key("small", 0), Cost: 25})
	require.False(t, small.finished())
	for i, c := range big {
		if i >= 7 {
			require.Equal(t, flowcontrol.OutcomeEvictedQueuePressure, c.rejection(t).Outcome, "big[%d]", i)
		} else {
			require.False(t, c.finished(), "big[%d]", i)
		}
	}
	s, _ := fc.CapacitySnapshot(0)
	require.Equal(t, int64(95), s.QueuedCost)
}

// TestFairAdmissionLetsALightTenantIn: a heavy flow that fills the band no
// longer locks a light one out; the light flow's requests all get in.
func TestFairAdmissionLetsALightTenantIn(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(20), Fairness: flowcontrol.RoundRobin()}},
		Gate:  flowcontrol.MaxInFlight(0),
	})
	for range 20 {
		submit(context.Background(), fc, req("heavy", 0))
	}
	for i := range 5 {
		require.False(t, submit(context.Background(), fc, req("light", 0)).finished(), "light %d", i)
	}
	s, _ := fc.FlowSnapshot(0, "heavy")
	require.Equal(t, int64(15), s.QueuedRequests)
}

// TestBandLimitDisplacesOnlyInItsBand: when a request is refused by
// its band's request capacity and the controller's request capacity at
// once, displacing the newest request of its own band's fullest flow makes
// room in both scopes. Contract (Config.NoDisplacement, displace.go victim
// doc): the victims of a band limit come from the request's band; only a
// controller-wide limit reaches other bands. Displacing a request of a
// lower band cannot free room in the full band, so it must not happen.
func TestBandLimitDisplacesOnlyInItsBand(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 0, RequestCapacity: bounded(4)},
			{Priority: -1},
		},
		RequestCapacity: bounded(9),
		Gate:            flowcontrol.MaxInFlight(0), // everything waits
	})
	var a, b []*call
	for range 4 {
		a = append(a, submit(context.Background(), fc, req("A", 0)))
	}
	for range 5 {
		b = append(b, submit(context.Background(), fc, req("B", -1)))
	}
	require.Equal(t, int64(4), queued(t, fc, 0))
	require.Equal(t, int64(5), queued(t, fc, -1))

	c := submit(context.Background(), fc, req("C", 0))
	require.False(t, c.finished(), "C was refused: %v", c.err)

	// A's newest is the one victim needed: it frees a place in band 0 and
	// in the controller.
	require.True(t, a[3].finished(), "A's newest request was not displaced")
	require.Equal(t, flowcontrol.OutcomeEvictedQueuePressure, a[3].outcome(t))
	for i, v := range b {
		require.False(t, v.finished(), "B[%d] in band -1 was displaced (%v) to make room in full band 0", i, v.err)
	}
	require.Equal(t, int64(5), queued(t, fc, -1))
}
