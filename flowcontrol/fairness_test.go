package flowcontrol_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/ordering"
)

// fairReq is one request of a fairness test: its flow, its cost and, for
// the SLO policy, its objective.
type fairReq struct {
	flow string
	cost int64
	slo  int // x-llm-d-slo-ttft-ms; 0 for none
}

// drainOrder queues reqs, in order and one clock tick apart, in one band of
// a fresh controller whose gate is closed, then opens the gate one slot at
// a time and returns the order in which they started (indexes into reqs).
func drainOrder(t *testing.T, band flowcontrol.BandConfig, reqs []fairReq) []int {
	t.Helper()
	var order []int
	synctest.Test(t, func(t *testing.T) {
		g := &switchGate{}
		band.Priority = 0
		fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band}, Gate: g})
		for i, r := range reqs {
			h := http.Header{}
			if r.slo > 0 {
				h.Set(ordering.SLOTTFTHeader, strconv.Itoa(r.slo))
			}
			i := i
			fc.Submit(context.Background(), flowcontrol.Request{Key: key(r.flow, 0), Cost: r.cost, Header: h},
				func(adm *flowcontrol.Admission, err error) {
					if err != nil {
						t.Errorf("request %d: %v", i, err)
						return
					}
					order = append(order, i)
					adm.Done()
				})
			time.Sleep(time.Millisecond)
		}
		for range reqs {
			g.set(g.inFlight + 1)
			fc.Nudge()
		}
	})
	if len(order) != len(reqs) {
		t.Fatalf("%d of %d requests started: %v", len(order), len(reqs), order)
	}
	return order
}

func drawFairReqs(t *rapid.T, flows int) []fairReq {
	n := rapid.IntRange(1, 40).Draw(t, "n")
	reqs := make([]fairReq, n)
	for i := range reqs {
		reqs[i] = fairReq{
			flow: fmt.Sprint("f", rapid.IntRange(0, flows-1).Draw(t, "flow")),
			cost: rapid.Int64Range(1, 9).Draw(t, "cost"),
			slo:  rapid.SampledFrom([]int{0, 0, 50, 100, 200}).Draw(t, "slo"),
		}
	}
	return reqs
}

var allFairness = []flowcontrol.Fairness{
	flowcontrol.GlobalStrict(),
	flowcontrol.RoundRobin(),
	flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{}),
	flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{Quantum: 1, Weights: map[string]int64{"f0": 3}}),
}

// TestOneFlowIsTheSingleQueueOrder: with one flow, every fairness policy
// dispatches exactly in the order of the band's ordering policy.
func TestOneFlowIsTheSingleQueueOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		reqs := drawFairReqs(rt, 1)
		for _, p := range []ordering.Policy{ordering.FCFS(), ordering.SLODeadline()} {
			want := drainOrder(t, flowcontrol.BandConfig{Policy: p}, reqs)
			for _, fair := range allFairness {
				if diff := cmp.Diff(want, drainOrder(t, flowcontrol.BandConfig{Policy: p, Fairness: fair}, reqs)); diff != "" {
					rt.Fatalf("%s with %s differs from one queue (-want +got):\n%s", fair.TypeName(), p.TypeName(), diff)
				}
			}
		}
	})
}

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
	clock := &manualClock{now: time.Unix(1_000_000, 0)}
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
		clock.now = clock.now.Add(-time.Second)
	}
	for range 3 {
		g.set(g.inFlight + 1)
		fc.Nudge()
	}
	require.Equal(t, []string{"late-clock", "early-clock", "late-clock"}, order)
}

// served returns, after each dispatch of order, the requests (or cost)
// each flow has been served, and the index of the dispatch after which
// each flow ran out of waiters.
func servedPrefixes(reqs []fairReq, order []int, byCost bool) (prefix []map[string]int64, emptied map[string]int) {
	left := map[string]int{}
	for _, r := range reqs {
		left[r.flow]++
	}
	emptied = map[string]int{}
	cur := map[string]int64{}
	for f := range left {
		cur[f] = 0 // a flow not yet served counts too
	}
	for k, i := range order {
		r := reqs[i]
		if byCost {
			cur[r.flow] += r.cost
		} else {
			cur[r.flow]++
		}
		if left[r.flow]--; left[r.flow] == 0 {
			emptied[r.flow] = k
		}
		prefix = append(prefix, maps.Clone(cur))
	}
	return prefix, emptied
}

// TestRoundRobinTakesTurns: in every prefix of the dispatches, two flows
// that still had waiters were served numbers of requests differing by at
// most one.
func TestRoundRobinTakesTurns(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		reqs := drawFairReqs(rt, 4)
		order := drainOrder(t, flowcontrol.BandConfig{Fairness: flowcontrol.RoundRobin()}, reqs)
		prefix, emptied := servedPrefixes(reqs, order, false)
		for k, served := range prefix {
			for a, sa := range served {
				for b, sb := range served {
					// Both backlogged through dispatch k: neither emptied
					// before it.
					if emptied[a] >= k && emptied[b] >= k && sa-sb > 1 {
						rt.Fatalf("after %d dispatches %s has %d, %s has %d", k+1, a, sa, b, sb)
					}
				}
			}
		}
	})
}

// TestDeficitRoundRobinBound: between two flows with waiters throughout a
// stretch of dispatches, served cost divided by weight differs by at most
// Q + c/w_i + c/w_j (Q the quantum, c the largest cost), the bound the
// policy's doc states, for every prefix from the start.
func TestDeficitRoundRobinBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const maxCost = 9
		quantum := rapid.Int64Range(1, 12).Draw(rt, "quantum")
		weights := map[string]int64{}
		for f := range 4 {
			weights[fmt.Sprint("f", f)] = rapid.Int64Range(1, 4).Draw(rt, "weight")
		}
		reqs := drawFairReqs(rt, 4)
		order := drainOrder(t, flowcontrol.BandConfig{Fairness: flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{Weights: weights, Quantum: quantum})}, reqs)
		prefix, emptied := servedPrefixes(reqs, order, true)
		for k, served := range prefix {
			for a, sa := range served {
				for b, sb := range served {
					if emptied[a] < k || emptied[b] < k {
						continue
					}
					wa, wb := float64(weights[a]), float64(weights[b])
					bound := float64(quantum) + maxCost/wa + maxCost/wb
					if d := float64(sa)/wa - float64(sb)/wb; d > bound {
						rt.Fatalf("after %d dispatches %s served %d (w %v), %s %d (w %v): %v apart, bound %v", k+1, a, sa, wa, b, sb, wb, d, bound)
					}
				}
			}
		}
	})
}

// TestDeficitRoundRobinShares: two continuously backlogged flows of weights
// 3 and 1 and equal costs are served 3:1.
func TestDeficitRoundRobinShares(t *testing.T) {
	var reqs []fairReq
	for range 40 {
		reqs = append(reqs, fairReq{flow: "heavy", cost: 5}, fairReq{flow: "light", cost: 5})
	}
	order := drainOrder(t, flowcontrol.BandConfig{Fairness: flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{Weights: map[string]int64{"heavy": 3}})}, reqs)
	heavy := 0
	for _, i := range order[:40] {
		if reqs[i].flow == "heavy" {
			heavy++
		}
	}
	require.Equal(t, 30, heavy, "of the first 40 dispatches")
}

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

// TestFlowRequestCapacity bounds one flow, and is never displaced around.
func TestFlowRequestCapacity(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, FlowRequestCapacity: bounded(2)}},
		Gate:  flowcontrol.MaxInFlight(0),
	})
	submit(context.Background(), fc, req("A", 0))
	submit(context.Background(), fc, req("A", 0))
	_, err := fc.EnqueueAndWait(context.Background(), req("A", 0))
	require.ErrorIs(t, err, flowcontrol.ErrRejectedSaturated)
	require.Contains(t, err.Error(), `flow "A" request capacity 2 in band 0 reached`)
	b := submit(context.Background(), fc, req("B", 0))
	require.False(t, b.finished())
}

// TestCostCapacity bounds the summed cost of waiting requests, per band and
// controller-wide; a request costlier than a capacity can never fit.
func TestCostCapacity(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{{Priority: 0, CostCapacity: bounded(1000)}, {Priority: 1}},
		CostCapacity:   bounded(1500),
		Gate:           flowcontrol.MaxInFlight(0),
		NoDisplacement: true,
	})
	submit(context.Background(), fc, flowcontrol.Request{Key: key("a", 0), Cost: 800})
	_, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: key("b", 0), Cost: 300})
	require.ErrorIs(t, err, flowcontrol.ErrRejectedSaturated)
	require.Contains(t, err.Error(), "band 0 cost capacity 1000 exceeded")
	submit(context.Background(), fc, flowcontrol.Request{Key: key("c", 1), Cost: 600})
	_, err = fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: key("d", 1), Cost: 200})
	require.Contains(t, err.Error(), "global cost capacity 1500 exceeded")
	_, err = fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: key("e", 0), Cost: 1001})
	require.ErrorIs(t, err, flowcontrol.ErrTooLarge)
	require.Contains(t, err.Error(), "band 0 cost capacity 1000 exceeded by the request alone: it can never fit")
	// Too large for the cost capacity, while the flow's own capacity is
	// merely full: the message names the cost capacity.
	fc2 := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, FlowRequestCapacity: bounded(1), CostCapacity: bounded(10)}},
		Gate:  flowcontrol.MaxInFlight(0),
	})
	submit(context.Background(), fc2, req("x", 0))
	_, err = fc2.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: key("x", 0), Cost: 11})
	require.ErrorIs(t, err, flowcontrol.ErrTooLarge)
	require.Contains(t, err.Error(), "cost capacity 10 exceeded by the request alone")
	s, _ := fc.CapacitySnapshot(0)
	require.Equal(t, capacity.Snapshot{Priority: 0, QueuedRequests: 1, QueuedCost: 800, CostCapacity: bounded(1000)}, s)
	// A request without a cost counts 1.
	submit(context.Background(), fc, req("f", 0))
	s, _ = fc.CapacitySnapshot(0)
	require.Equal(t, int64(801), s.QueuedCost)
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

// TestIdleFlowsLeaveNoState: a million distinct flows passing through one
// at a time leave memory bounded by the flows active at once.
func TestIdleFlowsLeaveNoState(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, Fairness: flowcontrol.RoundRobin()}},
		Gate:  flowcontrol.MaxInFlight(1),
	})
	h := hold(t, fc)
	pass := func(n int, prefix string) {
		for i := range n {
			// Queued behind the held slot, then started by a Done: each
			// flow is active once, briefly.
			c := submit(context.Background(), fc, req(prefix+strconv.Itoa(i), 0))
			h.Done()
			h = c.adm
		}
	}
	flows := 1_000_000
	if raceEnabled {
		flows = 100_000
	}
	pass(10_000, "warm")
	before := memInUse()
	pass(flows, "flow")
	after := memInUse()
	require.Less(t, after-before, int64(1<<20), "memory grew by %d bytes over %d idle flows", after-before, flows)
	h.Done()
	runtime.KeepAlive(fc)
}
