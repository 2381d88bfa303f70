package sim

import (
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/dheap"
)

// Clock is a virtual clock and the event queue that moves it. It satisfies
// [flowcontrol.Clock]: a controller configured with it reads the simulated
// time and sets its timers on it.
//
// Time moves only in [Clock.Run], which takes the earliest pending event,
// sets the clock to its instant and calls it. Events at the same instant run
// in the order they were scheduled, so a run is a function of its inputs.
//
// A Clock is not safe for concurrent use: a simulation runs on one
// goroutine, and every callback (the controller's timers included) runs on
// the goroutine that called Run.
type Clock struct {
	epoch  time.Time
	now    time.Duration // since epoch
	seq    uint64        // scheduling order, the tie-break of equal instants
	events *dheap.Heap[eventKey, func()]
}

// eventKey orders events by instant, then by scheduling order.
type eventKey struct {
	at  time.Duration
	seq uint64
}

func (a eventKey) before(b eventKey) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// NewClock returns a clock that reads epoch and has nothing scheduled.
func NewClock(epoch time.Time) *Clock {
	return &Clock{
		epoch: epoch,
		// Instants are never negative, so the instant itself is a
		// monotone prefix and most comparisons are one integer compare.
		events: dheap.NewPrefixed[eventKey, func()](eventKey.before, func(k eventKey) uint64 { return uint64(k.at) }),
	}
}

// Now returns the current virtual time.
func (c *Clock) Now() time.Time { return c.epoch.Add(c.now) }

// Elapsed returns the virtual time since the epoch.
func (c *Clock) Elapsed() time.Duration { return c.now }

// Epoch returns the instant the clock started at.
func (c *Clock) Epoch() time.Time { return c.epoch }

// At schedules f to run at elapsed time t, or now if t has passed.
func (c *Clock) At(t time.Duration, f func()) {
	c.schedule(t, f)
}

// After schedules f to run when d has passed; d <= 0 means now, after the
// events already scheduled for now.
func (c *Clock) After(d time.Duration, f func()) {
	c.schedule(c.now+max(d, 0), f)
}

// AfterFunc is [Clock.After] with a [flowcontrol.Timer] that can cancel the
// call. It only schedules f, never calls it, so the controller may call it
// with its lock held.
func (c *Clock) AfterFunc(d time.Duration, f func()) flowcontrol.Timer {
	return timer{c: c, h: c.schedule(c.now+max(d, 0), f)}
}

func (c *Clock) schedule(at time.Duration, f func()) dheap.Handle[eventKey, func()] {
	k := eventKey{at: max(at, c.now), seq: c.seq}
	c.seq++
	return c.events.Push(k, f)
}

// timer is a pending AfterFunc call; Stop removes it from the queue.
type timer struct {
	c *Clock
	h dheap.Handle[eventKey, func()]
}

func (t timer) Stop() bool {
	_, _, ok := t.c.events.Remove(t.h)
	return ok
}

// Pending returns the number of scheduled events.
func (c *Clock) Pending() int { return c.events.Len() }

// Run runs the scheduled events in order, including those they schedule,
// until none is left or the next one is later than limit. The clock stays at
// the instant of the last event run.
func (c *Clock) Run(limit time.Duration) {
	for {
		k, f, ok := c.events.Peek()
		if !ok || k.at > limit {
			return
		}
		c.events.Pop()
		c.now = k.at
		f()
	}
}
