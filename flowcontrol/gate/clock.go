package gate

import "time"

// Clock is a source of time: a flow controller and the gates that read
// time share one, so that the same controller and gates run on simulated
// time (Clock is this type).
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc arranges for f to be called once, on a goroutine of the
	// clock's choosing, when d has passed on this clock, unless the
	// returned Timer is stopped first. A controller calls it with its
	// lock held: AfterFunc must not call f itself, block, or call back
	// into the controller.
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
