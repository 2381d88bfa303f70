package flowcontrol

import "github.com/sluicegate/sluice/flowcontrol/gate"

// Clock is the controller's only source of time: every queue time, TTL,
// expiry and dispatch-rate measurement reads it. [Config.Clock] is nil for
// the real clock; a simulation passes a virtual one, so the same controller
// runs on simulated time. It is [gate.Clock], so that a controller and the
// gates that read time share one clock.
//
// Contexts stay real. A context's deadline is an instant that the controller
// compares with Now, so it means the same on a virtual clock only when it was
// set on that clock's time line; and a context's cancellation (its deadline
// included) arrives when the context itself says so, in real time. A
// simulation on a virtual clock should pass contexts without deadlines and
// give requests a TTL instead.
type Clock = gate.Clock

// Timer is a pending call of a [Clock]'s AfterFunc: [gate.Timer].
type Timer = gate.Timer

// RealClock is the real clock, [gate.RealClock]: [time.Now] and
// [time.AfterFunc]. It is the Clock of a controller configured without
// one; its zero value is ready to use.
type RealClock = gate.RealClock
