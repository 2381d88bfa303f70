package flowcontrol_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
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

// TestIdleFlowsLeaveNoState: a million distinct flows passing through one
// at a time leave memory bounded by the flows active at once.
func TestIdleFlowsLeaveNoState(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, Fairness: flowcontrol.RoundRobin()}},
		Gate:  gate.MaxInFlight(1),
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
	// 250,000 flows: a leak of even one pointer per flow would pass the
	// 1 MB bound twice over.
	flows := 250_000
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
