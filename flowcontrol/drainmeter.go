package flowcontrol

import "time"

// DrainMeter is the meter behind the controller's Retry-After, for a caller
// that follows a queue of its own: a simulation that compares ways of
// choosing Retry-After, or a router that keeps its own queues. It measures
// how fast a queue drains while it has waiters — dispatches from the queue
// per second of busy time — as the controller measures each band and all
// bands together.
//
// Only busy time counts: the meter's clock runs from [DrainMeter.Busy] to
// [DrainMeter.Idle] and stops in between, so an idle stretch neither lowers
// the rate nor inflates what is projected from it. A window closes at the
// first reading with at least one second of busy time in it; its rate moves
// a moving average whose time constant is five seconds of busy time (a
// window of length w moves it by the fraction 1-exp(-w/5s)); the first
// window's rate is taken as it is. A now earlier than the start of the
// busy stretch (a clock that stepped back) adds no busy time.
//
// The zero DrainMeter is idle and has measured nothing. It is not safe for
// concurrent use.
type DrainMeter struct{ m drainMeter }

// Busy records that the queue has waiters again at now: call it when the
// queue goes from empty to not empty.
func (d *DrainMeter) Busy(now time.Time) { d.m.busy(now) }

// Idle records that the queue emptied at now.
func (d *DrainMeter) Idle(now time.Time) { d.m.idle(now) }

// Dispatched counts one dispatch from the queue at now. Count a dispatch
// that empties the queue before its Idle, so that the window it closes
// includes it; a request that started without waiting is not counted.
func (d *DrainMeter) Dispatched(now time.Time) { d.m.dispatched(now) }

// Rate returns the average drain rate at now, in dispatches per second of
// busy time, and whether a window has closed; until one has, it is 0 and
// false.
func (d *DrainMeter) Rate(now time.Time) (perSecond float64, measured bool) {
	d.m.roll(now)
	return d.m.avg, d.m.measured
}
