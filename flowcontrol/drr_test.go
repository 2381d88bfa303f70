package flowcontrol_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/ordering"
)

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

// TestDRRExtremeCostsAndWeights: deficit round robin with int64
// extremes — a fixed quantum of 1, weights of MaxInt64, costs of MaxInt64
// and of 1, and an EDF order that puts a huge head in front of a flow in
// the middle of its turn — serves every request, never hangs in Next or
// skipRounds, and leaves nothing queued.
func TestDRRExtremeCostsAndWeights(t *testing.T) {
	for _, quantum := range []int64{0, 1, math.MaxInt64} {
		g := &switchGate{}
		g.set(0)
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{
				Priority: 0,
				Policy:   ordering.EDF(),
				Fairness: flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{
					Quantum: quantum,
					Weights: map[string]int64{"heavy": math.MaxInt64, "mid": 3},
				}),
			}},
			Gate: g,
		})
		var calls []*call
		add := func(id string, cost int64, ttl time.Duration) {
			calls = append(calls, submit(context.Background(), fc,
				flowcontrol.Request{Key: key(id, 0), Cost: cost, TTL: ttl}))
		}
		// Costs past MaxRequestCost, which count as MaxRequestCost (see
		// TestHugeSizesKeepCountersSane).
		const huge = math.MaxInt64 / 32
		for i := range 5 {
			add("heavy", huge-int64(i), 0)
			add("light", 1, 0)
			add("mid", huge/2, 0)
			add("one", int64(i+1), 0)
		}
		g.set(1)
		for i := 0; ; i++ {
			fc.Nudge()
			var running *call
			for _, c := range calls {
				if c.finished() && c.adm != nil {
					running = c
				}
			}
			if running == nil {
				break
			}
			if i == 3 {
				// A costly request with the earliest deadline becomes the
				// head of "one" in the middle of the drain.
				add("one", huge, time.Hour)
			}
			running.adm.Done()
			running.adm = nil
		}
		for _, c := range calls {
			require.True(t, c.finished(), "quantum %d: %s never served", quantum, c.req.Key.ID)
			require.NoError(t, c.err)
		}
		s, err := fc.CapacitySnapshot(0)
		require.NoError(t, err)
		require.Zero(t, s.QueuedRequests)
		require.Zero(t, fc.InFlight())
	}
}
