package gate

import (
	"fmt"
	"sync"
	"time"
)

// Serial runs a gate for a router that has no flow controller: it takes
// the lock the gate's methods need, calls them in the order the gate's
// contracts ask (Took after each granted slot for a [MeteredGate], Returned
// rather than Release at the end), and tells the router when the gate may
// admit more. Create one with [NewSerial]; its methods are safe for
// concurrent use.
//
// A router asks TryAcquire for each request it would start, calls
// FirstToken when the response's first token arrives, and Done when the
// request ends. When TryAcquire refuses, the router may wait on Changed
// for the gate's next nudge (fresh metrics, a slot given back) and ask
// again.
type Serial struct {
	mu      sync.Mutex
	gate    Gate
	metered MeteredGate    // gate, when it is one
	first   FirstTokenGate // gate, when it is one
	clock   Clock
	changed chan struct{} // closed at the next nudge; nil until Changed asks for one
}

// NewSerial returns a Serial running g on clock (nil for [RealClock]), and
// binds g to it when g is a [BoundGate]: the gate's error, such as a gate
// bound to a flow controller already, is returned. It panics if g is nil.
func NewSerial(g Gate, clock Clock) (*Serial, error) {
	if g == nil {
		panic("gate: NewSerial: nil gate")
	}
	if clock == nil {
		clock = RealClock{}
	}
	s := &Serial{gate: g, clock: clock}
	s.metered, _ = g.(MeteredGate)
	s.first, _ = g.(FirstTokenGate)
	if b, ok := g.(BoundGate); ok {
		if err := b.Bind(s); err != nil {
			return nil, fmt.Errorf("gate: NewSerial: %s: %w", nameOf(g), err)
		}
	}
	return s, nil
}

// Nudge wakes every caller waiting on Changed. The gate calls it when it
// may admit more; so does Done. With nobody waiting it costs a lock and no
// allocation.
func (s *Serial) Nudge() {
	s.mu.Lock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
}

// Priorities returns nil: a Serial has no bands, so a [Ceiling] ranks each
// priority as a lone band.
func (s *Serial) Priorities() []int { return nil }

// Changed returns a channel closed at the gate's next nudge, or the next
// Done: a refused request may then ask again.
func (s *Serial) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// TryAcquire asks the gate whether a request of band priority and cost
// (estimated tokens; below 1 counts as 1) may start now. When it may, the
// request holds a slot until its Start's Done.
func (s *Serial) TryAcquire(priority int, cost int64) (*Start, bool) {
	slot := Slot{Priority: priority, Cost: max(cost, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.gate.TryAcquire(priority) {
		return nil, false
	}
	if s.metered != nil {
		s.metered.Took(slot)
	}
	return &Start{s: s, slot: slot, at: s.clock.Now()}, true
}

// Saturation returns the gate's saturation, when it is a
// [SaturationDetector], read under the Serial's lock; 0 otherwise.
func (s *Serial) Saturation() float64 {
	d, ok := s.gate.(SaturationDetector)
	if !ok {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return d.Saturation()
}

// Start is one request that a [Serial]'s gate let start. Its methods are
// safe for concurrent use.
type Start struct {
	s          *Serial
	slot       Slot
	at         time.Time
	firstToken time.Duration
	heard      bool
	done       bool
}

// FirstToken reports the response's first token, now: a [FirstTokenGate]
// hears it at once, any [MeteredGate] at Done. Calls after the first, or
// after Done, do nothing.
func (st *Start) FirstToken() {
	s := st.s
	s.mu.Lock()
	if st.done || st.firstToken != 0 {
		s.mu.Unlock()
		return
	}
	st.firstToken = max(s.clock.Now().Sub(st.at), 1)
	if s.first != nil {
		s.first.FirstToken(st.slot, st.firstToken)
		st.heard = true
	}
	s.mu.Unlock()
	if st.heard {
		s.Nudge() // the gate may have learned a larger limit
	}
}

// Done gives the slot back: the request ended. ran is false when it never
// reached a model server, so that a gate that counts starts (such as
// [SaturationGate]) takes the start back. Calls after the first do
// nothing.
func (st *Start) Done(ran bool) {
	s := st.s
	s.mu.Lock()
	if st.done {
		s.mu.Unlock()
		return
	}
	st.done = true
	switch {
	case s.metered != nil:
		u := Usage{Slot: st.slot, Unused: !ran, Heard: st.heard}
		if ran {
			u.Held, u.FirstToken = s.clock.Now().Sub(st.at), st.firstToken
		}
		s.metered.Returned(u)
	default:
		s.gate.Release(st.slot.Priority)
	}
	s.mu.Unlock()
	s.Nudge()
}
