package flowcontrol

import (
	"context"
	"errors"
	"time"
)

// EnqueueAndWait asks for req to be admitted and blocks until it is
// dispatched, rejected, expired, cancelled or shut down. On dispatch it
// returns an [*Admission] whose Done the caller must call when the request
// has finished; otherwise it returns a [*RejectionError] and a nil
// admission.
//
// When there is room — the band fits the request, no band at or above it is
// waiting and the gate admits it — the request starts at once without being
// queued. With a gate that only counts ([gate.MaxInFlight], or none) and no
// request waiting in any band, it starts without taking the controller's
// lock, and its Done returns the slot without it. When its band or the
// controller is full it is rejected at once.
// While it waits, the calling goroutine is parked; [FlowController.Submit]
// admits without holding a goroutine.
func (c *FlowController) EnqueueAndWait(ctx context.Context, req Request) (*Admission, error) {
	start := c.enqueueStart()
	adm, rej, w, gen := c.admit(ctx, &req, nil, start)
	if w == nil {
		if c.observer != nil {
			c.report(adm, rej, c.atOnce(&req, start))
		}
		if rej != nil {
			return nil, rej
		}
		return adm, nil
	}
	defer c.leaveOwed()
	if done := ctx.Done(); done == nil {
		<-w.ready // a context that never ends: a receive costs less than a select
	} else {
		select {
		case <-w.ready:
		case <-done:
			c.cancelWait(w, gen, contextOutcome(ctx), true)
		}
	}
	// Whoever settled the outcome did so under mu, before signalling ready: it
	// is final and visible here.
	adm, rej = c.result(w)
	h := w.heard()
	c.recycle(w)
	return c.finish(adm, rej, h)
}

// Submit is the non-blocking form of [FlowController.EnqueueAndWait]: it
// asks for req to be admitted and returns at once, and done is called
// exactly once with what EnqueueAndWait would have returned — an admission
// whose Done the callee must call, or a [*RejectionError].
//
// done runs outside the controller's lock, after the Observer, on the
// goroutine that settles the outcome: within Submit when the request starts
// or is rejected at once; otherwise on the goroutine of the event that
// decides it — another request's [Admission.Done], a [FlowController.Nudge],
// the clock's timer for an expiry, the context's AfterFunc for a
// cancellation, or [FlowController.Close]. It may call back into the
// controller, but it delays that goroutine, so it should be short; the
// outcomes that a Done called from inside it settles are delivered when it
// returns (or panics), by the goroutine that ran it, so a chain of
// callbacks that each call Done runs in constant stack depth. A queued
// request costs no goroutine: an event loop can keep millions waiting. If
// the Observer panics, done is still called, with the same outcome, before
// the panic goes on; if done panics, it owns the admission it was given,
// and what its own Done settled is delivered all the same. Close waits for
// done of every Submit that began before it.
//
// Submit panics if done is nil.
func (c *FlowController) Submit(ctx context.Context, req Request, done func(*Admission, error)) {
	if done == nil {
		panic("flowcontrol: Submit with a nil done function")
	}
	c.enterOwed() // before admit reads closing; see owed
	defer c.leaveOwed()
	start := c.enqueueStart()
	adm, rej, w, _ := c.admit(ctx, &req, done, start)
	if w != nil {
		return // queued: done runs when the outcome is settled
	}
	var h heard
	if c.observer != nil {
		h = c.atOnce(&req, start)
	}
	c.hand(done, adm, rej, h)
}

// heard is what the Observer hears of a request besides its outcome; see
// the fields of Event.
type heard struct {
	tag    any
	size   int64
	took   time.Duration
	queued bool
}

// enqueueStart returns the time an enqueue starts, as time since the
// controller's epoch, when the controller is timed; 0 otherwise. (8 bytes
// to pass down, where a Time takes 24, on the path every admission runs.)
func (c *FlowController) enqueueStart() time.Duration {
	if !c.timed {
		return 0
	}
	return max(c.sinceEpoch(time.Time{}), 1) // 0 means untimed: off by 1ns at the epoch
}

// enqueueTook returns the time from start, an enqueueStart, to now (the
// clock's reading when now is the zero Time); 0 when start is 0.
func (c *FlowController) enqueueTook(start time.Duration, now time.Time) time.Duration {
	if start == 0 {
		return 0
	}
	return max(c.sinceEpoch(now)-start, 0)
}

// atOnce returns what the Observer hears of req, whose outcome was reached
// within its enqueue, begun at start.
func (c *FlowController) atOnce(req *Request, start time.Duration) heard {
	size, _ := counted(req)
	return heard{tag: req.Tag, size: size, took: c.enqueueTook(start, time.Time{})}
}

// admit runs admission for req. It returns the admission or the rejection
// when the request is decided at once, or the waiter it queued and its
// generation. done is nil for EnqueueAndWait. start is when the enqueue
// began (an enqueueStart: 0 when the controller is not timed).
//
// The common case, room to start at once, takes the lock once and derives
// no ordering key. A request that must wait has its key derived outside the
// lock — Policy.Key is user code, which may be slow or panic — and then
// takes the lock again, where every check is made afresh.
func (c *FlowController) admit(ctx context.Context, req *Request, done func(*Admission, error), start time.Duration) (*Admission, *RejectionError, *waiter, uint64) {
	if c.closing.Load() {
		return nil, c.shutdownRejection(req.Key), nil, 0
	}
	if err := ctx.Err(); err != nil {
		// The caller is gone already: queueing it would only hold a slot.
		rej := &RejectionError{Requested: req.Key}
		rej.Effective = effectiveKey(req.Key, c.resolve(c.bands.Load(), req.Key.Priority))
		rej.setContext(ctx, err)
		return nil, rej, nil, 0
	}
	b := c.resolve(c.bands.Load(), req.Key.Priority)
	if b == nil {
		return nil, &RejectionError{Outcome: OutcomeRejectedSaturated, Requested: req.Key, Effective: req.Key, limit: limitNoBand}, nil, 0
	}
	size, cost := counted(req)
	if adm := c.startFast(b, req.Key, size, cost); adm != nil {
		return adm, nil, nil, 0
	}
	// A band with waiters cannot start a request at once: skip the first
	// attempt, and its lock, under contention. (A stale read only moves
	// the decision to enqueue, which makes every check again.)
	if b.published.requests.Load() == 0 {
		if adm, rej := c.startAtOnce(b, req.Key, req.Tag, size, cost); adm != nil {
			return adm, nil, nil, 0
		} else if rej != nil {
			return nil, rej, nil, 0
		}
	}

	now := c.clock.Now()
	w, expireAfter := c.newWaiter(ctx, req, b, size, now)
	w.done, w.cost = done, cost
	adm, rej, gen, took := c.enqueue(w, now, start, expireAfter)
	if adm != nil || rej != nil {
		c.recycle(w)
		return adm, rej, nil, 0
	}
	if c.waiting != nil {
		// From locals: once enqueue has returned, a queued Submit's waiter
		// may be delivered and reused by another goroutine.
		c.tellWaiting(Event{
			Requested:   req.Key,
			Effective:   FlowKey{ID: req.Key.ID, Priority: b.priority},
			Queued:      true,
			EnqueueTime: took,
			ByteSize:    size,
			Tag:         req.Tag,
		}, w, gen, done == nil)
	}
	return nil, nil, w, gen
}

// tellWaiting calls Waiting with ev, of the request w just queued with
// generation gen. If Waiting panics and the request is an EnqueueAndWait's
// (blocking), its wait is given up before the panic goes on, since its
// caller gets the panic: the Observer hears the outcome (a cancellation,
// or a dispatch that came first, whose admission is then released).
func (c *FlowController) tellWaiting(ev Event, w *waiter, gen uint64, blocking bool) {
	if blocking {
		defer func() {
			if r := recover(); r != nil {
				defer c.leaveOwed()
				c.cancelWait(w, gen, OutcomeRejectedContextCancelled, false)
				adm, rej := c.result(w)
				h := w.heard()
				c.recycle(w)
				if adm != nil {
					defer adm.Done()
				}
				c.report(adm, rej, h)
				panic(r)
			}
		}()
	}
	callWaiting(c.waiting, ev)
}

// startAtOnce admits a request into band b if it fits and can start now,
// or rejects it if it does not fit and displacing others cannot make room.
// It returns nil, nil when the request must wait, or when displacement may
// let it in: enqueue decides that.
func (c *FlowController) startAtOnce(b *band, key FlowKey, tag any, size, cost int64) (*Admission, *RejectionError) {
	c.mu.Lock()
	// Nothing is decided here, so there is nothing for unlock to deliver.
	defer c.mu.Unlock()
	if c.closing.Load() {
		return nil, c.shutdownRejection(key)
	}
	lim := b.limits.Load()
	var f *Flow
	if lim.flow.requests.IsBounded() {
		f = b.flows[key.ID] // only a per-flow capacity needs the flow
	}
	if !c.fitsAll(b, lim, f, size, cost) {
		r := c.refusal(b, lim, f, size, cost, nil)
		if c.noDisplacement || !r.displaceable() {
			return nil, c.capacityRejection(b, key, r)
		}
		return nil, nil
	}
	if !c.isFirst(b) || !c.offer(b) {
		return nil, nil
	}
	c.took()
	l := c.started(b, key, tag, cost, time.Time{})
	c.arrived(b, time.Time{})
	a := c.slab.admission()
	a.c, a.requested, a.effective, a.lease = c, key, b.priority, l
	return a, nil
}

// enqueue queues w, unless it can start at once or no longer fits. When w
// was queued it returns nil, nil, w's generation, for the late timers of
// this use to check, and the time since start, the enqueue's beginning (0
// when start is 0: the controller is not timed); w's timer then expires it
// expireAfter later, unless that is 0 (see newWaiter).
func (c *FlowController) enqueue(w *waiter, now time.Time, start, expireAfter time.Duration) (adm *Admission, rej *RejectionError, gen uint64, took time.Duration) {
	c.mu.Lock()
	defer c.unlockBeside(w, &adm, &rej, &gen)
	b := w.band
	if c.closing.Load() {
		return nil, c.shutdownRejection(w.requested), 0, 0
	}
	if c.timed {
		// now was read before the lock; the enqueue time the Observer
		// hears counts the wait for it. (Otherwise the clock is not read
		// again: an event since may have been later, which the drain
		// meters and queue times allow for.)
		if t := c.clock.Now(); t.After(now) {
			now = t
		}
	}
	if !c.fitsQueued(w) {
		if rej := c.makeRoom(w, now); rej != nil {
			return nil, rej, 0, 0
		}
	}
	c.queuing() // before the gate is asked: see lockFree.release
	first := c.isFirst(b)
	if first {
		if c.offer(b) {
			c.drained()
			c.took()
			l := c.started(b, w.requested, w.tag, w.cost, now)
			c.arrived(b, now)
			a := c.slab.admission()
			a.c, a.requested, a.effective, a.lease = c, w.requested, b.priority, l
			return a, nil, 0, 0
		}
		defer c.refusedAll(now) // once w is queued
		c.refusedFor(b, now, w) // w, about to queue, is in the demand
	}
	c.queue(w, now)
	c.arrived(b, now)
	if !first {
		// A band at or above this one waits: offer its head again, as on
		// every event. (When w was first, the gate has just refused it and
		// nothing else may go before it.)
		c.enqueuing = w
		defer func() {
			c.enqueuing = nil
			if r := recover(); r != nil {
				c.withdraw(w)
				panic(r)
			}
		}()
		c.dispatchLocked(now)
		if !w.queued {
			// Dispatched by its own enqueue.
			adm, _ := c.result(w)
			return adm, nil, 0, 0
		}
	}
	gen = w.gen
	if start != 0 {
		// now was read under mu, above: the request is in its queue.
		took = c.enqueueTook(start, now)
		w.enqueueTime = took
	}
	// The closures capture use, a copy: capturing gen, whose address the
	// deferred unlockBeside takes, would move it to the heap on every call.
	use := gen
	if expireAfter > 0 {
		w.timer = c.clock.AfterFunc(expireAfter, func() { c.abandon(w, use, OutcomeRejectedTTLExpired, false) })
	}
	c.enterOwed() // until w's outcome is delivered
	if w.done == nil {
		if w.ready == nil {
			w.ready = make(chan struct{}, 1) // kept for the waiter's next uses
		}
	} else if w.ctx.Done() != nil {
		ctx := w.ctx
		w.stopCtx = context.AfterFunc(ctx, func() { c.abandon(w, use, contextOutcome(ctx), true) })
	}
	return nil, nil, gen, took
}

// queue adds w to its flow's queue in its band at now. Called with mu held.
func (c *FlowController) queue(w *waiter, now time.Time) {
	b := w.band
	b.push(w)
	if w.deadline() != 0 {
		b.dated = true // see holdsBack
	}
	c.queued.add(w.size, w.cost)
	c.publish(b)
	if b.queued.requests == 1 {
		b.drain.busy(now)
	}
	if c.queued.requests == 1 {
		c.drain.busy(now)
	}
	w.queued = true
}

// withdraw takes back w, whose caller is panicking out of its enqueue:
// out of its queue if it is still there, or its slot back to the gate if
// the dispatch that panicked had started it. Called with mu held.
func (c *FlowController) withdraw(w *waiter) {
	w.withdrawn = true
	if w.queued {
		c.unqueue(w, c.clock.Now())
		return
	}
	if w.outcome() == OutcomeDispatched {
		// Its admission was never handed out: nobody else can end it.
		c.untook()
		c.giveBackUnused(w.lease, w.band.priority)
	}
}

// isFirst reports whether no band at or above b has waiters, so that a
// request for b would be the head dispatch offers to the gate first. Called
// with mu held.
//
// With guarantees (BandConfig.Guarantee), a band short of its guarantee
// goes before the bands above it that are not: b is first when no band
// short of its guarantee at or above it waits, and, unless b itself is
// short of its guarantee, no band at all at or above it.
func (c *FlowController) isFirst(b *band) bool {
	top := c.firstNonEmpty()
	return (top < 0 || c.firstAt(b, top)) && !c.heldBack(b, time.Time{})
}

// contextOutcome is the outcome of a wait that ctx ended: an expiry for a
// deadline, a cancellation otherwise.
func contextOutcome(ctx context.Context) Outcome {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return OutcomeRejectedTTLExpired
	}
	return OutcomeRejectedContextCancelled
}

// setContext records the context's error, and its cause when that differs,
// and derives the outcome from them.
func (e *RejectionError) setContext(ctx context.Context, err error) {
	e.ctxErr = err
	if cause := context.Cause(ctx); cause != nil && cause != err {
		e.ctxCause = cause
	}
	if errors.Is(err, context.DeadlineExceeded) {
		e.Outcome = OutcomeRejectedTTLExpired
	} else {
		e.Outcome = OutcomeRejectedContextCancelled
	}
}
