package flowcontrol

import (
	"math"

	"github.com/sluicegate/sluice/capacity"
)

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

// global reports whether k is a limit of the whole controller.
func (k limitKind) global() bool {
	return k == limitGlobalRequests || k == limitGlobalBytes || k == limitGlobalCost
}
