package flowcontrol

import (
	"context"
	"sync"
	"time"

	"github.com/sluicegate/sluice/ordering"
)

// waiter is one queued request. A waiter is reused (see recycle): gen
// survives each use, the rest is the use's.
type waiter struct {
	waiterUse
	// gen counts the times the waiter left a queue, so that a timer or a
	// context's AfterFunc of an earlier use, which may fire late, finds it
	// moved on and does nothing. Guarded by the controller's mu, and never
	// written without it.
	gen uint64
}

// waiterUse is the state of one use of a waiter.
//
// Its first 32 bytes, which never straddle two cache lines (see
// TestHotFieldsShareALine), hold what the controller and the schedulers
// touch of a waiter that is not the one arriving or leaving — the tail a
// newcomer links to, the next head a dispatch uncovers — so that in a band
// of thousands of flows, whose waiters are cold in cache, that costs one
// miss. The key, which only a heap band's global-strict compares, follows.
type waiterUse struct {
	// The waiter's place in its flow's list of waiters (Flow.waiters);
	// guarded by the controller's mu. Once the waiter has left its queue,
	// which sets both to nil, links.Next links it instead in the list of
	// outcomes it is delivered from (the controller's decided or parked
	// list, then an outcomes): nothing walks a flow's list to a waiter
	// that has left it.
	links ordering.Links[waiter]
	// Fixed before the waiter is queued.
	cost int64        // the request's cost, within [1, MaxRequestCost]
	seq  uint64       // arrival in its band, for the single-queue order of ties; set under mu
	key  ordering.Key // derived by the band's policy, outside the lock

	size int64 // the request's size in bytes, as counted in the backlogs
	// enqueued is the request's enqueue time (its item's EnqueueTime, read
	// before the lock), as time since the controller's epoch (see
	// sinceEpoch): 8 bytes, where a Time takes 24.
	enqueued time.Duration
	// item is the waiter's handle in its flow's queue in a heap band, and
	// item.Value the waiter; it is nil in a FIFO band, whose queue is the
	// arrival list. Taken from itemPool in newWaiter, and given back by
	// recycle: a heap band's waiter holds an item, a FIFO band's does not.
	item *ordering.Item
	band *band
	ctx  context.Context

	// How the outcome is delivered: done is called for a Submit; for an
	// EnqueueAndWait call, done is nil and ready receives one signal per
	// use, after which the call finishes on its own goroutine. ready holds
	// one signal and is kept from use to use (see recycle), so that a
	// queued EnqueueAndWait allocates no channel: each use sends once and
	// receives once.
	ready chan struct{}
	done  func(*Admission, error)
	// stopCtx stops Submit's watch on ctx; timer is the TTL expiry (see
	// newWaiter). Both are nil when there is none.
	stopCtx func() bool
	timer   Timer

	// Guarded by the controller's mu. Once queued is false, the outcome
	// is final and is read by whoever delivers it. It is kept in a byte
	// beside the flags, where an Outcome would take 8 more (see outcome).
	queued    bool
	byContext bool // the context ended the wait (expiry by deadline, or cancellation)
	withdrawn bool // its caller panicked out of its enqueue: deliver nothing
	planned   bool // chosen for displacement by the admission being planned
	settled   uint8
	// retryAfter is, once it has left its queue, the Retry-After of a
	// displaced, expired or no-endpoints request; while it is queued, its
	// deadline since the epoch, when the reclaimer may give way by it (0
	// for none: see deadline). One field for the two, whose times never
	// overlap, keeps the waiter in its 256-byte size class.
	retryAfter time.Duration
	flow       *Flow

	requested FlowKey
	queueTime time.Duration // set for every outcome
	lease     *lease        // for a gate.MeteredGate, set on dispatch

	// What the Observer hears beside the outcome: Request.Tag, and the
	// time the enqueue took (set under mu as the waiter is queued, when
	// the controller is timed).
	tag         any
	enqueueTime time.Duration
}

// waiterLinks returns the links of w that its flow's list keeps.
func waiterLinks(w *waiter) *ordering.Links[waiter] { return &w.links }

// outcome returns w's outcome, once it is settled (see decide).
func (w *waiterUse) outcome() Outcome { return Outcome(w.settled) }

// heard returns what the Observer hears of w besides its outcome.
func (w *waiter) heard() heard {
	return heard{tag: w.tag, size: w.size, took: w.enqueueTime, queued: true}
}

// itemPool holds the ordering items of waiters, cleared, for reuse. An item
// is the policy's view of a request (Policy.Key reads it) and, in a heap
// band, the request's handle in its flow's queue; the waiter keeps only
// what the controller reads of it (its size and enqueue time), so a FIFO
// band's waiter, which needs the item only for Policy.Key, holds none.
//
// An item returns to the pool cleared (holding no Header or waiter) and
// only once no queue holds it: a FIFO band's right after Policy.Key, a heap
// band's in recycle, after its waiter has left its queue. Nothing else, no
// late timer or AfterFunc, reaches an item, so one pool serves every
// controller.
var itemPool = sync.Pool{New: func() any { return new(ordering.Item) }}

// recycle puts w back in c's pool for reuse once its outcome is delivered.
//
// The pool is c's own (FlowController.waiterPool): one is taken for each
// request that must queue and put back once its outcome is delivered, so a
// queued request costs no allocation in the steady state. A waiter never
// returns to the pool while anything but a gen-checked late timer or
// context AfterFunc of c can still reach it, and such a late call reads
// gen under c's mu, which every write of gen holds. A pool shared by
// controllers would let the late timer of one read gen under its own mu
// while another controller, under another, writes it.
func (c *FlowController) recycle(w *waiter) {
	if it := w.item; it != nil {
		*it = ordering.Item{}
		itemPool.Put(it)
	}
	ready := w.ready
	w.waiterUse = waiterUse{ready: ready}
	c.waiterPool.Put(w)
}

// newWaiter prepares the waiter of a request that must queue in band b,
// outside the lock: its TTL, its times, its item and its key, which b's
// policy derives from the item. It also returns when, after it is queued,
// the request's own timer is to expire it (see enqueue): 0 when the
// context's deadline comes first or there is no TTL. (Only enqueue needs
// that, so the waiter does not keep it.)
func (c *FlowController) newWaiter(ctx context.Context, req *Request, b *band, size int64, now time.Time) (w *waiter, expireAfter time.Duration) {
	lim := b.limits.Load()
	ttl := minTTL(minTTL(lim.ttl, c.defaultTTL), req.TTL)
	expireAfter = ttl
	if deadline, ok := ctx.Deadline(); ok {
		if left := deadline.Sub(now); ttl == 0 || left <= ttl {
			// The context's own timer expires the request; a timer of ours
			// at the same instant would race it.
			ttl, expireAfter = max(left, 1), 0
		}
	}
	received := req.ReceivedTime
	if received.IsZero() {
		received = now
	}
	w, _ = c.waiterPool.Get().(*waiter)
	if w == nil {
		w = new(waiter)
	}
	w.band, w.ctx, w.requested, w.tag = b, ctx, req.Key, req.Tag
	w.size, w.enqueued = size, c.sinceEpoch(now)
	it := itemPool.Get().(*ordering.Item)
	*it = ordering.Item{
		ReceivedTime: received,
		EnqueueTime:  now,
		Header:       req.Header,
		TTL:          ttl,
		ByteSize:     size,
		Value:        w,
	}
	// Policy.Key is user code: should it panic, it loses it and w, which
	// return to no pool while it may still hold them.
	w.key = b.policy.Key(it)
	w.retryAfter = c.deadline(it, lim)
	if b.kind == ordering.QueueFIFO {
		*it = ordering.Item{} // no Header kept alive
		itemPool.Put(it)
	} else {
		w.item = it
	}
	return w, expireAfter
}

// minTTL returns the smaller of two TTLs, where 0 or less means none.
func minTTL(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}
