package flowcontrol_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
)

// TestRetryAfterOfAStalledScopeIsTheCap: a scope whose measured drain
// rate has decayed to almost nothing (its waiters sat for minutes behind a
// closed gate) can barely make room, so it must send the longest
// Retry-After (30s), not the shortest. Contract (package doc, Retry-After;
// retry.go retryAfter doc: "never sooner than one interval from now ...
// between 1s and maxRetryAfter").
func TestRetryAfterOfAStalledScopeIsTheCap(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	g := &switchGate{}
	g.set(1)
	fc := mustNew(t, flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(1)}},
		NoDisplacement: true,
		Gate:           g,
		Clock:          clock,
	})
	h := submit(context.Background(), fc, req("h", 0)) // takes the one slot
	require.NoError(t, h.err)
	a := submit(context.Background(), fc, req("a", 0))
	clock.Advance(time.Second)
	h.adm.Done() // a starts after 1s busy: the band drains 1/s, measured
	require.NoError(t, a.err)

	b := submit(context.Background(), fc, req("b", 0)) // waits behind a
	require.False(t, b.finished())
	clock.Advance(150 * time.Second) // nothing leaves for 150s of busy time

	c := submit(context.Background(), fc, req("c", 0))
	rej := c.rejection(t)
	require.Equal(t, flowcontrol.OutcomeRejectedSaturated, rej.Outcome)
	require.Equal(t, 30*time.Second, rej.RetryAfter,
		"a band that drained nothing for 150s promises a place in %v", rej.RetryAfter)
	a.adm.Done()
	b.adm.Done()
}

// TestRetryAfterOnRetryableRefusals measures a band's dispatch rate on the
// fake clock and checks the projection: whole seconds, rounded up, at most
// 30; that an expiry carries its band's (here, measured not to drain: the
// cap); and that a cancellation carries none.
func TestRetryAfterOnRetryableRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(5), TTL: time.Hour}},
			Gate:  gate.MaxInFlight(1),
		})
		// Dispatch two requests per second for 10 seconds: the holder of
		// the slot is released every 500ms and the next waiter starts.
		h := handOn(t, fc, 0, 20, 500*time.Millisecond)
		// Fill the band: 5 waiters behind the holder.
		waiting := queueUp(t, fc, "w", 0, 5)
		// The band drains at 2/s while busy: refusals are promised one
		// place each, 500ms apart, rounded up to whole seconds.
		var rej *flowcontrol.RejectionError
		var got []time.Duration
		for i := range 5 {
			_, err := fc.EnqueueAndWait(t.Context(), req(fmt.Sprint("over", i), 0))
			if !errors.As(err, &rej) || rej.Outcome != flowcontrol.OutcomeRejectedSaturated {
				t.Fatalf("want a capacity rejection, got %v", err)
			}
			if i == 0 && !strings.Contains(err.Error(), "retry after 1s") {
				t.Fatalf("error text %q", err)
			}
			got = append(got, rej.RetryAfter)
		}
		want := []time.Duration{time.Second, time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second}
		if !slices.Equal(got, want) {
			t.Fatalf("RetryAfter %v, want %v (one place every 500ms)", got, want)
		}
		// The waiters expire after an hour in which the band dispatched
		// nothing (the slot was never released): measured not to drain,
		// it tells each of them the 30s cap. A cancellation carries none.
		time.Sleep(time.Hour)
		synctest.Wait()
		for _, w := range waiting {
			if r := w.rejection(t); r.Outcome != flowcontrol.OutcomeRejectedTTLExpired || r.RetryAfter != 30*time.Second || r.QueueTime != time.Hour {
				t.Fatalf("expired waiter: %v RetryAfter %v QueueTime %v, want 30s after 1h", r.Outcome, r.RetryAfter, r.QueueTime)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		c := start(ctx, fc, req("c", 0))
		synctest.Wait()
		cancel()
		if r := c.rejection(t); r.RetryAfter != 0 {
			t.Fatalf("cancelled: RetryAfter %v", r.RetryAfter)
		}
		// The band held waiters for an hour and dispatched none (the slot
		// was never released): measured not to drain, it gets the 30s cap.
		queueUp(t, fc, "again", 0, 5)
		_, err := fc.EnqueueAndWait(t.Context(), req("over", 0))
		if !errors.As(err, &rej) || rej.RetryAfter != 30*time.Second {
			t.Fatalf("after a stuck hour: %v, want RetryAfter 30s", err)
		}
		h.Done()
	})
}

// TestExpiryTakesTheBandsNextPlace: a request that expires in a band that
// drains is promised the band's next place behind what waits in it, less
// the wait it can bear, and the refusals after it the places after that —
// one drain interval apart.
func TestExpiryTakesTheBandsNextPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc, h := drainingBand(t, 2)
		// short gives up after 300ms, too soon for the 1s window to close:
		// the band still drains 2/s, a place every 500ms.
		short := start(t.Context(), fc, flowcontrol.Request{Key: key("short", 0), TTL: 300 * time.Millisecond})
		other := start(t.Context(), fc, req("other", 0))
		synctest.Wait()
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		r := short.rejection(t)
		require.Equal(t, flowcontrol.OutcomeRejectedTTLExpired, r.Outcome)
		require.Equal(t, 300*time.Millisecond, r.QueueTime)
		require.Equal(t, time.Second, r.RetryAfter, "promised a place at 0.5s")
		require.Contains(t, r.Error(), "after 300ms queued; retry after 1s")
		// Its place was behind what waits: other, 0.5s to drain, less the
		// 0.3s it can wait, then one interval: 0.7s. The band is full again
		// (other and one more); the refusals take the places at 1.2s and
		// 1.7s.
		more := start(t.Context(), fc, req("more", 0))
		synctest.Wait()
		got := refusals(t, fc, 2)
		require.Equal(t, []time.Duration{2 * time.Second, 2 * time.Second}, got)
		h.Done()
		synctest.Wait()
		other.adm.Done()
		synctest.Wait()
		more.adm.Done()
	})
}

// TestFirstBurstGetsThePrior: a burst that fills a band before any drain
// rate is measured is told the prior's places — one per PriorServiceTime
// per admission in flight — spread like measured ones, not nothing.
func TestFirstBurstGetsThePrior(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands:          []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(2)}},
			NoDisplacement: true,
			Gate:           gate.MaxInFlight(4),
		})
		var running []*flowcontrol.Admission
		for range 4 {
			running = append(running, hold(t, fc))
		}
		queueUp(t, fc, "w", 0, 2)
		got := refusals(t, fc, 5)
		// 4 in flight: a place every PriorServiceTime/4 = 250ms.
		require.Equal(t, []time.Duration{time.Second, time.Second, time.Second, time.Second, 2 * time.Second}, got)
		for _, a := range running {
			a.Done()
			synctest.Wait()
		}
	})
}

// TestRetryAfterIgnoresIdleTime is the defect seen by a real client: a band
// that drains in 2s answered Retry-After: 30 after 45s of idleness.
func TestRetryAfterIgnoresIdleTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(4)}},
			Gate:  gate.MaxInFlight(1),
		})
		// Busy at 2 dispatches per second for 5s.
		h := drainTwicePerSecond(t, fc)
		h.Done()
		time.Sleep(45 * time.Second) // idle
		h = hold(t, fc)
		queueUp(t, fc, "w", 0, 4)
		_, err := fc.EnqueueAndWait(context.Background(), req("over", 0))
		var rej *flowcontrol.RejectionError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, time.Second, rej.RetryAfter, "idle time inflated Retry-After")
		h.Done()
	})
}

// TestRetryAfterProjectsFromTheScopeThatTripped: a rejection by the global
// capacity projects from all bands' drain, not from the requested band,
// which may be empty; a request that can never fit gets none.
func TestRetryAfterProjectsFromTheScopeThatTripped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands:           []flowcontrol.BandConfig{{Priority: 1}, {Priority: 0, ByteCapacity: bounded(100)}},
			RequestCapacity: bounded(3),
			ByteCapacity:    bounded(1000),
			Gate:            gate.MaxInFlight(1),
		})
		// Band 1 drains at one request every 4s while busy.
		h := handOn(t, fc, 1, 4, 4*time.Second)
		queueUp(t, fc, "fill", 1, 3)
		// Band 0 is empty and has never drained; the global scope trips.
		_, err := fc.EnqueueAndWait(context.Background(), req("global", 0))
		var rej *flowcontrol.RejectionError
		require.ErrorAs(t, err, &rej)
		require.Contains(t, err.Error(), "global request capacity 3 reached")
		require.Equal(t, 4*time.Second, rej.RetryAfter)

		// Larger than band 0's byte capacity: it can never fit.
		_, err = fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: key("huge", 0), ByteSize: 101})
		require.ErrorIs(t, err, flowcontrol.ErrTooLarge)
		require.ErrorIs(t, err, flowcontrol.ErrRejectedSaturated)
		require.ErrorAs(t, err, &rej)
		require.Zero(t, rej.RetryAfter)
		// Larger than the global byte capacity, in band 1.
		_, err = fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: key("huger", 1), ByteSize: 1001})
		require.ErrorIs(t, err, flowcontrol.ErrTooLarge)
		require.ErrorAs(t, err, &rej)
		require.Zero(t, rej.RetryAfter)
		h.Done()
	})
}

// TestClosedBandGetsNoRetryAfter: a band of capacity 0 admits nothing,
// however long the caller waits.
func TestClosedBandGetsNoRetryAfter(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(0)}}})
	_, err := fc.EnqueueAndWait(context.Background(), req("a", 0))
	var rej *flowcontrol.RejectionError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, flowcontrol.OutcomeRejectedSaturated, rej.Outcome)
	require.Zero(t, rej.RetryAfter)
	require.False(t, errors.Is(err, flowcontrol.ErrTooLarge))
}

// TestExpiryInADeepBandWaitsBehindTheQueue: a request that expires with
// more waiting in its band than drains within its TTL is told to come back
// when what waits has drained enough to serve it in time — not in 1s, to
// rejoin a queue it cannot clear and expire again.
func TestExpiryInADeepBandWaitsBehindTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc, h := drainingBand(t, 20)
		short := start(t.Context(), fc, flowcontrol.Request{Key: key("short", 0), TTL: 300 * time.Millisecond})
		deep := queueUp(t, fc, "deep", 0, 10)
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		r := short.rejection(t)
		require.Equal(t, flowcontrol.OutcomeRejectedTTLExpired, r.Outcome)
		// 10 behind at 2/s drain in 5s; less the 0.3s it can wait, plus
		// one interval: 5.2s, in whole seconds.
		require.Equal(t, 6*time.Second, r.RetryAfter)
		ended := map[*call]bool{}
		for range deep { // started in any order: end each as it starts
			h.Done()
			synctest.Wait()
			h = nil
			for _, c := range deep {
				if c.adm != nil && !ended[c] {
					h, ended[c] = c.adm, true
				}
			}
			require.NotNil(t, h, "a deep request dispatched")
		}
		h.Done()
	})
}

// drainTwicePerSecond holds fc's one slot and hands it on twice a second
// for 5s, so that band 0 is measured to drain 2/s, and returns the
// admission that holds the slot then. Called inside a synctest bubble.
func drainTwicePerSecond(t *testing.T, fc *flowcontrol.FlowController) *flowcontrol.Admission {
	return handOn(t, fc, 0, 10, 500*time.Millisecond)
}

// queueUp starts n requests in band priority, named prefix0, prefix1 and
// so on, and waits until each has queued or dispatched.
func queueUp(t *testing.T, fc *flowcontrol.FlowController, prefix string, priority, n int) []*call {
	var calls []*call
	for i := range n {
		calls = append(calls, start(t.Context(), fc, req(fmt.Sprint(prefix, i), priority)))
	}
	synctest.Wait()
	return calls
}

// refusals enqueues n requests in band 0, each of which must be refused
// for capacity, and returns the Retry-After of each.
func refusals(t *testing.T, fc *flowcontrol.FlowController, n int) []time.Duration {
	t.Helper()
	var got []time.Duration
	for i := range n {
		_, err := fc.EnqueueAndWait(t.Context(), req(fmt.Sprint("over", i), 0))
		var rej *flowcontrol.RejectionError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, flowcontrol.OutcomeRejectedSaturated, rej.Outcome)
		got = append(got, rej.RetryAfter)
	}
	return got
}

// drainingBand returns a controller of one band, band 0, of the given
// request capacity and a TTL of an hour, behind one slot, measured to
// drain 2/s (drainTwicePerSecond), and the admission that holds the slot.
// Called inside a synctest bubble.
func drainingBand(t *testing.T, capacity int64) (*flowcontrol.FlowController, *flowcontrol.Admission) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(capacity), TTL: time.Hour}},
		Gate:  gate.MaxInFlight(1),
	})
	return fc, drainTwicePerSecond(t, fc)
}

// handOn holds fc's one slot and, n times, every interval, hands it on to
// a new request of band priority, so that the band is measured to drain
// one request per interval; it returns the admission that holds the slot
// then. Called inside a synctest bubble.
func handOn(t *testing.T, fc *flowcontrol.FlowController, priority, n int, every time.Duration) *flowcontrol.Admission {
	h := hold(t, fc)
	for range n {
		next := start(t.Context(), fc, req("steady", priority))
		synctest.Wait()
		time.Sleep(every)
		h.Done()
		synctest.Wait()
		h = next.adm
	}
	return h
}
