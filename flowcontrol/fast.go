package flowcontrol

import (
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// lockFree is the lock-free path: while nothing waits, a request starts,
// and an admission ends, without the controller's lock. It exists when the
// gate is a [gate.CountGate] — it decides by its count alone — and nothing
// else must hear each admission (no metered gate, no endpoints to watch, no
// revocation); FlowController.fast is nil otherwise.
//
// The gate's count is then the count of admissions in flight. slow is set
// while a request is queued in any band, or being queued under mu, and
// clear only under mu with nothing queued: while it is clear nothing waits,
// so a request may take a slot, and an admission give its slot back,
// without mu.
type lockFree struct {
	slots *gate.Count
	slow  atomic.Int32
}

// newLockFree returns the lock-free path of c, or nil when c's gate or
// features rule it out. It makes the gate's count atomic: New calls it
// last, once nothing can fail.
func newLockFree(c *FlowController) *lockFree {
	g, ok := c.gate.Gate.(gate.CountGate)
	if !ok || c.meter != nil || c.noEndpoints != nil || c.reclaim != nil {
		return nil
	}
	return &lockFree{slots: g.Count()}
}

// start starts a request of band b, key, size and cost at once without
// taking mu, when nothing waits: then every band and flow is empty, so the
// request fits when it is no larger than an empty band and controller
// hold, it is the first in line, and the gate decides by its count alone.
// It returns nil when any of that fails, or Close has begun, and the
// locked path decides.
//
// A slot taken just as a request is queued elsewhere goes to this request
// first, as it would had this one taken mu first; no request waits with a
// slot free (see release).
func (f *lockFree) start(c *FlowController, b *band, key FlowKey, size, cost int64) *Admission {
	if f.slow.Load() != 0 {
		return nil
	}
	return f.startNow(c, b, key, size, cost)
}

func (f *lockFree) startNow(c *FlowController, b *band, key FlowKey, size, cost int64) *Admission {
	if !b.limits.Load().empty.fits(size, cost) || !c.empty.fits(size, cost) || !f.slots.TryTake() {
		return nil
	}
	if c.closing.Load() {
		// Close began after admit looked: shutdown wins, as under mu.
		f.slots.Give()
		return nil
	}
	a := newUnlockedAdmission()
	a.c, a.requested, a.effective = c, key, b.priority
	return a
}

// queuing marks that a request is being queued, before the gate is asked
// for it: see release. Stored only as it turns, so that under a backlog
// the flag is read, not written. Called with mu held.
func (f *lockFree) queuing() {
	if f.slow.Load() == 0 {
		f.slow.Store(1)
	}
}

// idle clears the mark once queued, the requests queued in all bands, is
// 0. Called with mu held.
func (f *lockFree) idle(queued int64) {
	if queued == 0 {
		f.slow.Store(0)
	}
}

// release ends admission a without mu, which is taken only if a request
// waits, or is being queued, for the dispatch.
//
// The slot is given back before slow is read, and an enqueue sets slow
// before it asks the gate: with Go's sequentially consistent atomics,
// either this Done sees the enqueue and dispatches for it under mu (which
// the enqueue holds until its request is queued), or the enqueue sees the
// free slot.
func (f *lockFree) release(c *FlowController, a *Admission) {
	if !a.done.CompareAndSwap(false, true) {
		return
	}
	f.slots.Give()
	if f.slow.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.unlock()
	if a.inCallback {
		defer c.park()
	}
	c.dispatchLocked(time.Time{})
}
