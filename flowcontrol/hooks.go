package flowcontrol

import (
	"time"

	"github.com/sluicegate/sluice/ordering"
)

// The hooks through which the phase files (enqueue.go, dispatch.go,
// admission.go, deliver.go) reach the optional features. Each checks
// whether its feature is on and, only then, calls its owner: a request
// through a controller with every feature off touches no owner's file.
// A new feature adds its owner's file and its calls here.

// startFast starts a request at once without the lock, when the lock-free
// path is on and nothing waits; nil otherwise (see lockFree.start).
func (c *FlowController) startFast(b *band, key FlowKey, size, cost int64) *Admission {
	if c.fast == nil {
		return nil
	}
	return c.fast.start(c, b, key, size, cost)
}

// queuing marks, for the lock-free path, that a request is being queued.
// Called with mu held.
func (c *FlowController) queuing() {
	if c.fast != nil {
		c.fast.queuing()
	}
}

// drained tells the lock-free path what is queued in all bands. Called
// with mu held.
func (c *FlowController) drained() {
	if c.fast != nil {
		c.fast.idle(c.queued.requests)
	}
}

// headOf returns the band whose head dispatch offers when desc[i] is the
// highest band with waiters: with guarantees, a band short of its own may
// go first. Called with mu held.
func (c *FlowController) headOf(desc []*band, i int) *band {
	if c.reclaim == nil {
		return desc[i]
	}
	return c.reclaim.head(c, desc, i)
}

// firstAt reports whether a request for band b would be the head offered
// first, when top ≥ 0 is the highest band with waiters. Called with mu
// held.
func (c *FlowController) firstAt(b *band, top int) bool {
	if c.reclaim == nil {
		return top > b.index
	}
	return c.reclaim.first(c, b, top)
}

// refusedFor runs the hooks of a refusal of band b's head at now, with
// arriving, if not nil, about to queue in it: a revocation decision.
// Called with mu held.
func (c *FlowController) refusedFor(b *band, now time.Time, arriving *waiter) {
	if c.reclaim != nil {
		c.reclaim.refused(c, b, now, arriving)
	}
}

// refusedAll runs the hooks of a refusal after which no band is offered:
// the no-endpoints watch. Called with mu held.
func (c *FlowController) refusedAll(now time.Time) {
	if c.noEndpoints != nil {
		c.noEndpoints.refused(c, now)
	}
}

// deadline returns the deadline of a request about to queue in a band of
// limits lim, whose item is it, when the reclaimer may give way by
// deadlines — Eviction.ByDeadline, or a floor yielding to them; 0
// otherwise (see deadlineOf, which checks which). Outside the lock.
func (c *FlowController) deadline(it *ordering.Item, lim *bandLimits) time.Duration {
	if c.reclaim == nil {
		return 0
	}
	return c.deadlineOf(it, lim.objective)
}

// arrived counts a request of band b, started at once or queued at now
// (the zero Time to read the clock), in the band's arrival rate, when the
// controller gives way by deadline. Called with mu held.
func (c *FlowController) arrived(b *band, now time.Time) {
	if c.reclaim != nil {
		c.reclaim.arrived(c, b, now)
	}
}

// heldBack reports whether band b's head may not start at now (the zero
// Time to read the clock), a slot kept for the next arrivals of a band
// above it with deadlines (see holdsBack); never behind a gate whose
// servers preempt for those arrivals themselves. Called with mu held.
func (c *FlowController) heldBack(b *band, now time.Time) bool {
	return c.reclaim != nil && c.reclaim.byDeadline && !c.reclaim.preempts && c.holdsBack(b, now)
}

// granted runs the hooks of a slot granted: there are endpoints. Called
// with mu held.
func (c *FlowController) granted() {
	if c.noEndpoints != nil {
		c.noEndpoints.granted()
	}
}

// noEndpointsNow reports whether the gate reports no endpoints at all.
// Called with mu held.
func (c *FlowController) noEndpointsNow() bool {
	return c.noEndpoints != nil && c.noEndpoints.none()
}

// started books a request of band b, key and tag, that has just taken the
// slot the gate granted (the caller counts it with took), and returns its
// lease, or nil when it needs none: a metered gate hears its cost and its
// clock starts, and a band the controller may revoke lists it among its
// running admissions. now is the time of the event, or the zero Time to
// read the clock. Called with mu held.
func (c *FlowController) started(b *band, key FlowKey, tag any, cost int64, now time.Time) *lease {
	if c.meter == nil && c.reclaim == nil {
		return nil // the common admission: inlined
	}
	return c.startLease(b, key, tag, cost, now)
}

// giveBack returns the gate slot of an admission of band priority and
// lease l that ended: the reclaimer hears its end, and a metered gate its
// usage; any other gate gets Release. Called with mu held.
func (c *FlowController) giveBack(l *lease, priority int) {
	if c.reclaim != nil {
		c.reclaim.finished(c, l)
	}
	if c.meter != nil {
		c.meter.returned(c, l, priority)
		return
	}
	c.gate.Release(priority)
}

// giveBackUnused returns the gate slot of an admission of band priority
// and lease l that was never handed out. Called with mu held.
func (c *FlowController) giveBackUnused(l *lease, priority int) {
	if c.reclaim != nil {
		c.reclaim.finished(c, l)
	}
	if c.meter != nil {
		c.meter.unused(l, priority)
		return
	}
	c.gate.Release(priority)
}
