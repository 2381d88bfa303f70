package flowcontrol

import (
	"math"
	"sync/atomic"

	"github.com/sluicegate/sluice/capacity"
)

// backlog is what waits in one holder — a flow, a band or the whole
// controller: the requests, their summed byte size and their summed cost.
// Each holder keeps one, changed only by add on an arrival and remove on a
// departure, so the three holders cannot disagree about a request. A flow's
// backlog is part of its band's, a band's part of the controller's: every
// count is at most the controller's.
type backlog struct {
	requests int64
	bytes    int64
	cost     int64
}

// add counts one request of size bytes and cost.
func (q *backlog) add(size, cost int64) {
	q.requests++
	q.bytes += size
	q.cost += cost
}

// remove uncounts one request of size bytes and cost, counted before.
func (q *backlog) remove(size, cost int64) {
	q.requests--
	q.bytes -= size
	q.cost -= cost
}

// holds reports whether q can count one more request of size bytes and cost
// (both at least 0) without passing the range of int64. The request count
// is not checked: it would need more waiters than memory holds.
func (q *backlog) holds(size, cost int64) bool {
	return q.bytes <= math.MaxInt64-size && q.cost <= math.MaxInt64-cost
}

// capacities bounds a backlog: one limit per measure, each unbounded
// unless set. A flow's bounds only its requests. Build one with
// newCapacities.
type capacities struct {
	requests capacity.Limit
	bytes    capacity.Limit
	cost     capacity.Limit
	bounded  bool // some limit is bounded
}

func newCapacities(requests, bytes, cost capacity.Limit) capacities {
	return capacities{
		requests: requests,
		bytes:    bytes,
		cost:     cost,
		bounded:  requests.IsBounded() || bytes.IsBounded() || cost.IsBounded(),
	}
}

// fits reports whether q, with one more request of size bytes and cost,
// stays within every bounded limit. An unbounded limit is not checked, so
// a holder with none costs one test: the common case.
func (l *capacities) fits(q *backlog, size, cost int64) bool {
	return !l.bounded || l.allow(q, size, cost) // small enough to inline
}

func (l *capacities) allow(q *backlog, size, cost int64) bool {
	return within(l.requests, q.requests, 1) && within(l.bytes, q.bytes, size) && within(l.cost, q.cost, cost)
}

// within reports whether held+add stays within l, exactly: held and the
// limit are at least 0, so n-held cannot overflow, whatever add is.
func within(l capacity.Limit, held, add int64) bool {
	n, bounded := l.Value()
	return !bounded || add <= n-held
}

// room is the largest request, in bytes and cost, that an empty holder
// bounded by capacities fits: a request fits it when it is no larger in
// either. A holder that bounds its requests to 0 fits none.
type room struct{ bytes, cost int64 }

func (l *capacities) room() room {
	if n, ok := l.requests.Value(); ok && n < 1 {
		return room{-1, -1}
	}
	r := room{math.MaxInt64, math.MaxInt64}
	if n, ok := l.bytes.Value(); ok {
		r.bytes = n
	}
	if n, ok := l.cost.Value(); ok {
		r.cost = n
	}
	return r
}

// fits reports whether a request of size bytes and cost fits an empty
// holder of room r: as capacities.fits does of an empty backlog.
func (r room) fits(size, cost int64) bool { return size <= r.bytes && cost <= r.cost }

// within returns the room of holders of rooms r and o both.
func (r room) within(o room) room { return room{min(r.bytes, o.bytes), min(r.cost, o.cost)} }

// publishedBacklog is a band's backlog as lock-free readers see it: stored
// under the controller's lock after every change, loaded by
// CapacitySnapshot without it. Each count is exact when read; two counts
// may be read either side of one request's move.
type publishedBacklog struct {
	requests atomic.Int64
	bytes    atomic.Int64
	cost     atomic.Int64
}

// store publishes q. A count that did not change is not stored again: an
// atomic store is a locked instruction, and a load is not.
func (p *publishedBacklog) store(q backlog) {
	p.requests.Store(q.requests)
	if p.bytes.Load() != q.bytes {
		p.bytes.Store(q.bytes)
	}
	if p.cost.Load() != q.cost {
		p.cost.Store(q.cost)
	}
}
