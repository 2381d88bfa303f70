package flowcontrol

import (
	"fmt"

	"github.com/sluicegate/sluice/capacity"
)

// publish mirrors b's backlog into its published copy and the non-empty
// bitset. Called with mu held after every change to b's waiters.
func (c *FlowController) publish(b *band) {
	b.published.store(b.queued)
	bit := uint64(1) << (b.index % 64)
	if b.queued.requests > 0 {
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
		QueuedRequests:  b.published.requests.Load(),
		QueuedBytes:     b.published.bytes.Load(),
		QueuedCost:      b.published.cost.Load(),
		RequestCapacity: lim.band.requests,
		ByteCapacity:    lim.band.bytes,
		CostCapacity:    lim.band.cost,
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
	s := capacity.Snapshot{Priority: priority, RequestCapacity: b.limits.Load().flow.requests}
	c.mu.Lock()
	defer c.unlock()
	if f := b.flows[flowID]; f != nil {
		s.QueuedRequests, s.QueuedBytes, s.QueuedCost = f.queued.requests, f.queued.bytes, f.queued.cost
	}
	return s, nil
}

// Priorities returns the priorities of the provisioned bands, highest
// first: the band list a usage-limit policy ranks bands in. The slice is
// shared by every caller and must not be modified; [FlowController.ProvisionBand]
// replaces it rather than changing it, so a slice once returned stays as it
// was. It reads one atomic pointer: no lock, no allocation, so a gate may
// call it from TryAcquire.
func (c *FlowController) Priorities() []int { return c.bands.Load().priorities }
