package flowcontrol

import (
	"sync/atomic"
)

// Gate decides whether one more request may start. The controller asks its
// gate for the head of the highest waiting band only; a refusal stops
// dispatch until the next event (a Done, an enqueue, an expiry or
// cancellation, or [FlowController.Nudge]).
//
// The controller calls both methods with its lock held, so they must be fast,
// must not block, must not panic and must not call back into the controller.
// A gate whose state changes for reasons the controller cannot see (a
// backend's load, a token bucket refilling) must be followed by a call to
// Nudge when it may admit more.
type Gate interface {
	// TryAcquire reports whether one more request of band priority may
	// start now, and if so takes a slot for it.
	TryAcquire(priority int) bool
	// Release returns the slot taken for a request of band priority when
	// that request's admission is done.
	Release(priority int)
}

// MaxInFlight returns a gate that lets at most n requests, of any band, be
// in flight (dispatched and not yet Done) at once. MaxInFlight(0) admits
// nothing. A negative n is a configuration error: [New] refuses the gate,
// naming it.
//
// The gate belongs to the one controller it is configured in: it keeps a
// plain count, guarded by that controller's lock, and [New] refuses a
// MaxInFlight gate that another controller already uses.
func MaxInFlight(n int) Gate {
	return &maxInFlight{limit: n}
}

type maxInFlight struct {
	limit    int
	inFlight int                            // guarded by the owner's lock
	owner    atomic.Pointer[FlowController] // claimed once by New
}

func (g *maxInFlight) TryAcquire(int) bool {
	if g.inFlight >= g.limit {
		return false
	}
	g.inFlight++
	return true
}

func (g *maxInFlight) Release(int) {
	if g.inFlight--; g.inFlight < 0 {
		panic("flowcontrol: MaxInFlight gate released more slots than it granted")
	}
}

// openGate is the gate of a controller configured without one.
type openGate struct{}

func (openGate) TryAcquire(int) bool { return true }
func (openGate) Release(int)         {}
