package gate_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
)

// manualClock is a flowcontrol.Clock that moves only when told. Its timers
// run on the goroutine that calls Advance, after the clock's lock is
// released.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*manualTimer
}

type manualTimer struct {
	c    *manualClock
	at   time.Time
	seq  int
	f    func()
	done bool
}

func newClock() *manualClock {
	return &manualClock{now: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) flowcontrol.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.seq++
	c.timers = append(c.timers, t)
	return t
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	return true
}

// Advance moves the clock by d, running every timer due on the way in
// order of its instant.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		slices.SortFunc(c.timers, func(a, b *manualTimer) int {
			if !a.at.Equal(b.at) {
				return a.at.Compare(b.at)
			}
			return a.seq - b.seq
		})
		var next *manualTimer
		for len(c.timers) > 0 {
			t := c.timers[0]
			if t.done {
				c.timers = c.timers[1:]
				continue
			}
			if !t.at.After(end) {
				next = t
			}
			break
		}
		if next == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		c.timers = c.timers[1:]
		next.done = true
		c.now = next.at
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
}

// call is one Submit whose outcome is recorded.
type call struct {
	done bool
	adm  *flowcontrol.Admission
	err  error
}

func submit(fc *flowcontrol.FlowController, id string, priority int) *call {
	c := &call{}
	fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: id, Priority: priority}},
		func(a *flowcontrol.Admission, err error) { c.done, c.adm, c.err = true, a, err })
	return c
}

func (c *call) outcome(t *testing.T) flowcontrol.Outcome {
	t.Helper()
	if !c.done {
		t.Fatal("call has no outcome yet")
	}
	if c.err == nil {
		return flowcontrol.OutcomeDispatched
	}
	var rej *flowcontrol.RejectionError
	if !errors.As(c.err, &rej) {
		t.Fatalf("error %v is not a RejectionError", c.err)
	}
	return rej.Outcome
}

func mustNew(t *testing.T, cfg flowcontrol.Config) *flowcontrol.FlowController {
	t.Helper()
	fc, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	return fc
}
