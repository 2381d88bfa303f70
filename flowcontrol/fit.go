package flowcontrol

import "github.com/sluicegate/sluice/capacity"

// refusal says why a request does not fit, and which scopes it exceeds.
type refusal struct {
	limit  limitKind // the first limit that refuses it; limitNone if it fits
	bound  int64     // that limit's value
	band   bool      // a limit of its band refuses it
	global bool      // a limit of the controller refuses it
	never  bool      // it can never fit: larger than a capacity, or a capacity of 0
	large  bool      // it is larger than a byte or cost capacity: ErrTooLarge
	// overflow: the controller's byte or cost total would pass the range
	// of int64 (see backlog.holds).
	overflow bool
}

// displaceable reports whether displacing other flows' requests could make
// room for the request refused.
func (r refusal) displaceable() bool {
	return r.limit != limitNone && r.limit != limitFlowRequests && !r.never && !r.overflow
}

// scope names the limits of one holder, for refusal.
type scope struct {
	requests, bytes, cost limitKind
	global                bool
}

var (
	flowScope   = scope{requests: limitFlowRequests} // a flow bounds only its requests
	bandScope   = scope{limitBandRequests, limitBandBytes, limitBandCost, false}
	globalScope = scope{limitGlobalRequests, limitGlobalBytes, limitGlobalCost, true}
)

// refusal checks a request of size bytes and cost, of flow f (nil when the
// flow has no waiters), against band b's limits and the controller's, as if
// the requests in plan had left, and explains why it does not fit. It makes
// the checks fitsAll makes, in the same order. Called with mu held.
func (c *FlowController) refusal(b *band, lim *bandLimits, f *Flow, size, cost int64, plan []*waiter) refusal {
	var inFlow backlog
	if f != nil {
		inFlow = f.queued
	}
	inBand, inAll := b.queued, c.queued
	for _, v := range plan {
		if v.band == b {
			inBand.remove(v.size, v.cost)
		}
		inAll.remove(v.size, v.cost)
	}
	var r refusal
	r.check(&lim.flow, flowScope, &inFlow, size, cost)
	r.check(&lim.band, bandScope, &inBand, size, cost)
	r.check(&c.capacities, globalScope, &inAll, size, cost)
	if !inAll.holds(size, cost) {
		// Every holder's count is at most the controller's: this one check
		// keeps them all exact. Displacing others would be no fairer.
		if r.limit == limitNone {
			r.limit = limitCounterRange
		}
		r.global, r.overflow = true, true
	}
	return r
}

// check adds to r what the limits l of one holder, holding held, say of a
// request of size bytes and cost. An unbounded limit is never checked.
func (r *refusal) check(l *capacities, s scope, held *backlog, size, cost int64) {
	r.checkOne(l.requests, s.requests, held.requests, 1, s.global, false)
	r.checkOne(l.bytes, s.bytes, held.bytes, size, s.global, true)
	r.checkOne(l.cost, s.cost, held.cost, cost, s.global, true)
}

// checkOne checks one limit l of kind k: sized for a byte or cost limit,
// which a request alone may exceed.
func (r *refusal) checkOne(l capacity.Limit, k limitKind, held, add int64, global, sized bool) {
	if within(l, held, add) {
		return
	}
	n, _ := l.Value() // bounded: an unbounded limit is always within
	if r.limit == limitNone {
		r.limit, r.bound = k, n
	}
	if global {
		r.global = true
	} else {
		r.band = true
	}
	if add > n {
		r.never = true
		if sized && !r.large {
			// The limit the request alone exceeds says why it can never
			// fit: report it rather than one it merely found full.
			r.limit, r.bound, r.large = k, n, true
		}
	}
}

// fitsAll reports whether a request of size bytes and cost, of flow f (nil
// when it has no waiters, or when its band bounds no flow), fits its flow,
// band b and the controller as they are — one check per holder — and the
// controller's counters can hold it: the common case, which refusal
// explains when it does not hold. Called with mu held.
func (c *FlowController) fitsAll(b *band, lim *bandLimits, f *Flow, size, cost int64) bool {
	var inFlow backlog
	if f != nil {
		inFlow = f.queued
	}
	return lim.flow.fits(&inFlow, size, cost) && lim.band.fits(&b.queued, size, cost) &&
		c.capacities.fits(&c.queued, size, cost) && c.queued.holds(size, cost)
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
		rej.RetryAfter = b.drain.retryAfter(now, c.inFlightNow())
	}
	if r.global {
		rej.RetryAfter = max(rej.RetryAfter, c.drain.retryAfter(now, c.inFlightNow()))
	}
	return rej
}

// global reports whether k is a limit of the whole controller.
func (k limitKind) global() bool {
	return k == limitGlobalRequests || k == limitGlobalBytes || k == limitGlobalCost
}

// counted returns the byte size and the cost req counts as: its ByteSize
// within [0, MaxRequestBytes], its Cost within [1, MaxRequestCost].
func counted(req *Request) (size, cost int64) {
	return min(max(req.ByteSize, 0), MaxRequestBytes), min(max(req.Cost, 1), MaxRequestCost)
}

// fitsQueued reports whether w fits its band and the controller as they
// are, with nothing displaced. Called with mu held.
func (c *FlowController) fitsQueued(w *waiter) bool {
	b := w.band
	lim := b.limits.Load()
	var f *Flow
	if lim.flow.bounded {
		f = b.flows[w.requested.ID] // only a per-flow capacity needs the flow to fit
	}
	return c.fitsAll(b, lim, f, w.size, w.cost)
}
