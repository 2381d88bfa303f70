package flowcontrol

import (
	"sync"
	"sync/atomic"
	"time"
)

// Admission is the right of one dispatched request to run. It is returned
// by [FlowController.EnqueueAndWait] only; the caller must call Done when the
// request has finished, to return its gate slot.
type Admission struct {
	c         *FlowController
	requested FlowKey
	effective int // the priority of the band that dispatched the request
	queueTime time.Duration
	// lease is what a metered gate hears of this admission, and its
	// revocation; nil unless the controller needs either, so that the
	// common admission stays small and carries neither.
	lease *lease
	// done is set by the first Done. It is atomic for the admissions that
	// end without c.mu (see lockFree.release); the others set it under c.mu.
	done atomic.Bool
	// inCallback is set while its Submit callback runs; guarded by c.mu.
	inCallback bool
}

// Requested returns the flow key the request asked for.
func (a *Admission) Requested() FlowKey { return a.requested }

// Effective returns the flow key under which the request was admitted: the
// requested ID with the priority of the band that dispatched it. It differs
// from Requested when the requested band was not provisioned at enqueue
// time, and it never changes afterwards, whatever is provisioned later.
func (a *Admission) Effective() FlowKey {
	return FlowKey{ID: a.requested.ID, Priority: a.effective}
}

// QueueTime returns how long the request waited in its band; 0 when it was
// dispatched at once.
func (a *Admission) QueueTime() time.Duration { return a.queueTime }

// FirstToken records that the first token of the response has reached the
// router (for HTTP, the first byte of the response body). The time since
// dispatch is what a [gate.MeteredGate] hears as [gate.Usage.FirstToken]
// when Done returns the slot — the latency an adaptive gate learns its
// limit from — and what a [gate.FirstTokenGate] hears at once. With
// [Config.Eviction], an admission that has reported its first token is
// revoked for a deadline only after those that have not (see [Eviction]).
// Only the first call counts; a call after Done is ignored. It reads the
// clock only when the controller's gate is a MeteredGate, and is safe to
// call from any goroutine.
func (a *Admission) FirstToken() {
	if m := a.c.meter; m != nil {
		m.firstToken(a)
	} else if l := a.lease; l != nil {
		l.firstToken.CompareAndSwap(0, 1) // output; its time is nobody's
	}
}

// Done releases the request's gate slot and lets the next waiting request
// start. Only the first call has an effect; Done is safe to call from any
// goroutine, also after the controller was closed.
func (a *Admission) Done() { a.c.release(a) }

// admissionsPerSlab is how many Admissions one allocation provides.
// Allocating them one by one costs more than the rest of an immediate
// admission; a slab divides that cost by its size. Each Admission is still
// used for one request only. The price is memory: an Admission kept alive
// keeps its whole slab (2 KB) alive. 31 fill a 2,048-byte allocation, the
// malloc header included (TestAdmissionSlabsFitTheirSizeClass).
const admissionsPerSlab = 31

// admissionBatch is a slab of Admissions for the admissions made outside
// the lock — of the requests that waited, as their outcome is delivered, in
// the goroutine of whoever delivers it, and of those that start without it
// (see lockFree.start) — so the slab is taken from a sync.Pool, which keeps one
// per processor.
type admissionBatch struct {
	used int
	a    [admissionsPerSlab]Admission
}

var admissionBatches = sync.Pool{New: func() any { return new(admissionBatch) }}

// newUnlockedAdmission returns an unused, zero Admission, without the lock.
func newUnlockedAdmission() *Admission {
	s := admissionBatches.Get().(*admissionBatch)
	a := &s.a[s.used]
	if s.used++; s.used < len(s.a) {
		admissionBatches.Put(s)
	}
	return a
}

// release ends admission a, unless it already ended: it returns the gate
// slot and dispatches whatever that lets start.
//
// When a's Submit callback is still running (it called Done from inside),
// the outcomes the freed slot settles are parked for that callback's
// goroutine to deliver once it returns. The dispatch runs even if the gate's
// Release panics.
func (c *FlowController) release(a *Admission) {
	if c.fast != nil {
		c.fast.release(c, a)
		return
	}
	c.mu.Lock()
	defer c.unlock()
	if a.done.Load() {
		return
	}
	a.done.Store(true)
	c.inFlight--
	if a.inCallback {
		defer c.park()
	}
	defer c.dispatchLocked(time.Time{})
	c.giveBack(a.lease, a.effective)
}

// sinceEpoch returns now, or the clock's reading when now is the zero
// Time, as time since the controller's epoch: admissions keep their start
// in 8 bytes rather than a Time's 24.
func (c *FlowController) sinceEpoch(now time.Time) time.Duration {
	if now.IsZero() {
		now = c.clock.Now()
	}
	return now.Sub(c.clock.epoch)
}
