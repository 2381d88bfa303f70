package flowcontrol

import (
	"cmp"
	"slices"
	"time"
)

// noEndpointsRetryAfter is the Retry-After of rejected-no-endpoints. Nothing
// measures when endpoints come back, and a queued request starts the
// moment they do, so a dropped client is told to rejoin the queue after
// the shortest Retry-After there is: each retry costs one queue place for
// NoEndpointsTTL, and the client is back in the queue within a second of
// its drop, whenever the pool recovers.
const noEndpointsRetryAfter = time.Second

// checkEndpoints follows the gate, an EndpointGate, after it refused at
// now: when it reports no endpoints and requests wait, it notes when the
// pool emptied and makes sure a check will drop those that wait
// NoEndpointsTTL with no endpoints. Called with mu held.
func (c *FlowController) checkEndpoints(now time.Time) {
	if !c.endpoints.NoEndpoints() {
		c.emptySince = time.Time{}
		return
	}
	if now.IsZero() {
		now = c.clock.Now()
	}
	if c.emptySince.IsZero() {
		c.emptySince = now
	}
	if c.noEndpointsTTL > 0 && c.emptyTimer == nil && c.queued.requests > 0 {
		c.emptyTimer = c.clock.AfterFunc(c.noEndpointsTTL, c.dropNoEndpoints)
	}
}

// dropNoEndpoints runs when a request may have waited NoEndpointsTTL with
// no endpoints: it drops every request that has, and schedules itself again
// for the next one while the pool stays empty.
func (c *FlowController) dropNoEndpoints() {
	c.mu.Lock()
	defer c.unlock()
	c.emptyTimer = nil
	if c.closing.Load() || c.emptySince.IsZero() {
		return
	}
	if !c.endpoints.NoEndpoints() {
		c.emptySince = time.Time{}
		c.dispatchLocked(time.Time{})
		return
	}
	now := c.clock.Now()
	// Instants as time since the controller's epoch, as waiters keep their
	// enqueue time.
	at, emptySince := c.sinceEpoch(now), c.sinceEpoch(c.emptySince)
	var next time.Duration // the earliest deadline of a request kept, if any
	var kept bool
	for _, b := range c.bands.Load().desc {
		if b.queued.requests == 0 {
			continue
		}
		var due []*waiter
		for _, f := range b.flows {
			for w := f.waiters.Back(); w != nil; w = w.links.Prev {
				switch deadline := max(w.enqueued, emptySince) + c.noEndpointsTTL; {
				case deadline <= at:
					due = append(due, w)
				case !kept || deadline < next:
					next, kept = deadline, true
				}
			}
		}
		slices.SortFunc(due, func(x, y *waiter) int { return cmp.Compare(x.seq, y.seq) })
		for _, w := range due {
			c.unqueue(w, now)
			w.retryAfter = noEndpointsRetryAfter
			c.decide(w, OutcomeRejectedNoEndpoints, now)
		}
	}
	if kept {
		c.emptyTimer = c.clock.AfterFunc(next-at, c.dropNoEndpoints)
	}
}
