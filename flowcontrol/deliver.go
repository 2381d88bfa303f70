package flowcontrol

// unlock releases mu and then delivers the outcomes decided while it was
// held. Every critical section ends here, also when a panic unwinds it.
func (c *FlowController) unlock() {
	list := c.decided
	if list != nil {
		c.decided, c.decidedTail = nil, nil
	}
	c.mu.Unlock()
	if list != nil {
		c.deliverAll(list)
	}
}

// deliverAll delivers each waiter of list in order. A delivery that panics
// (a Submit callback or the Observer) does not strand the rest: they are
// delivered as the panic unwinds, and the panic goes on.
//
// Outcomes that a Submit callback's own Done settles were parked while it
// ran; deliver hands them back, and they are delivered here after the rest,
// in a loop, so a chain of callbacks that each call Done runs in constant
// stack depth.
func (c *FlowController) deliverAll(list *waiter) {
	defer func() {
		if list != nil {
			c.deliverAll(list)
		}
	}()
	tail := list
	for tail != nil && tail.next != nil {
		tail = tail.next
	}
	for list != nil {
		w := list
		list, w.next = w.next, nil
		if list == nil {
			tail = nil
		}
		more, moreTail := c.deliver(w)
		if more == nil {
			continue
		}
		if list == nil {
			list = more
		} else {
			tail.next = more
		}
		tail = moreTail
	}
}

// deliver hands w's settled outcome to its caller, and returns the outcomes
// parked while a Submit callback ran. Called without mu.
func (c *FlowController) deliver(w *waiter) (parked, parkedTail *waiter) {
	if w.withdrawn {
		return nil, nil
	}
	if w.stopCtx != nil {
		w.stopCtx()
	}
	if w.ready != nil {
		close(w.ready) // EnqueueAndWait finishes on its own goroutine
		return nil, nil
	}
	adm, rej := c.result(w)
	done := w.done
	recycle(w)
	if rej != nil {
		// The caller hears its outcome even if the Observer panics.
		defer done(nil, rej)
		c.report(nil, rej)
		return nil, nil
	}
	c.report(adm, nil) // on a panic, releases adm; done is not called
	// These two critical sections flip a flag and take the parked list;
	// they decide nothing, so there is nothing for unlock to deliver.
	c.mu.Lock()
	adm.inCallback = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		adm.inCallback = false
		parked, parkedTail = c.parked, c.parkedTail
		c.parked, c.parkedTail = nil, nil
		c.mu.Unlock()
	}()
	done(adm, nil)
	return nil, nil
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
		c.parkedTail.next = c.decided
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
	} else if o == OutcomeRejectedTTLExpired && c.endpoints != nil && c.endpoints.NoEndpoints() {
		o = OutcomeRejectedNoEndpoints // expired in the empty-pool regime
	}
	now := c.clock.Now()
	c.unqueue(w, now)
	w.byContext = byContext
	c.decide(w, o, now)
	// The band may have been the one holding lower bands back.
	c.dispatchLocked(now)
}

// result turns a waiter's settled outcome into the admission or the
// rejection its caller receives.
func (c *FlowController) result(w *waiter) (*Admission, *RejectionError) {
	if w.outcome == OutcomeDispatched {
		a := newQueuedAdmission()
		*a = Admission{c: c, requested: w.requested, effective: w.band.priority, queueTime: w.queueTime, meter: w.meter}
		return a, nil
	}
	rej := &RejectionError{
		Outcome:    w.outcome,
		Requested:  w.requested,
		Effective:  effectiveKey(w.requested, w.band),
		QueueTime:  w.queueTime,
		RetryAfter: w.retryAfter,
	}
	switch w.outcome {
	case OutcomeEvictedQueuePressure:
		rej.limit = limitDisplaced
	case OutcomeRejectedNoEndpoints:
		rej.limit = limitNoEndpoints
	}
	if w.byContext {
		rej.setContext(w.ctx, w.ctx.Err())
	}
	return nil, rej
}

// finish reports an outcome to the observer and returns it as
// EnqueueAndWait's results.
func (c *FlowController) finish(adm *Admission, rej *RejectionError) (*Admission, error) {
	if c.observer != nil {
		c.report(adm, rej)
	}
	if rej != nil {
		return nil, rej
	}
	return adm, nil
}

// report tells the observer, if any, of one outcome: adm for a dispatch,
// rej otherwise. If the observer panics on a dispatch, the admission is
// released before the panic goes on: nobody will receive it. Called without
// mu.
func (c *FlowController) report(adm *Admission, rej *RejectionError) {
	if c.observer == nil {
		return
	}
	if rej != nil {
		c.observer(Event{Requested: rej.Requested, Effective: rej.Effective, Outcome: rej.Outcome, QueueTime: rej.QueueTime})
		return
	}
	defer func() {
		if r := recover(); r != nil {
			adm.Done()
			panic(r)
		}
	}()
	c.observer(Event{Requested: adm.requested, Effective: adm.Effective(), Outcome: OutcomeDispatched, QueueTime: adm.queueTime})
}
