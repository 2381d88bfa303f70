package flowcontrol

import "time"

// Clock is the controller's only source of time: every queue time, TTL,
// expiry and dispatch-rate measurement reads it. [Config.Clock] is nil for
// the real clock; a simulation passes a virtual one, so the same controller
// runs on simulated time.
//
// Contexts stay real. A context's deadline is an instant that the controller
// compares with Now, so it means the same on a virtual clock only when it was
// set on that clock's time line; and a context's cancellation (its deadline
// included) arrives when the context itself says so, in real time. A
// simulation on a virtual clock should pass contexts without deadlines and
// give requests a TTL instead.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc arranges for f to be called once, on a goroutine of the
	// clock's choosing, when d has passed on this clock, unless the
	// returned Timer is stopped first. The controller calls it with its
	// lock held: AfterFunc must not call f itself, block, or call back into
	// the controller.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call of a [Clock.AfterFunc].
type Timer interface {
	// Stop prevents the call if it has not started and reports whether it
	// did so.
	Stop() bool
}

// RealClock is the real clock: [time.Now] and [time.AfterFunc]. It is the
// Clock of a controller, or of a gate, configured without one; its zero
// value is ready to use.
type RealClock struct{}

// Now returns [time.Now].
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc calls [time.AfterFunc].
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
