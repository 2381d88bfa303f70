package flowcontrol_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/clocktest"
	"github.com/sluicegate/sluice/ordering"
)

// TestGlobalStrictIsTheSingleQueueOrder: across any flows, global-strict
// leaves in the order of one queue: the ordering policy, then arrival.
func TestGlobalStrictIsTheSingleQueueOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		reqs := drawFairReqs(rt, 4)
		oneFlow := slices.Clone(reqs)
		for i := range oneFlow {
			oneFlow[i].flow = "all"
		}
		p := ordering.SLODeadline()
		want := drainOrder(t, flowcontrol.BandConfig{Policy: p}, oneFlow)
		if diff := cmp.Diff(want, drainOrder(t, flowcontrol.BandConfig{Policy: p, Fairness: flowcontrol.GlobalStrict()}, reqs)); diff != "" {
			rt.Fatalf("global-strict across flows differs from one queue (-want +got):\n%s", diff)
		}
	})
}

// TestGlobalStrictFIFOBandIsArrivalOrder: a FIFO band's single queue is in
// arrival order, so global-strict across flows follows arrival even when
// the enqueue times disagree — here a clock stepped back between two
// arrivals, as a wall clock may be.
func TestGlobalStrictFIFOBandIsArrivalOrder(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	g := &switchGate{}
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, Policy: ordering.FCFS(), Fairness: flowcontrol.GlobalStrict()}},
		Gate:  g, Clock: clock,
	})
	var order []string
	for _, id := range []string{"late-clock", "early-clock", "late-clock"} {
		fc.Submit(context.Background(), flowcontrol.Request{Key: key(id, 0)}, func(adm *flowcontrol.Admission, err error) {
			require.NoError(t, err)
			order = append(order, id)
			adm.Done()
		})
		clock.Set(clock.Now().Add(-time.Second))
	}
	for range 3 {
		g.set(g.inFlight + 1)
		fc.Nudge()
	}
	require.Equal(t, []string{"late-clock", "early-clock", "late-clock"}, order)
}
