package gate

import (
	"fmt"
	"time"
)

// All returns a gate that admits a request only when every one of gates
// does: a saturation gate AND a token budget, say. It asks them in order
// and stops at the first refusal, handing the slots the earlier ones
// granted back with Release, so a refused offer leaves every gate as it
// was. Like every gate it answers only for the head the controller offers,
// so strict priority across bands is unchanged: when any gate refuses the
// highest waiting band, nothing below it starts.
//
// The gate All returns is a [MeteredGate], so that it can tell
// a slot handed back unused from an admission that ended: it forwards Took
// and Returned to the metered gates among gates, and gives the others
// their slot back with Release when an admission ends. It is also a
// [BoundGate], binding each of gates that is one (the first
// error fails the controller's New), and a [EndpointGate]
// that reports no endpoints when any of gates does; a
// [SaturationDetector] whose saturation is the largest of
// those of gates that are one (0 when none is); a [LagGate]
// whose lag is the longest of theirs (0 when none lags); a
// [PreemptingGate] that reports true when one of gates does and every
// other one does too or is an [EndpointsGate]; and, when one of gates is a
// [FirstTokenGate], one too, telling each such gate.
//
// All panics, naming the index, if one of gates is nil. With no gates it
// admits every request. A gate that panics in TryAcquire leaves the slots
// of the gates before it handed back. Pass [MaxInFlight] inside
// All to one controller only: New cannot see it there to check.
func All(gates ...Gate) Gate {
	for i, g := range gates {
		if g == nil {
			panic(fmt.Sprintf("gate: All: gates[%d] is nil", i))
		}
	}
	a := newAll(gates)
	if len(a.firstTokens) > 0 {
		// Only then: hearing first tokens costs the controller a lock each.
		return allFirstToken{a}
	}
	return a
}

// newAll returns the All of gates, none of them nil, whatever optional
// interfaces they have: [Ceiling] builds on it too.
func newAll(gates []Gate) *allGate {
	a := &allGate{children: make([]child, len(gates))}
	for i, g := range gates {
		c := &a.children[i]
		c.gate = g
		c.metered, _ = g.(MeteredGate)
		c.detector, _ = g.(SaturationDetector)
		c.saturation, _ = g.(*SaturationGate)
		c.concurrency, _ = g.(*ConcurrencyGate)
		if e, ok := g.(EndpointGate); ok {
			a.endpoints = append(a.endpoints, e)
		}
		if f, ok := g.(FirstTokenGate); ok {
			a.firstTokens = append(a.firstTokens, f)
		}
	}
	return a
}

// ServersPreempt reports whether one of the gates is a [PreemptingGate]
// that reports true and every other one is too, or an [EndpointsGate],
// which refuses only while no endpoint exists: then no gate refuses a
// higher band where a revocation would start it.
func (a *allGate) ServersPreempt() bool {
	some := false
	for _, c := range a.children {
		switch g := c.gate.(type) {
		case *EndpointsGate:
		case PreemptingGate:
			if !g.ServersPreempt() {
				return false
			}
			some = true
		default:
			return false
		}
	}
	return some
}

// allFirstToken is an All with a FirstTokenGate among its gates.
type allFirstToken struct{ *allGate }

// FirstToken tells each FirstTokenGate among the gates.
func (a allFirstToken) FirstToken(s Slot, d time.Duration) {
	for _, f := range a.firstTokens {
		f.FirstToken(s, d)
	}
}

type allGate struct {
	children    []child
	endpoints   []EndpointGate
	firstTokens []FirstTokenGate
}

// child is one gate of an All. The gates of this package are called
// directly rather than through the interface, which halves All's own cost.
type child struct {
	gate        Gate
	metered     MeteredGate        // gate, when it is metered
	detector    SaturationDetector // gate, when it reports its saturation
	saturation  *SaturationGate    // gate, when it is one
	concurrency *ConcurrencyGate   // gate, when it is one
}

func (c *child) tryAcquire(priority int) bool {
	switch {
	case c.concurrency != nil:
		return c.concurrency.TryAcquire(priority)
	case c.saturation != nil:
		return c.saturation.TryAcquire(priority)
	}
	return c.gate.TryAcquire(priority)
}

// unwind hands back a slot the gate granted before a later gate refused:
// unused, and with no Took.
func (c *child) unwind(priority int) {
	switch {
	case c.concurrency != nil:
		c.concurrency.Release(priority) // no cost was counted
	case c.saturation != nil:
		c.saturation.Returned(Usage{Slot: Slot{Priority: priority}, Unused: true})
	case c.metered != nil:
		c.metered.Returned(Usage{Slot: Slot{Priority: priority}, Unused: true})
	default:
		c.gate.Release(priority)
	}
}

// load is the gate's saturation, read as 1 when it is not a number
// in [0, 1] (NaN included), or 0 when the gate reports none.
func (c *child) load() float64 {
	s, _ := c.read()
	return s
}

// read is load, and whether the gate's saturation was a number in
// [0, 1] (or it reports none).
func (c *child) read() (float64, bool) {
	var s float64
	switch {
	case c.concurrency != nil:
		s = c.concurrency.Saturation()
	case c.saturation != nil:
		s = c.saturation.Saturation()
	case c.detector != nil:
		s = c.detector.Saturation()
	default:
		return 0, true
	}
	if !(s >= 0 && s <= 1) {
		return 1, false // fail closed
	}
	return s, true
}

func (a *allGate) TryAcquire(priority int) (ok bool) {
	n := 0 // the gates that granted a slot
	defer func() {
		if !ok { // refused, or a gate panicked
			for j := n - 1; j >= 0; j-- {
				a.children[j].unwind(priority)
			}
		}
	}()
	for i := range a.children {
		if !a.children[i].tryAcquire(priority) {
			return false
		}
		n++
	}
	return true
}

// Release gives every gate its slot back: the request ended, with nothing
// more to tell.
func (a *allGate) Release(priority int) {
	for i := range a.children {
		a.children[i].gate.Release(priority)
	}
}

func (a *allGate) Took(s Slot) {
	for i := range a.children {
		switch c := &a.children[i]; {
		case c.concurrency != nil:
			c.concurrency.Took(s)
		case c.saturation != nil:
			// Took does nothing.
		case c.metered != nil:
			c.metered.Took(s)
		}
	}
}

func (a *allGate) Returned(u Usage) {
	for i := range a.children {
		switch c := &a.children[i]; {
		case c.concurrency != nil:
			c.concurrency.Returned(u)
		case c.saturation != nil:
			c.saturation.Returned(u)
		case c.metered != nil:
			c.metered.Returned(u)
		default:
			c.gate.Release(u.Priority)
		}
	}
}

// Bind binds each of the gates that is a BoundGate, in order. When one
// refuses, the gates of this package bound before it are unbound again.
func (a *allGate) Bind(c Controller) error {
	for i := range a.children {
		if b, ok := a.children[i].gate.(BoundGate); ok {
			if err := b.Bind(c); err != nil {
				a.unbindFirst(i, c)
				return fmt.Errorf("gate: All: gates[%d]: %w", i, err)
			}
		}
	}
	return nil
}

// unbindFirst undoes the Bind of c by the first n gates, where they can.
func (a *allGate) unbindFirst(n int, c Controller) {
	for j := range n {
		unbind(a.children[j].gate, c)
	}
}

func (a *allGate) unbind(c Controller) { a.unbindFirst(len(a.children), c) }

func (a *allGate) NoEndpoints() bool {
	for _, e := range a.endpoints {
		if e.NoEndpoints() {
			return true
		}
	}
	return false
}

// Lag returns the longest [LagGate.Lag] of the gates, 0 when
// none lags: how long a slot given back may go unseen by one of them.
func (a *allGate) Lag() time.Duration {
	var d time.Duration
	for i := range a.children {
		if l, ok := a.children[i].gate.(LagGate); ok {
			d = max(d, l.Lag())
		}
	}
	return d
}

// Saturation returns the largest saturation of the gates, each read as 1
// when it is not a number in [0, 1]; 0 when none reports one.
func (a *allGate) Saturation() float64 {
	s := 0.0
	for i := range a.children {
		s = max(s, a.children[i].load())
	}
	return s
}
