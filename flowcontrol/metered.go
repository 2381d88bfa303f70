package flowcontrol

import (
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// metering is the controller's side of a [gate.MeteredGate]: the gate
// hears the cost of the request each slot carries (Took) and how each
// admission used it (Returned, instead of Release), and a
// [gate.FirstTokenGate] each first token as it is reported.
// FlowController.meter is nil when the gate is not metered.
type metering struct {
	gate        gate.MeteredGate
	firstTokens gate.FirstTokenGate // gate, when it is one
}

// metered is what a metered gate hears of one admission: part of its
// lease.
type metered struct {
	cost  int64         // the request's cost, within [1, MaxRequestCost]
	start time.Duration // dispatch, as time since the controller's epoch
	// firstToken is the time from start to the first token, once
	// FirstToken reported it; 0 before.
	firstToken atomic.Int64
	// heard is set, under the controller's lock, once a FirstTokenGate
	// was told of the first token.
	heard bool
}

// newMetering returns the metering of gate g, or nil when g is not
// metered.
func newMetering(g gate.Gate) *metering {
	mg, ok := g.(gate.MeteredGate)
	if !ok {
		return nil
	}
	m := &metering{gate: mg}
	m.firstTokens, _ = g.(gate.FirstTokenGate)
	return m
}

// took tells the gate that the request of band b and cost, dispatched at
// now (the zero Time to read the clock), took the slot it granted, and
// starts l's clock. Called with mu held.
func (m *metering) took(c *FlowController, l *lease, b *band, cost int64, now time.Time) {
	l.cost, l.start = cost, c.sinceEpoch(now)
	m.gate.Took(gate.Slot{Priority: b.priority, Cost: cost})
}

// returned gives the gate back the slot of the admission of lease l and
// band priority, which ended, with its usage. Called with mu held.
func (m *metering) returned(c *FlowController, l *lease, priority int) {
	m.gate.Returned(gate.Usage{
		Slot:       gate.Slot{Priority: priority, Cost: l.cost},
		Held:       c.sinceEpoch(time.Time{}) - l.start,
		FirstToken: time.Duration(l.firstToken.Load()),
		Heard:      l.heard,
	})
}

// unused gives the gate back the slot of lease l and band priority, which
// no request used: its caller panicked out of the enqueue that dispatched
// it. Called with mu held.
func (m *metering) unused(l *lease, priority int) {
	m.gate.Returned(gate.Usage{Slot: gate.Slot{Priority: priority, Cost: l.cost}, Unused: true})
}

// firstToken records a's first token: see Admission.FirstToken.
func (m *metering) firstToken(a *Admission) {
	l := a.lease
	if l == nil || l.firstToken.Load() != 0 {
		return
	}
	d := max(a.c.sinceEpoch(time.Time{})-l.start, 1)
	if l.firstToken.CompareAndSwap(0, int64(d)) && m.firstTokens != nil {
		m.hear(a, d)
	}
}

// hear tells the gate, a FirstTokenGate, of a's first token d after
// dispatch, unless a has already ended, and runs dispatch: the gate may
// admit more.
func (m *metering) hear(a *Admission, d time.Duration) {
	c := a.c
	c.mu.Lock()
	defer c.unlock()
	if a.done.Load() {
		return // Returned had it, as Usage.FirstToken
	}
	a.lease.heard = true
	m.firstTokens.FirstToken(gate.Slot{Priority: a.effective, Cost: a.lease.cost}, d)
	c.dispatchLocked(time.Time{})
}
