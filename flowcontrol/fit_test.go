package flowcontrol_test

import (
	"context"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
)

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

// TestOneHugeRequestLocksNobodyOut: with every capacity unbounded, a queued
// request declaring the largest cost and size an int64 holds counts as
// MaxRequestCost and MaxRequestBytes, so every other request, of any size
// and in any band, still queues beside it; it used to fill the counters and
// have everyone else refused as saturated for as long as it waited.
func TestOneHugeRequestLocksNobodyOut(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 5}, {Priority: 0}, {Priority: -5}},
		Gate:  flowcontrol.MaxInFlight(0), // everything waits
	})
	huge := submit(context.Background(), fc, flowcontrol.Request{Key: key("huge", 0), Cost: math.MaxInt64 - 1, ByteSize: math.MaxInt64})
	require.False(t, huge.finished(), "the huge request was refused: %v", huge.err)
	var others []*call
	for _, p := range []int{5, 0, -5} {
		for _, r := range []flowcontrol.Request{
			{Key: key("small", p)},
			{Key: key("costly", p), Cost: 1000, ByteSize: 1 << 20},
			{Key: key("huge-too", p), Cost: math.MaxInt64, ByteSize: math.MaxInt64},
		} {
			c := submit(context.Background(), fc, r)
			require.False(t, c.finished(), "%v refused beside a huge request: %v", r.Key, c.err)
			others = append(others, c)
		}
	}
	s, err := fc.CapacitySnapshot(0)
	require.NoError(t, err)
	require.Equal(t, capacity.Snapshot{
		Priority:       0,
		QueuedRequests: 4,
		QueuedBytes:    2*flowcontrol.MaxRequestBytes + 1<<20,
		QueuedCost:     2*flowcontrol.MaxRequestCost + 1000 + 1,
	}, s)
	fc.Close()
	for _, c := range append(others, huge) {
		require.Equal(t, flowcontrol.OutcomeRejectedShuttingDown, c.outcome(t))
	}
	for _, p := range []int{5, 0, -5} {
		s, err := fc.CapacitySnapshot(p)
		require.NoError(t, err)
		require.Zero(t, s.QueuedRequests+s.QueuedBytes+s.QueuedCost, "band %d: %v", p, s)
	}
}

// TestMeteredGateHearsTheClampedCost: the cost a MeteredGate hears, on
// Took and on Returned, is the cost the controller counts — at most
// MaxRequestCost — for a request started at once and for one that waited.
func TestMeteredGateHearsTheClampedCost(t *testing.T) {
	g := &meterGate{n: 1}
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	first := submit(context.Background(), fc, flowcontrol.Request{Key: key("a", 0), Cost: math.MaxInt64})
	require.Equal(t, flowcontrol.OutcomeDispatched, first.outcome(t))
	second := submit(context.Background(), fc, flowcontrol.Request{Key: key("b", 0), Cost: flowcontrol.MaxRequestCost + 1})
	require.False(t, second.finished())
	fs, err := fc.FlowSnapshot(0, "b")
	require.NoError(t, err)
	require.Equal(t, flowcontrol.MaxRequestCost, fs.QueuedCost)
	first.adm.Done()
	require.Equal(t, flowcontrol.OutcomeDispatched, second.outcome(t))
	second.adm.Done()
	clamped := flowcontrol.Slot{Priority: 0, Cost: flowcontrol.MaxRequestCost}
	require.Equal(t, []flowcontrol.Slot{clamped, clamped}, g.took)
	require.Len(t, g.returned, 2)
	for _, u := range g.returned {
		require.Equal(t, clamped, u.Slot)
	}
}

// capacityNamed matches the capacity a rejection's message names.
var capacityNamed = regexp.MustCompile(`(band -?\d+|global|flow "[^"]*") (request|byte|cost) capacity (-?\d+)`)

// TestRejectionNamesOnlyABoundedCapacity: whatever the sizes and costs,
// a capacity rejection names a capacity the configuration bounds, with its
// value; where every capacity is unbounded nothing is refused.
func TestRejectionNamesOnlyABoundedCapacity(t *testing.T) {
	limit := func(t *rapid.T, name string) capacity.Limit {
		if !rapid.Bool().Draw(t, name+"-bounded") {
			return capacity.Unbounded()
		}
		return capacity.Bounded(rapid.SampledFrom([]int64{0, 1, 3, 1000, flowcontrol.MaxRequestCost, math.MaxInt64}).Draw(t, name))
	}
	number := rapid.OneOf(
		rapid.Int64Range(-2, 5),
		rapid.SampledFrom([]int64{flowcontrol.MaxRequestCost - 1, flowcontrol.MaxRequestCost, flowcontrol.MaxRequestCost + 1, math.MaxInt64 - 1, math.MaxInt64, math.MinInt64}),
		rapid.Int64(),
	)
	rapid.Check(t, func(t *rapid.T) {
		band := flowcontrol.BandConfig{
			Priority:            0,
			RequestCapacity:     limit(t, "band-requests"),
			ByteCapacity:        limit(t, "band-bytes"),
			CostCapacity:        limit(t, "band-cost"),
			FlowRequestCapacity: limit(t, "flow-requests"),
		}
		cfg := flowcontrol.Config{
			Bands:           []flowcontrol.BandConfig{band},
			RequestCapacity: limit(t, "global-requests"),
			ByteCapacity:    limit(t, "global-bytes"),
			CostCapacity:    limit(t, "global-cost"),
			NoDisplacement:  rapid.Bool().Draw(t, "no-displacement"),
			Gate:            flowcontrol.MaxInFlight(0),
		}
		bounds := map[string]capacity.Limit{
			"band 0 request": band.RequestCapacity, "band 0 byte": band.ByteCapacity, "band 0 cost": band.CostCapacity,
			"global request": cfg.RequestCapacity, "global byte": cfg.ByteCapacity, "global cost": cfg.CostCapacity,
		}
		anyBounded := false
		for _, l := range bounds {
			anyBounded = anyBounded || l.IsBounded()
		}
		anyBounded = anyBounded || band.FlowRequestCapacity.IsBounded()
		fc, err := flowcontrol.New(cfg)
		require.NoError(t, err)
		defer fc.Close()
		for i := range rapid.IntRange(1, 12).Draw(t, "requests") {
			r := flowcontrol.Request{
				Key:      key(rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "flow"), 0),
				ByteSize: number.Draw(t, "size"),
				Cost:     number.Draw(t, "cost"),
			}
			c := submit(context.Background(), fc, r)
			var rej *flowcontrol.RejectionError
			if !c.finished() || !errors.As(c.err, &rej) || rej.Outcome == flowcontrol.OutcomeEvictedQueuePressure {
				continue // queued, or displaced by another request
			}
			require.Equal(t, flowcontrol.OutcomeRejectedSaturated, rej.Outcome, "request %d", i)
			require.True(t, anyBounded, "request %d refused with every capacity unbounded: %v", i, rej)
			m := capacityNamed.FindStringSubmatch(rej.Error())
			require.NotNil(t, m, "request %d: %q names no capacity", i, rej.Error())
			l := band.FlowRequestCapacity
			if !strings.HasPrefix(m[1], "flow") {
				l = bounds[m[1]+" "+m[2]]
			}
			n, ok := l.Value()
			require.True(t, ok, "request %d: %q names an unbounded capacity", i, rej.Error())
			require.Equal(t, strconv.FormatInt(n, 10), m[3], "request %d: %q", i, rej.Error())
		}
	})
}
