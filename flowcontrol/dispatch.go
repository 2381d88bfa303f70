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
	if c.queuedRequests == 0 || c.closing.Load() {
		return // once Close has begun, the queued requests are its
	}
	desc := c.bands.Load().desc
	for {
		i := c.firstNonEmpty()
		if i < 0 {
			return
		}
		b := desc[i]
		if !c.gate.TryAcquire(b.priority) {
			c.refusals.Add(1)
			// Strict priority: nothing below a refused band starts.
			if c.endpoints != nil {
				c.checkEndpoints(now)
			}
			return
		}
		if c.endpoints != nil {
			c.emptySince = time.Time{} // a granted slot means endpoints
		}
		// The fairness policy picks only once there is a slot, so that
		// offers the gate refuses move none of its state.
		f := b.sched.Next()
		if now.IsZero() {
			now = c.clock.Now()
		}
		w := f.oldest
		if f.queue != nil {
			w = f.queue.PopHead().Value.(*waiter)
		}
		// Counted while the scopes are still busy with w, so that the
		// window w closes (if it empties a queue) includes it.
		b.drain.dispatched(now)
		c.drain.dispatched(now)
		c.left(w, now, true, true)
		c.inFlight++
		c.decide(w, OutcomeDispatched, now)
		if c.metered != nil {
			w.meter = c.took(b.priority, w.cost, now)
		}
	}
}

// unqueue takes w out of its flow's queue at now, other than by dispatch.
// Called with mu held.
func (c *FlowController) unqueue(w *waiter, now time.Time) {
	f := w.flow
	wasHead := f.head() == w
	if f.queue != nil {
		f.queue.Remove(&w.item)
	}
	c.left(w, now, false, wasHead)
}

// left books w's departure from its flow's queue at now, and tells the
// band's scheduler: served for a dispatch, or a new head when w was the
// head (wasHead) and left otherwise. Called with mu held.
func (c *FlowController) left(w *waiter, now time.Time, served, wasHead bool) {
	b, f := w.band, w.flow
	f.n--
	f.bytes -= w.item.ByteSize
	f.cost -= w.cost
	if w.older != nil {
		w.older.newer = w.newer
	} else {
		f.oldest = w.newer
	}
	if w.newer != nil {
		w.newer.older = w.older
	} else {
		f.newest = w.older
	}
	w.older, w.newer, w.flow = nil, nil, nil
	b.queued--
	b.bytes -= w.item.ByteSize
	b.cost -= w.cost
	c.queuedRequests--
	c.queuedBytes -= w.item.ByteSize
	c.queuedCost -= w.cost
	c.publish(b)
	if b.queued == 0 {
		b.drain.idle(now)
	}
	if c.queuedRequests == 0 {
		c.drain.idle(now)
	}
	if served {
		b.sched.Served(f, w.cost)
	}
	switch {
	case f.n == 0:
		b.sched.Remove(f)
		b.dropFlow(f)
	case wasHead && !served:
		b.sched.HeadChanged(f) // the flow offers another request now
	}
	w.queued = false
	w.gen++
	if w.timer != nil {
		w.timer.Stop()
	}
}

// decide settles w's outcome at now and lists it for delivery when mu is
// released. w has left its queue. Called with mu held.
func (c *FlowController) decide(w *waiter, o Outcome, now time.Time) {
	w.outcome = o
	w.queueTime = now.Sub(w.item.EnqueueTime)
	if w == c.enqueuing {
		return // its own enqueue returns the outcome
	}
	if c.decidedTail == nil {
		c.decided = w
	} else {
		c.decidedTail.next = w
	}
	c.decidedTail = w
}
