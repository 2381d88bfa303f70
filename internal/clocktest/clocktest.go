// Package clocktest is the one test clock of the module: a
// [flowcontrol.Clock] whose time moves only when a test moves it, so that
// queue times, TTLs and expiries are exact and nothing sleeps. It imports
// flowcontrol for the Timer type its AfterFunc must return; only tests
// import it.
//
// It is not the simulator's clock (examples/internal/sim.Clock), which is
// an event queue that moves time itself, event by event.
package clocktest

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
)

// Clock is a manual clock. Timers fire only inside [Clock.Advance], on the
// goroutine that calls it, in the order of their instants (ties in the
// order they were set), each with the clock reading its instant and with
// the clock's lock released, so a timer's function may read the clock or
// set another timer. A Clock is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	set    int // timers set so far, to order those due at one instant
	timers []*timer
}

// New returns a clock that reads start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc sets a timer that calls f once the clock has been advanced by d.
func (c *Clock) AfterFunc(d time.Duration, f func()) flowcontrol.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), order: c.set, f: f}
	c.set++
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock d forward, firing on the way, each at its own
// instant, every timer due by the end, those that fired timers set
// included.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		c.timers = slices.DeleteFunc(c.timers, func(t *timer) bool { return t.ended })
		if len(c.timers) == 0 {
			break
		}
		next := slices.MinFunc(c.timers, func(a, b *timer) int {
			return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.order, b.order))
		})
		if next.at.After(end) {
			break
		}
		next.ended = true
		if next.at.After(c.now) { // a timer set with a negative d fires now
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// Set moves the clock to t, earlier or later, as a wall clock may step;
// no timer fires.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Pending returns the number of timers neither stopped nor fired.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.ended {
			n++
		}
	}
	return n
}

type timer struct {
	c     *Clock
	at    time.Time
	order int
	f     func()
	ended bool // stopped or fired; guarded by c.mu
}

// Stop prevents the timer's call if it has not happened, and reports
// whether it did so.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.ended {
		return false
	}
	t.ended = true
	return true
}
