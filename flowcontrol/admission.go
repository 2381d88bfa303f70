package flowcontrol

import (
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
	// meter is what a MeteredGate hears of this admission; nil unless the
	// controller's gate is one, so that the common admission stays small.
	meter *meter
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

// FirstToken records that the first token of the response has reached the
// router (for HTTP, the first byte of the response body). The time since
// dispatch is what a [MeteredGate] hears as [Usage.FirstToken] when Done
// returns the slot — the latency an adaptive gate learns its limit from —
// and what a [FirstTokenGate] hears at once.
// Only the first call counts; a call after Done is ignored. It reads the
// clock only when the controller's gate is a MeteredGate, and is safe to
// call from any goroutine.
func (a *Admission) FirstToken() {
	m := a.meter
	if m == nil || m.firstToken.Load() != 0 {
		return
	}
	d := max(a.c.sinceEpoch(time.Time{})-m.start, 1)
	if m.firstToken.CompareAndSwap(0, int64(d)) && a.c.firstTokens != nil {
		a.c.heardFirstToken(a, d)
	}
}

// meter is the part of an Admission that only a MeteredGate needs.
type meter struct {
	cost  int64         // the request's cost, at least 1
	start time.Duration // dispatch, as time since the controller's epoch
	// firstToken is the time from start to the first token, once
	// FirstToken reported it; 0 before.
	firstToken atomic.Int64
	// heard is set, under the controller's lock, once a FirstTokenGate
	// was told of the first token.
	heard bool
}

// Done releases the request's gate slot and lets the next waiting request
// start. Only the first call has an effect; Done is safe to call from any
// goroutine, also after the controller was closed.
func (a *Admission) Done() { a.c.release(a) }
