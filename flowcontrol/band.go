package flowcontrol

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/ordering"
)

// band is one provisioned priority band: a queue per flow with waiters, and
// the fairness scheduler that picks among them. The band keeps its own
// books: push, pop and remove move a waiter in and out of its flow's queue,
// the flow's backlog and the band's, and tell the scheduler; the controller
// then books the move in its own backlog.
type band struct {
	priority int

	// Fixed at creation: requests derive their keys from policy before
	// taking the controller's lock.
	policy   ordering.Policy
	kind     ordering.QueueKind
	fairness Fairness

	// Published for lock-free readers (CapacitySnapshot): published is
	// stored under the controller's lock after every change to the band,
	// limits is replaced under it by ProvisionBand.
	published publishedBacklog
	limits    atomic.Pointer[bandLimits]

	// Guarded by the controller's lock.
	index  int     // position in the current bandSet, for the non-empty bitset
	queued backlog // what waits in all flows
	seq    uint64  // arrivals, for the single-queue order of ties
	flows  map[string]*Flow
	peak   int     // the most flows the current map has held
	free   []*Flow // emptied flows, kept for reuse
	sched  Scheduler
	drain  drainMeter // how fast the band drains, for Retry-After
	// guarantee is BandConfig.Guarantee; running lists the band's
	// admissions in dispatch order when they may be revoked (see
	// reclaimer.tracks).
	guarantee float64
	running   leaseList
	// service is the band's mean service time: the time its admissions
	// that ended by themselves (not revoked) held their slots, as a
	// moving average (see served); 0 until one has.
	service time.Duration
	// arrivals is the band's arrival rate, per second, decayed with the
	// time constant arrivalsDecay, as of arrivalsAt (see arrived).
	arrivals   float64
	arrivalsAt time.Duration
	// deadlined is set once a decision has seen a waiter of the band with
	// a deadline: the band is then held slots for (holdsBack). window is
	// how long the last waiter with a deadline a decision read had, from
	// its enqueue to its deadline: the band's objective, as queued.
	deadlined bool
	window    time.Duration
	// dated is set once a waiter with a deadline has queued in the band:
	// it is then not held back from a slot its waiters need (holdsBack).
	dated bool
}

// push queues w in the queue of its flow, which it creates when the flow has
// no waiters, and counts it. Called with the controller's lock held.
func (b *band) push(w *waiter) {
	f, created := b.flow(w.requested.ID)
	w.seq = b.seq
	b.seq++
	f.push(w)
	b.queued.add(w.size, w.cost)
	switch {
	case created:
		b.sched.Add(f)
	case f.queue != nil && f.queue.Peek() == w.item:
		b.sched.HeadChanged(f) // (in a FIFO band, a newcomer is never the head)
	}
}

// pop takes out the head of the flow the fairness policy picks, for
// dispatch. The band has waiters. Called with the controller's lock held.
func (b *band) pop() *waiter {
	f := b.sched.Next()
	w := f.pop()
	b.queued.remove(w.size, w.cost)
	b.sched.Served(f, w.cost)
	if f.queued.requests == 0 {
		b.sched.Remove(f)
		b.dropFlow(f)
	}
	return w
}

// remove takes w out of its flow's queue other than by dispatch: an
// expiry, a cancellation, a displacement or shutdown. Called with the
// controller's lock held.
func (b *band) remove(w *waiter) {
	f := w.flow
	wasHead := f.head() == w
	f.remove(w)
	b.queued.remove(w.size, w.cost)
	switch {
	case f.queued.requests == 0:
		b.sched.Remove(f)
		b.dropFlow(f)
	case wasHead:
		b.sched.HeadChanged(f) // the flow offers another request now
	}
}

// push appends w to the flow's arrival list and, in a heap band, its queue.
func (f *Flow) push(w *waiter) {
	w.flow = f
	if f.queue != nil {
		f.queue.AddKeyed(w.item, w.key)
	}
	f.waiters.PushBack(w, waiterLinks)
	f.queued.add(w.size, w.cost)
}

// pop takes out the flow's head; the flow has waiters.
func (f *Flow) pop() *waiter {
	var w *waiter
	if f.queue == nil {
		w = f.waiters.PopFront(waiterLinks)
	} else {
		w = f.queue.PopHead().Value.(*waiter)
		f.waiters.Remove(w, waiterLinks)
	}
	f.uncount(w)
	return w
}

// remove takes w, one of the flow's waiters, out of the flow.
func (f *Flow) remove(w *waiter) {
	if f.queue != nil {
		f.queue.Remove(w.item)
	}
	f.waiters.Remove(w, waiterLinks)
	f.uncount(w)
}

// uncount takes w, off the flow's lists already, out of its counts.
func (f *Flow) uncount(w *waiter) {
	f.queued.remove(w.size, w.cost)
	w.flow = nil
}

// minFreeFlows is how many emptied flows a band keeps for reuse at least.
// Beyond it, a band keeps no more emptied flows than it has active ones, so
// a steady state of many flows that empty and refill allocates nothing,
// while memory stays bounded by the flows active at once, and shrinks back
// to this when the band empties.
const minFreeFlows = 64

// flow returns the flow id of b, creating it (from the free list when it
// can) if it has no waiters. Called with the controller's lock held.
func (b *band) flow(id string) (f *Flow, created bool) {
	if f = b.flows[id]; f != nil {
		return f, false
	}
	if n := len(b.free); n > 0 {
		f = b.free[n-1]
		b.free[n-1] = nil
		b.free = b.free[:n-1]
	} else {
		f = &Flow{band: b}
		if b.kind != ordering.QueueFIFO {
			f.queue, _ = ordering.NewQueue(b.kind, b.policy) // validated when the band was made
		}
	}
	f.id = id
	b.flows[id] = f
	b.peak = max(b.peak, len(b.flows))
	return f, true
}

// dropFlow forgets f, which has no waiters left, and keeps it for reuse.
// The scheduler has been told. Called with the controller's lock held.
func (b *band) dropFlow(f *Flow) {
	delete(b.flows, f.id)
	f.id = "" // the rest is zero with the flow empty
	if len(b.free) < max(minFreeFlows, len(b.flows)) {
		b.free = append(b.free, f)
	}
	if len(b.flows) == 0 && b.peak > minFreeFlows {
		// A Go map keeps the room of its largest size: after a burst of
		// many flows, start a small one, and let the spare flows go.
		b.flows, b.peak = make(map[string]*Flow), 0
		clear(b.free[minFreeFlows:])
		b.free = slices.Clip(b.free[:min(len(b.free), minFreeFlows)])
	}
}

// bandSet is an immutable list of the provisioned bands, highest priority
// first. ProvisionBand publishes a new set; readers load the current one
// without a lock.
type bandSet struct {
	desc       []*band
	priorities []int // of desc, for Priorities; set by setBands
}

// search returns the index of the first band whose priority is at most p,
// and whether that band's priority is p.
func (s *bandSet) search(p int) (int, bool) {
	lo, hi := 0, len(s.desc)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.desc[m].priority > p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(s.desc) && s.desc[lo].priority == p
}

// lookup returns the band of priority p, or nil.
func (s *bandSet) lookup(p int) *band {
	if i, ok := s.search(p); ok {
		return s.desc[i]
	}
	return nil
}
