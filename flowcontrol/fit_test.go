package flowcontrol_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

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
