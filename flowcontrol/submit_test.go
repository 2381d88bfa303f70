package flowcontrol_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
)

// manualClock is a virtual clock the test moves by hand. Timers fire, in
// time order, only inside Advance, on the test's goroutine.
type manualClock struct {
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	at      time.Time
	f       func()
	stopped bool
	fired   bool
}

func (t *manualTimer) Stop() bool {
	if t.stopped || t.fired {
		return false
	}
	t.stopped = true
	return true
}

func (c *manualClock) Now() time.Time { return c.now }

func (c *manualClock) AfterFunc(d time.Duration, f func()) flowcontrol.Timer {
	t := &manualTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock d forward, firing every timer due on the way at
// its own instant.
func (c *manualClock) Advance(d time.Duration) {
	end := c.now.Add(d)
	for {
		slices.SortStableFunc(c.timers, func(a, b *manualTimer) int { return a.at.Compare(b.at) })
		i := slices.IndexFunc(c.timers, func(t *manualTimer) bool { return !t.stopped && !t.fired })
		if i < 0 || c.timers[i].at.After(end) {
			break
		}
		t := c.timers[i]
		c.now = t.at
		t.fired = true
		t.f()
	}
	c.now = end
	c.timers = slices.DeleteFunc(c.timers, func(t *manualTimer) bool { return t.stopped || t.fired })
}

// live counts the timers neither stopped nor fired.
func (c *manualClock) live() int {
	n := 0
	for _, t := range c.timers {
		if !t.stopped && !t.fired {
			n++
		}
	}
	return n
}

// outcomeLog records Submit outcomes in the order their done functions ran.
type outcomeLog struct{ got []string }

func (l *outcomeLog) done(name string) func(*flowcontrol.Admission, error) {
	return func(adm *flowcontrol.Admission, err error) {
		if err != nil {
			var rej *flowcontrol.RejectionError
			if !errors.As(err, &rej) {
				panic(err)
			}
			l.got = append(l.got, name+" "+rej.Outcome.String()+" after "+rej.QueueTime.String())
			return
		}
		l.got = append(l.got, name+" dispatched after "+adm.QueueTime().String())
	}
}

// TestSubmitOnAVirtualClock runs the controller on a clock set decades from
// real time, with no goroutine of the test's but its own: queue times, TTLs
// and expiries are all read from the virtual clock, and every done function
// runs exactly once, outside the lock, on the goroutine of the event.
func TestSubmitOnAVirtualClock(t *testing.T) {
	clock := &manualClock{now: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)}
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: 10 * time.Second}},
		Gate:  flowcontrol.MaxInFlight(1),
		Clock: clock,
	})
	var log outcomeLog
	var first *flowcontrol.Admission
	fc.Submit(context.Background(), req("a", 0), func(adm *flowcontrol.Admission, err error) {
		require.NoError(t, err)
		first = adm
	})
	require.NotNil(t, first, "an immediate dispatch calls done within Submit")
	fc.Submit(context.Background(), req("b", 0), log.done("b"))
	clock.Advance(3 * time.Second)
	fc.Submit(context.Background(), req("c", 0), log.done("c"))
	fc.Submit(context.Background(), flowcontrol.Request{Key: key("d", 0), TTL: time.Second}, log.done("d"))
	require.Empty(t, log.got)

	first.Done()                                 // b starts, 3s after it queued
	clock.Advance(time.Second + time.Nanosecond) // d expires at its own TTL
	clock.Advance(9 * time.Second)               // c expires 10s after it queued
	want := []string{
		"b dispatched after 3s",
		"d rejected-ttl-expired after 1s",
		"c rejected-ttl-expired after 10s",
	}
	if diff := cmp.Diff(want, log.got); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	require.Equal(t, int64(0), queued(t, fc, 0))
	require.Zero(t, clock.live(), "a dispatched request's timer must be stopped")

	fc.Submit(context.Background(), req("e", 0), log.done("e"))
	clock.Advance(time.Second)
	fc.Close()
	require.Equal(t, "e rejected-shutting-down after 1s", log.got[len(log.got)-1])
	require.Zero(t, clock.live(), "Close must stop the timers of what it shut down")
}

// TestSubmitCancellation: a queued Submit whose context is cancelled ends
// with the cancellation, delivered on the context's AfterFunc goroutine.
func TestSubmitCancellation(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: flowcontrol.MaxInFlight(0)})
	ctx, cancel := context.WithCancelCause(context.Background())
	c := submit(ctx, fc, req("a", 0))
	require.False(t, c.finished())
	cause := errorString("client went away")
	cancel(cause)
	rej := c.rejection(t)
	require.Equal(t, flowcontrol.OutcomeRejectedContextCancelled, rej.Outcome)
	require.ErrorIs(t, rej, context.Canceled)
	require.ErrorIs(t, rej, cause)
	require.Equal(t, int64(0), queued(t, fc, 0))
}

// TestSubmitNilDonePanics: misuse panics with the package's name.
func TestSubmitNilDonePanics(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}})
	require.Equal(t, "flowcontrol: Submit with a nil done function", mustPanic(t, func() {
		fc.Submit(context.Background(), req("a", 0), nil)
	}))
}

type errorString string

func (e errorString) Error() string { return string(e) }
