package flowcontrol

import (
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
	// Guarded by c.mu.
	done       bool
	inCallback bool // its Submit callback is running
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

// Done releases the request's gate slot and lets the next waiting request
// start. Only the first call has an effect; Done is safe to call from any
// goroutine, also after the controller was closed.
func (a *Admission) Done() { a.c.release(a) }
