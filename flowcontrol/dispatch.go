package flowcontrol

import (
	"math/bits"
	"time"
)

// firstNonEmpty returns the index of the highest band with waiters, or -1.
// Called with mu held.
func (c *FlowController) firstNonEmpty() int {
	for i, word := range c.nonEmpty {
		if word != 0 {
			return i*64 + bits.TrailingZeros64(word)
		}
	}
	return -1
}

// dispatchLocked offers the head of the highest waiting band — of the flow
// its fairness policy picks — to the gate until the gate refuses or nothing
// waits. now is the time of the event, or the zero Time to read the clock
// on the first dispatch. Called with mu held.
func (c *FlowController) dispatchLocked(now time.Time) {
	if c.queued.requests == 0 || c.closing.Load() {
		return // once Close has begun, the queued requests are its
	}
	desc := c.bands.Load().desc
	for {
		i := c.firstNonEmpty()
		if i < 0 {
			return
		}
		b := c.headOf(desc, i) // a band short of its guarantee goes first
		if c.heldBack(b, now) {
			return // a slot kept for the next arrivals of a band above
		}
		if !c.offer(b) {
			c.refusedFor(b, now, nil)
			// A band short of its guarantee that the gate refuses (a
			// ceiling holding it back, say) does not hold back the band
			// strict priority would offer.
			if b == desc[i] || !c.offer(desc[i]) {
				// Strict priority: nothing below a refused band starts.
				c.refusedAll(now)
				return
			}
			b = desc[i]
		}
		c.granted()
		if now.IsZero() {
			now = c.clock.Now()
		}
		// The fairness policy picks only once there is a slot, so that
		// offers the gate refuses move none of its state.
		w := b.pop()
		// Counted while the scopes are still busy with w, so that the
		// window w closes (if it empties a queue) includes it.
		b.drain.dispatched(now)
		c.drain.dispatched(now)
		c.left(w, now)
		c.took()
		w.lease = c.started(b, w.requested, w.tag, w.cost, now)
		c.decide(w, OutcomeDispatched, now)
	}
}

// unqueue takes w out of its flow's queue at now, other than by dispatch.
// Called with mu held.
func (c *FlowController) unqueue(w *waiter, now time.Time) {
	w.band.remove(w)
	c.left(w, now)
}

// left books the departure at now of w, which its band has let go. Called
// with mu held.
func (c *FlowController) left(w *waiter, now time.Time) {
	b := w.band
	c.queued.remove(w.size, w.cost)
	c.publish(b)
	if b.queued.requests == 0 {
		b.drain.idle(now)
	}
	if c.queued.requests == 0 {
		c.drain.idle(now)
	}
	w.queued = false
	w.retryAfter = 0 // its deadline while it was queued
	c.drained()
	w.gen++
	if w.timer != nil {
		w.timer.Stop()
	}
}

// decide settles w's outcome at now and lists it for delivery when mu is
// released. w has left its queue, so its links.Next is free for the list.
// Called with mu held.
func (c *FlowController) decide(w *waiter, o Outcome, now time.Time) {
	w.settled = uint8(o)
	// An enqueue reads its clock before the lock: one that queued after
	// this event was timed may carry a later enqueue time.
	w.queueTime = max(c.sinceEpoch(now)-w.enqueued, 0)
	if w == c.enqueuing {
		return // its own enqueue returns the outcome
	}
	if c.decidedTail == nil {
		c.decided = w
	} else {
		c.decidedTail.links.Next = w
	}
	c.decidedTail = w
}
