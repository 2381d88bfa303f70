package flowcontrol

import (
	"cmp"
	"slices"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// noEndpointsRetryAfter is the Retry-After of rejected-no-endpoints. Nothing
// measures when endpoints come back, and a queued request starts the
// moment they do, so a dropped client is told to rejoin the queue after
// the shortest Retry-After there is: each retry costs one queue place for
// NoEndpointsTTL, and the client is back in the queue within a second of
// its drop, whenever the pool recovers.
const noEndpointsRetryAfter = time.Second

// endpointWatch drops the requests that wait [Config.NoEndpointsTTL] while
// the gate, a [gate.EndpointGate], reports no endpoints at all, with
// OutcomeRejectedNoEndpoints. FlowController.noEndpoints is nil when the
// gate is not one. Guarded by the controller's mu.
type endpointWatch struct {
	gate gate.EndpointGate
	ttl  time.Duration
	// emptySince is when the gate was last seen to report no endpoints
	// after reporting some (the zero Time while it reports endpoints);
	// timer, if set, is the pending check that drops requests that waited
	// ttl with no endpoints.
	emptySince time.Time
	timer      Timer
}

// newEndpointWatch returns the watch of gate g with ttl, or nil when g is
// not an EndpointGate.
func newEndpointWatch(g gate.Gate, ttl time.Duration) *endpointWatch {
	eg, ok := g.(gate.EndpointGate)
	if !ok {
		return nil
	}
	return &endpointWatch{gate: eg, ttl: ttl}
}

// none reports whether the gate reports no endpoints. Called with mu
// held.
func (e *endpointWatch) none() bool { return e.gate.NoEndpoints() }

// granted notes that the gate granted a slot: there are endpoints. Called
// with mu held.
func (e *endpointWatch) granted() { e.emptySince = time.Time{} }

// refused follows the gate after it refused at now, with no band left to
// offer: when it reports no endpoints and requests wait, it notes when the
// pool emptied and makes sure a check will drop those that wait ttl with no
// endpoints. Called with mu held.
func (e *endpointWatch) refused(c *FlowController, now time.Time) {
	if !e.gate.NoEndpoints() {
		e.emptySince = time.Time{}
		return
	}
	if now.IsZero() {
		now = c.clock.Now()
	}
	if e.emptySince.IsZero() {
		e.emptySince = now
	}
	if e.ttl > 0 && e.timer == nil && c.queued.requests > 0 {
		e.timer = c.clock.AfterFunc(e.ttl, c.dropNoEndpoints)
	}
}

// dropNoEndpoints runs when a request may have waited NoEndpointsTTL with
// no endpoints: it drops every request that has, and schedules itself again
// for the next one while the pool stays empty.
func (c *FlowController) dropNoEndpoints() {
	c.mu.Lock()
	defer c.unlock()
	e := c.noEndpoints
	e.timer = nil
	if c.closing.Load() || e.emptySince.IsZero() {
		return
	}
	if !e.gate.NoEndpoints() {
		e.emptySince = time.Time{}
		c.dispatchLocked(time.Time{})
		return
	}
	now := c.clock.Now()
	// Instants as time since the controller's epoch, as waiters keep their
	// enqueue time.
	at, emptySince := c.sinceEpoch(now), c.sinceEpoch(e.emptySince)
	var next time.Duration // the earliest deadline of a request kept, if any
	var kept bool
	for _, b := range c.bands.Load().desc {
		if b.queued.requests == 0 {
			continue
		}
		var due []*waiter
		for _, f := range b.flows {
			for w := f.waiters.Back(); w != nil; w = w.links.Prev {
				switch deadline := addTime(max(w.enqueued, emptySince), e.ttl); {
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
		e.timer = c.clock.AfterFunc(next-at, c.dropNoEndpoints)
	}
}
