package flowcontrol_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/flowcontrol"
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
