package flowcontrol

import (
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
)

// outbox lists the outcomes settled under the controller's mu, for
// delivery once it is released. Guarded by mu.
type outbox struct {
	// decided lists, in order, the waiters whose outcome was settled in
	// the current critical section; unlock delivers them.
	decided, decidedTail *waiter
	// enqueuing is the waiter whose own enqueue is dispatching: its outcome
	// is returned by that call, not delivered.
	enqueuing *waiter
	// parked lists outcomes settled by a Done of an admission whose Submit
	// callback is still running: the goroutine running it delivers them
	// when the callback returns, so a callback that calls Done does not
	// deliver, and recurse, from inside itself.
	parked, parkedTail *waiter
}

// unlock releases mu and then delivers the outcomes decided while it was
// held. Every critical section ends here, also when a panic unwinds it.
func (c *FlowController) unlock() {
	head, tail := c.decided, c.decidedTail
	if head != nil {
		c.decided, c.decidedTail = nil, nil
	}
	if r := c.reclaim; r != nil && r.noted {
		c.unlockNoting(head, tail)
		return
	}
	c.mu.Unlock()
	if head != nil {
		c.deliverAll(head, tail)
	}
}

// unlockNoting is unlock when the critical section left notes (see
// takeNotes): they are announced after the outcomes are delivered, also
// when a delivery panics. Apart, so that unlock itself defers nothing.
func (c *FlowController) unlockNoting(head, tail *waiter) {
	n := c.reclaim.takeNotes()
	c.mu.Unlock()
	defer c.announce(&n)
	if head != nil {
		c.deliverAll(head, tail)
	}
}

// outcomes is a list of waiters whose outcomes are yet to be delivered,
// linked through waiter.links.Next (free once a waiter has left its queue), in
// order.
type outcomes struct{ head, tail *waiter }

// add moves the list from head to tail to the end of l.
func (l *outcomes) add(head, tail *waiter) {
	if head == nil {
		return
	}
	if l.tail == nil {
		l.head = head
	} else {
		l.tail.links.Next = head
	}
	l.tail = tail
}

// deliverAll delivers each waiter of the list from head to tail in order.
func (c *FlowController) deliverAll(head, tail *waiter) {
	todo := outcomes{head, tail}
	c.deliverEach(&todo)
}

// deliverEach delivers the outcomes of todo in order, and the outcomes that
// Submit callbacks' own Done calls parked as they ran, which deliver adds
// to todo: a chain of callbacks that each call Done runs in constant stack
// depth.
//
// User code that panics as it is handed an outcome — a Submit callback or
// the Observer — strands nothing: deliver adds what the callback parked
// before the panic leaves it, and what is left of todo is delivered here,
// on this goroutine, as the panic unwinds; then the panic goes on (the last
// one, if several panic).
func (c *FlowController) deliverEach(todo *outcomes) {
	defer func() {
		if todo.head != nil {
			c.deliverEach(todo)
		}
	}()
	for todo.head != nil {
		w := todo.head
		todo.head, w.links.Next = w.links.Next, nil
		if todo.head == nil {
			todo.tail = nil
		}
		c.deliver(w, todo)
	}
}

// deliver hands w's settled outcome to its caller, and adds to todo the
// outcomes parked while its Submit callback ran. Called without mu.
func (c *FlowController) deliver(w *waiter, todo *outcomes) {
	if w.withdrawn {
		return
	}
	if w.stopCtx != nil {
		w.stopCtx()
	}
	if w.done == nil {
		w.ready <- struct{}{} // EnqueueAndWait finishes on its own goroutine
		return
	}
	adm, rej := c.result(w)
	done, h := w.done, w.heard()
	c.recycle(w)
	defer c.leaveOwed() // the queued Submit's, once done has run
	if rej != nil {
		c.hand(done, nil, rej, h)
		return
	}
	// These two critical sections flip a flag and take the parked list;
	// they decide nothing, so there is nothing for unlock to deliver.
	c.mu.Lock()
	adm.inCallback = true
	c.mu.Unlock()
	defer func() {
		// Also when done or the Observer panicked: what Done decided
		// inside is delivered all the same.
		c.mu.Lock()
		adm.inCallback = false
		todo.add(c.parked, c.parkedTail)
		c.parked, c.parkedTail = nil, nil
		c.mu.Unlock()
	}()
	c.hand(done, adm, nil, h)
}

// hand gives a Submit's outcome, adm for a dispatch and rej otherwise, to
// its done function after telling the Observer. done is called even when
// the Observer panics, and the panic then goes on: whatever the Observer
// does, done is called exactly once, and an admission it is given is its
// to end. h is what the Observer hears besides the outcome. Called
// without mu.
func (c *FlowController) hand(done func(*Admission, error), adm *Admission, rej *RejectionError, h heard) {
	if rej != nil {
		defer callDone(done, nil, rej)
	} else {
		defer callDone(done, adm, nil)
	}
	if c.observer != nil {
		callObserver(c.observer, event(adm, rej, h))
	}
}

// callDone, callObserver and callWaiting are the only calls of a Submit
// callback, of the Observer and of Waiting, so that Close can tell from its
// stack that it runs inside one (see calledBack).
func callDone(done func(*Admission, error), adm *Admission, err error) { done(adm, err) }

func callObserver(observer func(Event), ev Event) { observer(ev) }

func callWaiting(waiting func(Event), ev Event) { waiting(ev) }

// calledBack reports whether the calling goroutine is running a Submit
// callback or the Observer of a controller. It walks the stack, so it is
// for rare calls only.
func calledBack() bool {
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(2, pcs)
		if n == len(pcs) {
			pcs = make([]uintptr, 2*len(pcs))
			continue
		}
		frames := runtime.CallersFrames(pcs[:n])
		for {
			f, more := frames.Next()
			if f.Function == callDoneName || f.Function == callObserverName || f.Function == callWaitingName {
				return true
			}
			if !more {
				return false
			}
		}
	}
}

var (
	callDoneName     = funcName(callDone)
	callObserverName = funcName(callObserver)
	callWaitingName  = funcName(callWaiting)
)

func funcName(f any) string { return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name() }

// owed counts the calls that Close waits for: each Submit from its start
// until its done function has returned, each queued request until its
// outcome is delivered (for a Submit, until done has returned; for an
// EnqueueAndWait, until the call returns). idle is closed when the count
// reaches 0 once closing is set.
//
// A Submit counts itself before it reads closing, and Close sets closing
// before it reads the count: with Go's sequentially consistent atomics,
// either the Submit sees closing (and is rejected at once, without Close
// waiting for it) or Close sees its count; and the decrement that brings
// the count to 0 after Close read it non-zero sees closing.
type owed struct {
	n      atomic.Int64
	init   sync.Once // makes idle
	closed sync.Once // closes idle
	idle   chan struct{}
}

func (o *owed) ch() chan struct{} {
	o.init.Do(func() { o.idle = make(chan struct{}) })
	return o.idle
}

func (c *FlowController) enterOwed() { c.owed.n.Add(1) }

func (c *FlowController) leaveOwed() {
	if c.owed.n.Add(-1) == 0 && c.closing.Load() {
		c.owed.closed.Do(func() { close(c.owed.ch()) })
	}
}

// waitOwed waits until nothing is owed; closing is set. It panics rather
// than wait forever when its caller runs inside a Submit callback or the
// Observer while calls are owed: the call it runs inside may be one of
// them.
func (c *FlowController) waitOwed() {
	if c.owed.n.Load() == 0 {
		return
	}
	if calledBack() {
		panic("flowcontrol: Close called from a Submit callback or the Observer while outcomes are owed; " +
			"it would wait for the callback it runs in")
	}
	<-c.owed.ch()
}

// unlockBeside is unlock for the enqueue of w, whose own outcome goes to
// its caller in enqueue's results: *adm or *rej when it was decided at
// once, neither when w was queued (with generation *gen). Outcomes of
// other requests decided here are delivered first, and a Submit callback
// or the Observer among them may panic; w's own outcome is then not lost as
// the panic goes on (see salvage).
func (c *FlowController) unlockBeside(w *waiter, adm **Admission, rej **RejectionError, gen *uint64) {
	// Read now, under mu: once mu is released, a queued Submit's waiter
	// may be delivered and reused by another goroutine.
	done, waiting := w.done, w.done == nil && !w.withdrawn
	h := heard{tag: w.tag, size: w.size}
	delivered := false
	defer func() {
		if !delivered {
			c.salvage(w, done, waiting, *adm, *rej, *gen, h)
		}
	}()
	c.unlock()
	delivered = true
}

// salvage settles the own outcome of w's enqueue, whose caller gets a
// panic instead: a Submit's done is handed it (a queued Submit's waiter
// delivers it as usual); an EnqueueAndWait's admission is released, and
// its wait, when it queued (waiting), is given up. Called without mu.
func (c *FlowController) salvage(w *waiter, done func(*Admission, error), waiting bool, adm *Admission, rej *RejectionError, gen uint64, h heard) {
	switch {
	case adm != nil || rej != nil:
		if done != nil {
			c.hand(done, adm, rej, h)
		} else if adm != nil {
			adm.Done()
		}
	case waiting:
		// Only this call reuses an EnqueueAndWait's waiter.
		defer c.leaveOwed()
		c.cancelWait(w, gen, OutcomeRejectedContextCancelled, false)
	}
}

// cancelWait ends the wait of an EnqueueAndWait's queued w with outcome o,
// unless an event settled it first, and waits until its outcome is
// delivered. abandon delivers, on this goroutine, what it decides, and a
// Submit callback among that may panic; w's own outcome (a dispatch just
// before, say) is then given up before the panic goes on: its admission
// released, since its caller gets the panic.
func (c *FlowController) cancelWait(w *waiter, gen uint64, o Outcome, byContext bool) {
	settled := false
	defer func() {
		if !settled {
			<-w.ready
			if adm, _ := c.result(w); adm != nil {
				adm.Done()
			}
		}
	}()
	c.abandon(w, gen, o, byContext)
	// Whoever settled the outcome — abandon, or an event just before it —
	// signals ready as it delivers; w is reused only after that.
	<-w.ready
	settled = true
}

// park moves the outcomes decided in this critical section to the parked
// list, for the goroutine running a Submit callback to deliver. Called with
// mu held.
func (c *FlowController) park() {
	if c.decided == nil {
		return
	}
	if c.parkedTail == nil {
		c.parked = c.decided
	} else {
		c.parkedTail.links.Next = c.decided
	}
	c.parkedTail = c.decidedTail
	c.decided, c.decidedTail = nil, nil
}

// abandon ends a queued request that expired or was cancelled, unless it
// already left its queue (dispatched or shut down), in which case that
// earlier outcome stands. Once Close has begun, the outcome is shutdown.
//
// gen is w's generation when the caller was set up: a late call for an
// earlier use of w, which has moved on, does nothing.
func (c *FlowController) abandon(w *waiter, gen uint64, o Outcome, byContext bool) {
	c.mu.Lock()
	defer c.unlock()
	if w.gen != gen || !w.queued {
		return
	}
	if c.closing.Load() {
		o, byContext = OutcomeRejectedShuttingDown, false
	} else if o == OutcomeRejectedTTLExpired && c.noEndpointsNow() {
		o = OutcomeRejectedNoEndpoints // expired in the empty-pool regime
	}
	now := c.clock.Now()
	c.unqueue(w, now)
	w.byContext = byContext
	switch o {
	case OutcomeRejectedTTLExpired:
		// Its band did not drain fast enough to serve it in time: it may
		// come back at the band's next promised place, as a request the
		// band refuses would.
		w.retryAfter = w.band.drain.retryAfterExpiry(now, c.inFlightNow(), w.band.queued.requests, c.sinceEpoch(now)-w.enqueued)
	case OutcomeRejectedNoEndpoints:
		w.retryAfter = noEndpointsRetryAfter
	}
	c.decide(w, o, now)
	// The band may have been the one holding lower bands back.
	c.dispatchLocked(now)
}

// result turns a waiter's settled outcome into the admission or the
// rejection its caller receives.
func (c *FlowController) result(w *waiter) (*Admission, *RejectionError) {
	if w.outcome() == OutcomeDispatched {
		a := newUnlockedAdmission()
		*a = Admission{c: c, requested: w.requested, effective: w.band.priority, queueTime: w.queueTime, lease: w.lease}
		return a, nil
	}
	rej := &RejectionError{
		Outcome:    w.outcome(),
		Requested:  w.requested,
		Effective:  effectiveKey(w.requested, w.band),
		QueueTime:  w.queueTime,
		RetryAfter: w.retryAfter,
	}
	switch w.outcome() {
	case OutcomeRejectedSaturated:
		// A queued request is rejected-saturated only when makeRoom
		// displaced it: a capacity rejection never reaches a queue.
		rej.limit = limitDisplaced
	case OutcomeRejectedNoEndpoints:
		rej.limit = limitNoEndpoints
	}
	if w.byContext {
		rej.setContext(w.ctx, w.ctx.Err())
	}
	return nil, rej
}

// finish reports an outcome, and h, to the observer and returns it as
// EnqueueAndWait's results.
func (c *FlowController) finish(adm *Admission, rej *RejectionError, h heard) (*Admission, error) {
	if c.observer != nil {
		c.report(adm, rej, h)
	}
	if rej != nil {
		return nil, rej
	}
	return adm, nil
}

// report tells the observer, if any, of an EnqueueAndWait's outcome: adm
// for a dispatch, rej otherwise. If the observer panics on a dispatch, the
// admission is released before the panic goes on: the caller, which gets
// the panic, never receives it. Called without mu.
func (c *FlowController) report(adm *Admission, rej *RejectionError, h heard) {
	if c.observer == nil {
		return
	}
	if rej == nil {
		defer func() {
			if r := recover(); r != nil {
				adm.Done()
				panic(r)
			}
		}()
	}
	callObserver(c.observer, event(adm, rej, h))
}

// event is what the Observer hears of an outcome: adm for a dispatch, rej
// otherwise, and h.
func event(adm *Admission, rej *RejectionError, h heard) Event {
	ev := Event{Queued: h.queued, EnqueueTime: h.took, ByteSize: h.size, Tag: h.tag}
	if rej != nil {
		ev.Requested, ev.Effective, ev.Outcome, ev.QueueTime = rej.Requested, rej.Effective, rej.Outcome, rej.QueueTime
	} else {
		ev.Requested, ev.Effective, ev.Outcome, ev.QueueTime = adm.requested, adm.Effective(), OutcomeDispatched, adm.queueTime
	}
	return ev
}
