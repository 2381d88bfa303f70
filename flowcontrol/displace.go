package flowcontrol

import "time"

// maxDisplaced bounds how many queued requests one arrival may displace: a
// request that needs more room than that (a large byte or cost size among
// small ones) is refused instead.
const maxDisplaced = 8

// makeRoom makes room for w, which does not fit its band or the controller
// (see fitsQueued): it displaces the newest requests of the flows holding
// the most, if w's flow holds less than its share (see
// [Config.NoDisplacement]). It returns the rejection of w when no room can
// be made; nothing is displaced then. Called with mu held.
func (c *FlowController) makeRoom(w *waiter, now time.Time) *RejectionError {
	b := w.band
	lim := b.limits.Load()
	size := w.size
	f := b.flows[w.requested.ID]
	first := c.refusal(b, lim, f, size, w.cost, nil)
	var (
		plan   []*waiter
		global []bool // for each of plan: a controller-wide limit displaced it
	)
	defer func() {
		for _, v := range plan {
			v.planned = false
		}
	}()
	for r := first; r.limit != limitNone; r = c.refusal(b, lim, f, size, w.cost, plan) {
		if c.noDisplacement || !r.displaceable() || len(plan) == maxDisplaced {
			return c.capacityRejection(b, w.requested, first)
		}
		v := c.victim(w, f, r, plan)
		if v == nil {
			return c.capacityRejection(b, w.requested, first)
		}
		v.planned = true
		plan = append(plan, v)
		global = append(global, r.limit.global())
	}
	for i, v := range plan {
		// A displaced request may come back when the scope that made it
		// leave has room.
		var retryAfter time.Duration
		if global[i] {
			retryAfter = c.drain.retryAfter(now, c.inFlightNow())
		} else {
			retryAfter = v.band.drain.retryAfter(now, c.inFlightNow())
		}
		c.unqueue(v, now)
		v.retryAfter = retryAfter // after unqueue, which clears the deadline it held
		// It never reached a model server: rejected-saturated, with
		// ErrDisplaced beside it (see result).
		c.decide(v, OutcomeRejectedSaturated, now)
	}
	return nil
}

// victim returns the request to displace for w, of flow f (nil when it has
// no waiters), which r refuses after the displacements already in plan; or
// nil when w's flow holds its share already or no flow holds more than it
// would.
//
// The measure is the one r's limit counts (requests, bytes or cost), the
// scope its scope: w's band, or every band for a controller-wide limit. A
// flow's share is the limit divided by the number of flows of the scope
// holding some of it, w's included. Victims come from w's band, or for a
// controller-wide limit from any band at or below it: a request never
// displaces one of a higher band. The victim is the newest request of the flow holding the most;
// ties go to the lower band, then to the flow that queued most recently.
// O(flows in scope). Called with mu held.
func (c *FlowController) victim(w *waiter, f *Flow, r refusal, plan []*waiter) *waiter {
	measure := func(v *waiter) int64 { return 1 }
	switch r.limit {
	case limitBandBytes, limitGlobalBytes:
		measure = func(v *waiter) int64 { return v.size }
	case limitBandCost, limitGlobalCost:
		measure = func(v *waiter) int64 { return v.cost }
	}
	held := func(g *Flow) int64 {
		var n int64
		switch r.limit {
		case limitBandBytes, limitGlobalBytes:
			n = g.queued.bytes
		case limitBandCost, limitGlobalCost:
			n = g.queued.cost
		default:
			n = g.queued.requests
		}
		for _, v := range plan {
			if v.flow == g {
				n -= measure(v)
			}
		}
		return n
	}
	bands := []*band{w.band}
	if r.limit.global() {
		bands = c.bands.Load().desc
	}
	var (
		flows int64
		best  *Flow
		most  int64
	)
	for _, b := range bands {
		for _, g := range b.flows {
			h := held(g)
			if h <= 0 {
				continue
			}
			flows++
			if g == f || b.priority > w.band.priority {
				continue
			}
			if best == nil || h > most || (h == most && displaceFirst(g, best)) {
				best, most = g, h
			}
		}
	}
	var mine int64
	if f != nil {
		mine = held(f)
	}
	if mine <= 0 {
		flows++ // w's flow counts, though it holds nothing yet
	}
	if best == nil || mine >= r.bound/flows || most <= mine+measure(w) {
		return nil
	}
	return newestUnplanned(best)
}

// displaceFirst reports whether g should be displaced before best when both
// hold the same: g is in a lower band, or in the same band and its newest
// request not yet chosen was queued more recently.
func displaceFirst(g, best *Flow) bool {
	if g.band != best.band {
		return g.band.priority < best.band.priority
	}
	return newestUnplanned(g).seq > newestUnplanned(best).seq
}

// newestUnplanned returns f's most recently queued request not already
// chosen for displacement. f holds some that are not.
func newestUnplanned(f *Flow) *waiter {
	v := f.waiters.Back()
	for v.planned {
		v = v.links.Prev
	}
	return v
}
