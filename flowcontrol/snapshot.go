package flowcontrol

import (
	"fmt"

	"github.com/sluicegate/sluice/capacity"
)

// publish mirrors b's counters into their atomic copies and the non-empty
// bitset. Called with mu held after every change to b's waiters.
func (c *FlowController) publish(b *band) {
	b.queuedRequests.Store(b.queued)
	b.queuedBytes.Store(b.bytes)
	b.queuedCost.Store(b.cost)
	bit := uint64(1) << (b.index % 64)
	if b.queued > 0 {
		c.nonEmpty[b.index/64] |= bit
	} else {
		c.nonEmpty[b.index/64] &^= bit
	}
}

// CapacitySnapshot returns the current state of band priority: the requests
// and bytes waiting in it, and its capacities. For a priority with no band
// it returns an error wrapping [capacity.ErrBandNotFound].
//
// It takes no lock and allocates nothing (except the error). Each counter is
// exact at the moment it is read; while a request is moving, the request
// count and the byte count may be read either side of that one move.
func (c *FlowController) CapacitySnapshot(priority int) (capacity.Snapshot, error) {
	b := c.bands.Load().lookup(priority)
	if b == nil {
		return capacity.Snapshot{}, fmt.Errorf("flowcontrol: priority %d: %w", priority, capacity.ErrBandNotFound)
	}
	lim := b.limits.Load()
	return capacity.Snapshot{
		Priority:        priority,
		QueuedRequests:  b.queuedRequests.Load(),
		QueuedBytes:     b.queuedBytes.Load(),
		QueuedCost:      b.queuedCost.Load(),
		RequestCapacity: lim.requests,
		ByteCapacity:    lim.bytes,
		CostCapacity:    lim.cost,
	}, nil
}

// FlowSnapshot returns the state of one flow in band priority: its waiting
// requests, their bytes and their cost, with the band's per-flow request
// capacity as RequestCapacity (its other capacities are unbounded). A flow
// with no waiters reads as empty. For a priority with no band it returns an
// error wrapping [capacity.ErrBandNotFound]. Unlike CapacitySnapshot it
// takes the controller's lock briefly.
func (c *FlowController) FlowSnapshot(priority int, flowID string) (capacity.Snapshot, error) {
	b := c.bands.Load().lookup(priority)
	if b == nil {
		return capacity.Snapshot{}, fmt.Errorf("flowcontrol: priority %d: %w", priority, capacity.ErrBandNotFound)
	}
	s := capacity.Snapshot{Priority: priority, RequestCapacity: b.limits.Load().flowRequests}
	c.mu.Lock()
	defer c.unlock()
	if f := b.flows[flowID]; f != nil {
		s.QueuedRequests, s.QueuedBytes, s.QueuedCost = int64(f.n), f.bytes, f.cost
	}
	return s, nil
}
