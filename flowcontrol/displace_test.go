package flowcontrol_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// TestDisplacementWorkedExample is the example of Config.NoDisplacement.
// displaced checks that c ended as a displaced request does: rejected
// saturated, its error wrapping ErrRejectedSaturated and ErrDisplaced, and
// returns its rejection.
func displaced(t *testing.T, c *call) *flowcontrol.RejectionError {
	t.Helper()
	rej := c.rejection(t)
	require.Equal(t, flowcontrol.OutcomeRejectedSaturated, rej.Outcome, "%v", rej)
	require.ErrorIs(t, rej, flowcontrol.ErrRejectedSaturated)
	require.ErrorIs(t, rej, flowcontrol.ErrDisplaced)
	require.NotErrorIs(t, rej, flowcontrol.ErrTooLarge)
	return rej
}

// TestDisplacedIsRejectedSaturated: a request displaced from its queue
// never reached a model server, so it ends as llm-d names such requests,
// rejected-*: OutcomeRejectedSaturated, 429, its error wrapping
// ErrRejectedSaturated and the detail ErrDisplaced, with the time it
// queued and the band's Retry-After (30s: the band was busy 2s without
// draining). The Observer hears it queued, as rejected-saturated.
func TestDisplacedIsRejectedSaturated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu     sync.Mutex // the Observer runs on each caller's goroutine
			events []flowcontrol.Event
		)
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(2)}},
			Gate:  gate.MaxInFlight(0),
			Observer: func(ev flowcontrol.Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, ev)
			},
		})
		start(context.Background(), fc, req("heavy", 0))
		synctest.Wait()
		newest := start(context.Background(), fc, req("heavy", 0))
		synctest.Wait()
		time.Sleep(2 * time.Second)
		light := start(context.Background(), fc, req("light", 0))
		synctest.Wait()
		require.False(t, light.finished())
		// A request refused at the door is rejected-saturated too, but
		// not displaced: light holds its share.
		again := start(context.Background(), fc, req("light", 0))
		synctest.Wait()
		require.Equal(t, flowcontrol.OutcomeRejectedSaturated, again.outcome(t))
		require.NotErrorIs(t, again.err, flowcontrol.ErrDisplaced)
		require.Zero(t, again.rejection(t).QueueTime)

		rej := displaced(t, newest)
		require.Equal(t, 2*time.Second, rej.QueueTime)
		require.Equal(t, 30*time.Second, rej.RetryAfter)
		require.Equal(t, key("heavy", 0), rej.Effective)
		require.Equal(t, http.StatusTooManyRequests, rej.Outcome.HTTPStatus())
		require.Equal(t, "flowcontrol: priority 0: rejected-saturated: displaced from its queue by a fairer flow, "+
			"one holding less than its share of a full queue after 2s queued; retry after 30s", rej.Error())
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		// The Observer hears both as rejected-saturated; only the
		// displacement queued.
		require.Len(t, events, 2)
		for _, ev := range events {
			require.Equal(t, flowcontrol.OutcomeRejectedSaturated, ev.Outcome)
			require.Equal(t, ev.Requested.ID == "heavy", ev.Queued, "%+v", ev)
		}

	})
}

func TestDisplacementWorkedExample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(10)}},
			Gate:  gate.MaxInFlight(0),
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
		rej := displaced(t, a[8])
		require.Equal(t, http.StatusTooManyRequests, rej.Outcome.HTTPStatus())
		require.Equal(t, "rejected-saturated", rej.Outcome.String())
		require.False(t, c1.finished())
		c2 := start(context.Background(), fc, req("C", 0))
		synctest.Wait()
		displaced(t, a[7])
		require.False(t, c2.finished())
		_, err := fc.EnqueueAndWait(context.Background(), req("A", 0))
		require.ErrorIs(t, err, flowcontrol.ErrRejectedSaturated, "A holds 7, over its share")
		require.NotErrorIs(t, err, flowcontrol.ErrDisplaced, "refused at the door, not displaced")
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
		Gate:           gate.MaxInFlight(0),
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
		Gate:            gate.MaxInFlight(0),
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
	displaced(t, low[2])
	// Another flow of band 0: L holds 2, more than it would hold: L again.
	mid2 := submit(context.Background(), fc, req("N", 0))
	require.False(t, mid2.finished())
	displaced(t, low[1])
	// A third: below band 0 only L's 1 is left, no more than it would hold.
	mid3 := submit(context.Background(), fc, req("O", 0))
	require.True(t, mid3.finished())
	require.Equal(t, flowcontrol.OutcomeRejectedSaturated, mid3.rejection(t).Outcome)
	require.NotErrorIs(t, mid3.err, flowcontrol.ErrDisplaced)
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
		Gate:  gate.MaxInFlight(0),
	})
	var big []*call
	for range 10 {
		big = append(big, submit(context.Background(), fc, flowcontrol.Request{Key: key("big", 0), Cost: 10}))
	}
	small := submit(context.Background(), fc, flowcontrol.Request{Key: key("small", 0), Cost: 25})
	require.False(t, small.finished())
	for i, c := range big {
		if i >= 7 {
			displaced(t, c)
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
		Gate:  gate.MaxInFlight(0),
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
		Gate:            gate.MaxInFlight(0), // everything waits
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
	displaced(t, a[3])
	for i, v := range b {
		require.False(t, v.finished(), "B[%d] in band -1 was displaced (%v) to make room in full band 0", i, v.err)
	}
	require.Equal(t, int64(5), queued(t, fc, -1))
}
