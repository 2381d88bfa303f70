package sim

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

func TestClockRunsEventsInOrder(t *testing.T) {
	c := NewClock(epoch)
	var got []string
	log := func(s string) func() { return func() { got = append(got, s) } }
	c.At(2*time.Second, log("b1"))
	c.At(time.Second, log("a"))
	c.At(2*time.Second, log("b2")) // same instant: after b1, scheduled first
	c.At(time.Second, func() {
		got = append(got, "a2")
		c.After(0, log("a3"))                   // now, after what is already due now
		c.At(-time.Hour, log("a4"))             // the past means now
		c.After(500*time.Millisecond, log("x")) // 1.5s
	})
	c.At(5*time.Second, log("late"))
	c.Run(2 * time.Second)
	want := []string{"a", "a2", "a3", "a4", "x", "b1", "b2"}
	if !slices.Equal(got, want) {
		t.Fatalf("ran %q, want %q", got, want)
	}
	if c.Elapsed() != 2*time.Second || !c.Now().Equal(epoch.Add(2*time.Second)) {
		t.Errorf("clock at %v (%v), want 2s after the epoch", c.Elapsed(), c.Now())
	}
	if c.Pending() != 1 {
		t.Errorf("%d events pending, want the late one", c.Pending())
	}
}

func TestClockTimerStop(t *testing.T) {
	c := NewClock(epoch)
	fired := 0
	t1 := c.AfterFunc(time.Second, func() { fired++ })
	t2 := c.AfterFunc(time.Second, func() { fired += 10 })
	if !t1.Stop() {
		t.Error("Stop of a pending timer reported false")
	}
	if t1.Stop() {
		t.Error("second Stop reported true")
	}
	c.Run(time.Minute)
	if fired != 10 {
		t.Errorf("fired %d, want only the second timer", fired)
	}
	if t2.Stop() {
		t.Error("Stop after the call reported true")
	}
}

// The controller runs on the virtual clock: a queued request expires at
// exactly its TTL of virtual time, and its queue time reads that clock.
func TestControllerOnVirtualClock(t *testing.T) {
	c := NewClock(epoch)
	fc, err := flowcontrol.New(flowcontrol.Config{
		Clock: c,
		Gate:  gate.MaxInFlight(1),
		Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: 10 * time.Second}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var first *flowcontrol.Admission
	fc.Submit(context.Background(), flowcontrol.Request{}, func(a *flowcontrol.Admission, err error) { first = a })
	if first == nil {
		t.Fatal("the first request did not start at once")
	}
	var expiredAt, secondAt time.Duration = -1, -1
	var secondQueued time.Duration
	c.At(time.Second, func() {
		fc.Submit(context.Background(), flowcontrol.Request{TTL: 3 * time.Second}, func(a *flowcontrol.Admission, err error) {
			if !errors.Is(err, flowcontrol.ErrRejectedTTLExpired) {
				t.Errorf("second request: %v, want expiry", err)
			}
			expiredAt = c.Elapsed()
		})
		fc.Submit(context.Background(), flowcontrol.Request{}, func(a *flowcontrol.Admission, err error) {
			if err != nil {
				t.Errorf("third request: %v", err)
				return
			}
			secondAt, secondQueued = c.Elapsed(), a.QueueTime()
			a.Done()
		})
	})
	c.At(6*time.Second, first.Done)
	c.Run(time.Minute)
	if expiredAt != 4*time.Second {
		t.Errorf("expired at %v, want 4s (queued at 1s, TTL 3s)", expiredAt)
	}
	if secondAt != 6*time.Second || secondQueued != 5*time.Second {
		t.Errorf("third started at %v after %v queued, want 6s after 5s", secondAt, secondQueued)
	}
	if c.Pending() != 0 {
		t.Errorf("%d events left", c.Pending())
	}
}
