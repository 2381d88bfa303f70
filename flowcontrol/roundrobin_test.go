package flowcontrol_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/flowcontrol"
)

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
