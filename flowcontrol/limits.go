package flowcontrol

import (
	"math"
	"time"

	"github.com/sluicegate/sluice/capacity"
)

// maxDisplaced bounds how many queued requests one arrival may displace: a
// request that needs more room than that (a large byte or cost size among
// small ones) is refused instead.
const maxDisplaced = 8

// refusal says why a request does not fit, and which scopes it exceeds.
type refusal struct {
	limit  limitKind // the first limit that refuses it; limitNone if it fits
	bound  int64     // that limit's value
	band   bool      // a limit of its band refuses it
	global bool      // a limit of the controller refuses it
	never  bool      // it can never fit: larger than a capacity, or a capacity of 0
	large  bool      // it is larger than a byte or cost capacity: ErrTooLarge
	// overflow: a counter with an unbounded limit would pass the range of
	// int64.
	overflow bool
}

// displaceable reports whether displacing other flows' requests could make
// room for the request refused.
func (r refusal) displaceable() bool {
	return r.limit != limitNone && r.limit != limitFlowRequests && !r.never && !r.overflow
}

// refusal checks a request of size bytes and cost, of flow f (nil when the
// flow has no waiters), against band b's limits and the controller's, as if
// the requests in plan had left. Called with mu held.
func (c *FlowController) refusal(b *band, lim *bandLimits, f *Flow, size, cost int64, plan []*waiter) refusal {
	bq, bb, bc := b.queued, b.bytes, b.cost
	gq, gb, gc := c.queuedRequests, c.queuedBytes, c.queuedCost
	var fq int64
	if f != nil && lim.flowRequests.IsBounded() {
		fq = int64(f.Len())
	}
	for _, v := range plan {
		if v.band == b {
			bq, bb, bc = bq-1, bb-v.item.ByteSize, bc-v.cost
		}
		gq, gb, gc = gq-1, gb-v.item.ByteSize, gc-v.cost
	}
	var r refusal
	check := func(l capacity.Limit, kind limitKind, held, add int64, global, sized bool) {
		if !l.IsBounded() {
			// An unbounded limit is still bounded by the counter's range:
			// a sum that would wrap is refused, and displacing others for
			// it would be no fairer.
			if held <= math.MaxInt64-add {
				return
			}
			l, r.overflow = capacity.Bounded(math.MaxInt64), true
		}
		if l.Fits(held, add) {
			return
		}
		if r.limit == limitNone {
			r.limit, r.bound = kind, limitValue(l)
		}
		if global {
			r.global = true
		} else {
			r.band = true
		}
		if !l.Fits(0, add) {
			r.never = true
			if sized && !r.large {
				// The limit the request alone exceeds says why it can
				// never fit: report it rather than one it merely found full.
				r.limit, r.bound, r.large = kind, limitValue(l), true
			}
		}
	}
	check(lim.flowRequests, limitFlowRequests, fq, 1, false, false)
	check(lim.requests, limitBandRequests, bq, 1, false, false)
	check(lim.bytes, limitBandBytes, bb, size, false, true)
	check(lim.cost, limitBandCost, bc, cost, false, true)
	check(c.requestCapacity, limitGlobalRequests, gq, 1, true, false)
	check(c.byteCapacity, limitGlobalBytes, gb, size, true, true)
	check(c.costCapacity, limitGlobalCost, gc, cost, true, true)
	return r
}

// fitsAll reports whether a request of size bytes and cost, of flow f (nil
// when it has no waiters or when no per-flow capacity applies), fits band b
// and the controller as they are: the common case, which refusal explains
// when it does not hold. Called with mu held.
func (c *FlowController) fitsAll(b *band, lim *bandLimits, f *Flow, size, cost int64) bool {
	var fq int64
	if f != nil {
		fq = int64(f.Len())
	}
	return fits(lim.flowRequests, fq, 1) && fits(lim.requests, b.queued, 1) && fits(lim.bytes, b.bytes, size) &&
		fits(lim.cost, b.cost, cost) && fits(c.requestCapacity, c.queuedRequests, 1) &&
		fits(c.byteCapacity, c.queuedBytes, size) && fits(c.costCapacity, c.queuedCost, cost)
}

// fits is capacity.Limit.Fits with an unbounded limit still bounded by the
// range of the counter it limits.
func fits(l capacity.Limit, held, add int64) bool {
	if n, bounded := l.Value(); bounded {
		return held <= n && add <= n-held
	}
	return held <= math.MaxInt64-add
}

// limitValue returns a bounded limit's value; only called on limits that
// refused a request, which are bounded.
func limitValue(l capacity.Limit) int64 {
	n, _ := l.Value()
	return n
}

// capacityRejection is the rejection of a request for band b that r
// refuses. Its Retry-After projects from every scope r exceeds, the longest
// projection winning; a request that can never fit gets none. Called with
// mu held.
func (c *FlowController) capacityRejection(b *band, key FlowKey, r refusal) *RejectionError {
	rej := &RejectionError{
		Outcome:   OutcomeRejectedSaturated,
		Requested: key,
		Effective: effectiveKey(key, b),
		limit:     r.limit,
		limitVal:  r.bound,
		tooLarge:  r.large,
	}
	if r.never {
		return rej
	}
	now := c.clock.Now()
	if r.band {
		rej.RetryAfter = b.drain.retryAfter(now)
	}
	if r.global {
		rej.RetryAfter = max(rej.RetryAfter, c.drain.retryAfter(now))
	}
	return rej
}

// makeRoom checks that w fits its band and the controller and, when it does
// not, displaces the newest requests of the flows holding the most, if w's
// flow holds less than its share (see [Config.NoDisplacement]). It returns
// the rejection of w when no room can be made; nothing is displaced then.
// Called with mu held.
func (c *FlowController) makeRoom(w *waiter, now time.Time) *RejectionError {
	b := w.band
	lim := b.limits.Load()
	f := b.flows[w.requested.ID]
	size := w.item.ByteSize
	if c.fitsAll(b, lim, f, size, w.cost) {
		return nil
	}
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
		if global[i] {
			v.retryAfter = c.drain.retryAfter(now)
		} else {
			v.retryAfter = v.band.drain.retryAfter(now)
		}
		c.unqueue(v, now)
		c.decide(v, OutcomeEvictedQueuePressure, now)
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
		measure = func(v *waiter) int64 { return v.item.ByteSize }
	case limitBandCost, limitGlobalCost:
		measure = func(v *waiter) int64 { return v.cost }
	}
	held := func(g *Flow) int64 {
		var n int64
		switch r.limit {
		case limitBandBytes, limitGlobalBytes:
			n = g.bytes
		case limitBandCost, limitGlobalCost:
			n = g.cost
		default:
			n = int64(g.Len())
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
	v := f.newest
	for v.planned {
		v = v.older
	}
	return v
}

// global reports whether k is a limit of the whole controller.
func (k limitKind) global() bool {
	return k == limitGlobalRequests || k == limitGlobalBytes || k == limitGlobalCost
}
