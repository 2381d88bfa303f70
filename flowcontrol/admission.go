package flowcontrol

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Admission is the right of one dispatched request to run. It is returned
// by [FlowController.EnqueueAndWait] only; the caller must call Done when the
// request has finished, to return its gate slot.
type Admission struct {
	c         *FlowController
	requested FlowKey
	effective int // the priority of the band that dispatched the request
	queueTime time.Duration
	// lease is what a MeteredGate hears of this admission, and its
	// revocation; nil unless the controller needs either, so that the
	// common admission stays small.
	lease *lease
	// done is set by the first Done. It is atomic for the admissions that
	// end without c.mu (see releaseFast); the others set it under c.mu.
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
// dispatch is what a [gate.MeteredGate] hears as [gate.Usage.FirstToken] when Done
// returns the slot — the latency an adaptive gate learns its limit from —
// and what a [gate.FirstTokenGate] hears at once.
// Only the first call counts; a call after Done is ignored. It reads the
// clock only when the controller's gate is a MeteredGate, and is safe to
// call from any goroutine.
func (a *Admission) FirstToken() {
	m := a.lease
	if m == nil || m.firstToken.Load() != 0 {
		return
	}
	d := max(a.c.sinceEpoch(time.Time{})-m.start, 1)
	if m.firstToken.CompareAndSwap(0, int64(d)) && a.c.firstTokens != nil {
		a.c.heardFirstToken(a, d)
	}
}

// lease is the part of an Admission that the common one does without:
// what a MeteredGate hears of it, and, when the controller may revoke it
// (see Eviction and BandConfig.Guarantee), its place among its band's
// admissions and its revocation. An admission has one only when its
// controller needs either; leases come in slabs, as Admissions do.
type lease struct {
	cost  int64         // the request's cost, within [1, MaxRequestCost]
	start time.Duration // dispatch, as time since the controller's epoch
	// firstToken is the time from start to the first token, once
	// FirstToken reported it; 0 before.
	firstToken atomic.Int64
	// heard is set, under the controller's lock, once a FirstTokenGate
	// was told of the first token.
	heard bool

	// The rest is set when the admission may be revoked, and guarded by
	// the controller's lock.
	state       leaseState
	band        *band  // the band that dispatched it; nil when it cannot be revoked
	prev, next  *lease // in its band's running list, then in the outstanding revocations
	requested   FlowKey
	tag         any
	reason      Outcome       // an evicted outcome once revoked; OutcomeDispatched before
	forPriority int           // the band it was revoked for
	revokedAt   time.Duration // since the epoch
	retryAfter  time.Duration
	credit      float64       // its footprint at the decision, in saturation units
	ch          chan struct{} // closed on revocation; made by Revoked
	// What Config.Revocations hears, delivered after the lock is released:
	// each lease is listed once issued and once ended, through its own link.
	issuedNext, endedNext *lease
	target, pendingIssued float64
	pendingEnded          float64
	endStep               RevocationStep
	waited                time.Duration
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

// newAdmission returns an unused, zero Admission. Called with mu held.
func (c *FlowController) newAdmission() *Admission {
	if len(c.slab) == 0 {
		c.slab = make([]Admission, admissionsPerSlab)
	}
	a := &c.slab[0]
	c.slab = c.slab[1:]
	return a
}

// admissionBatch is a slab of Admissions for the admissions made outside
// the lock — of the requests that waited, as their outcome is delivered, in
// the goroutine of whoever delivers it, and of those that start without it
// (see startFast) — so the slab is taken from a sync.Pool, which keeps one
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
	if c.slots != nil {
		c.releaseFast(a)
		return
	}
	c.mu.Lock()
	defer c.unlock()
	if a.done.Load() {
		return
	}
	a.done.Store(true)
	c.inFlight--
	if l := a.lease.tracked(); l != nil {
		c.endLease(l)
	}
	if a.inCallback {
		defer c.park()
	}
	defer c.dispatchLocked(time.Time{})
	if c.metered != nil {
		m := a.lease
		u := gate.Usage{
			Slot:       gate.Slot{Priority: a.effective, Cost: m.cost},
			Held:       c.sinceEpoch(time.Time{}) - m.start,
			FirstToken: time.Duration(m.firstToken.Load()),
			Heard:      m.heard,
		}
		c.metered.Returned(u)
		return
	}
	c.gate.Release(a.effective)
}

// releaseFast is release for a controller whose gate counts its slots
// (see FlowController.slots): the slot goes back without mu, which is
// taken only if a request waits, or is being queued, for the dispatch.
//
// The slot is given back before slow is read, and an enqueue sets slow
// before it asks the gate: with Go's sequentially consistent
// atomics, either this Done sees the enqueue and dispatches for it under
// mu (which the enqueue holds until its request is queued), or the enqueue
// sees the free slot.
func (c *FlowController) releaseFast(a *Admission) {
	if !a.done.CompareAndSwap(false, true) {
		return
	}
	c.slots.Give()
	if c.slow.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.unlock()
	if a.inCallback {
		defer c.park()
	}
	c.dispatchLocked(time.Time{})
}

// heardFirstToken tells the gate, a FirstTokenGate, of a's first token d
// after dispatch, unless a has already ended, and runs dispatch: the gate
// may admit more.
func (c *FlowController) heardFirstToken(a *Admission, d time.Duration) {
	c.mu.Lock()
	defer c.unlock()
	if a.done.Load() {
		return // Returned had it, as Usage.FirstToken
	}
	a.lease.heard = true
	c.firstTokens.FirstToken(gate.Slot{Priority: a.effective, Cost: a.lease.cost}, d)
	c.dispatchLocked(time.Time{})
}

// started books a request of band b, key and tag, that has just taken the
// slot the gate granted (the caller counts it in inFlight), and returns its
// lease, or nil when it needs none:
// a MeteredGate hears its cost, its clock started, and a band the
// controller may revoke lists it among its running admissions. now is the
// time of the event, or the zero Time to read the clock. Called with mu
// held.
func (c *FlowController) started(b *band, key FlowKey, tag any, cost int64, now time.Time) *lease {
	if c.metered == nil && c.reclaim == nil {
		return nil // the common admission: inlined
	}
	return c.startLease(b, key, tag, cost, now)
}

// startLease is started for a controller whose admissions may need a
// lease.
func (c *FlowController) startLease(b *band, key FlowKey, tag any, cost int64, now time.Time) *lease {
	track := c.reclaim != nil && c.reclaim.tracks(b)
	if c.metered == nil && !track {
		return nil
	}
	if len(c.leases) == 0 {
		c.leases = make([]lease, admissionsPerSlab)
	}
	l := &c.leases[0]
	c.leases = c.leases[1:]
	if track {
		l.band, l.requested, l.tag = b, key, tag
		b.running.push(l)
	}
	if c.metered != nil {
		l.cost, l.start = cost, c.sinceEpoch(now)
		c.metered.Took(gate.Slot{Priority: b.priority, Cost: cost})
	}
	return l
}

// sinceEpoch returns now, or the clock's reading when now is the zero
// Time, as time since the controller's epoch: admissions keep their start
// in 8 bytes rather than a Time's 24.
func (c *FlowController) sinceEpoch(now time.Time) time.Duration {
	if now.IsZero() {
		now = c.clock.Now()
	}
	return now.Sub(c.epoch)
}
