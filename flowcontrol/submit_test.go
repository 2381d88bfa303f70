package flowcontrol_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
)

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
	clock := clocktest.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: 10 * time.Second}},
		Gate:  gate.MaxInFlight(1),
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
	require.Zero(t, clock.Pending(), "a dispatched request's timer must be stopped")

	fc.Submit(context.Background(), req("e", 0), log.done("e"))
	clock.Advance(time.Second)
	fc.Close()
	require.Equal(t, "e rejected-shutting-down after 1s", log.got[len(log.got)-1])
	require.Zero(t, clock.Pending(), "Close must stop the timers of what it shut down")
}

// TestSubmitCancellation: a queued Submit whose context is cancelled ends
// with the cancellation, delivered on the context's AfterFunc goroutine.
func TestSubmitCancellation(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(0)})
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

// TestSubmitCallbackPanicAfterDoneLosesNothing: a Submit callback calls
// Done, which starts the next waiter, and then panics. The panic reaches
// the caller of the Done that started the callback, and what the callback's
// Done decided is delivered all the same, exactly once: the EnqueueAndWait
// that was waiting returns its admission, the Submit behind it gets its
// callback, no slot is kept, and Close returns.
func TestSubmitCallbackPanicAfterDoneLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(1)})
		h := hold(t, fc)
		fc.Submit(context.Background(), req("a", 0), func(adm *flowcontrol.Admission, err error) {
			require.NoError(t, err)
			adm.Done() // starts b, whose outcome is parked while this runs
			panic("callback boom")
		})
		b := start(context.Background(), fc, req("b", 0))
		synctest.Wait()
		c := submit(context.Background(), fc, req("c", 0))
		require.Equal(t, "callback boom", mustPanic(t, h.Done))
		synctest.Wait()
		require.True(t, b.finished(), "the waiter a's Done started never heard of it")
		require.NoError(t, b.err)
		require.Equal(t, 1, fc.InFlight())
		require.False(t, c.finished())
		b.adm.Done()
		require.Equal(t, flowcontrol.OutcomeDispatched, c.outcome(t))
		c.adm.Done()
		require.Equal(t, 0, fc.InFlight())
		require.Equal(t, int64(0), queued(t, fc, 0))
		fc.Close()
	})
}

// TestObserverPanicNeverSkipsDone: whatever the path — decided at once
// (dispatch, capacity, a context already done, no band, shutdown) or after
// waiting (dispatch, expiry, cancellation, displacement, shutdown) — an
// Observer that panics on the outcome reaches the goroutine that settled
// it, and Submit's done is still called, exactly once, with that outcome;
// no slot is kept but the one done was given, and once it is Done none is.
func TestObserverPanicNeverSkipsDone(t *testing.T) {
	type step struct {
		name string
		want flowcontrol.Outcome
		// run submits s's request and makes its outcome happen; settle is
		// what decides it, and is expected to panic with the Observer.
		run func(t *testing.T, fc *flowcontrol.FlowController, clock *clocktest.Clock, s func(context.Context, flowcontrol.Request)) (settle func())
	}
	var holders []*flowcontrol.Admission
	full := func(t *testing.T, fc *flowcontrol.FlowController) *flowcontrol.Admission {
		h := hold(t, fc)
		holders = append(holders, h)
		return h
	}
	steps := []step{
		{"immediate dispatch", flowcontrol.OutcomeDispatched, func(t *testing.T, fc *flowcontrol.FlowController, _ *clocktest.Clock, s func(context.Context, flowcontrol.Request)) func() {
			return func() { s(context.Background(), req("r", 0)) }
		}},
		{"immediate capacity rejection", flowcontrol.OutcomeRejectedSaturated, func(t *testing.T, fc *flowcontrol.FlowController, _ *clocktest.Clock, s func(context.Context, flowcontrol.Request)) func() {
			return func() { s(context.Background(), req("r", 7)) } // band 7 has capacity 0
		}},
		{"context already done", flowcontrol.OutcomeRejectedContextCancelled, func(t *testing.T, fc *flowcontrol.FlowController, _ *clocktest.Clock, s func(context.Context, flowcontrol.Request)) func() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return func() { s(ctx, req("r", 0)) }
		}},
		{"shut down", flowcontrol.OutcomeRejectedShuttingDown, func(t *testing.T, fc *flowcontrol.FlowController, _ *clocktest.Clock, s func(context.Context, flowcontrol.Request)) func() {
			fc.Close()
			return func() { s(context.Background(), req("r", 0)) }
		}},
		{"queued dispatch", flowcontrol.OutcomeDispatched, func(t *testing.T, fc *flowcontrol.FlowController, _ *clocktest.Clock, s func(context.Context, flowcontrol.Request)) func() {
			h := hold(t, fc) // its Done settles r
			s(context.Background(), req("r", 0))
			return h.Done
		}},
		{"queued expiry", flowcontrol.OutcomeRejectedTTLExpired, func(t *testing.T, fc *flowcontrol.FlowController, clock *clocktest.Clock, s func(context.Context, flowcontrol.Request)) func() {
			full(t, fc)
			s(context.Background(), flowcontrol.Request{Key: key("r", 0), TTL: time.Second})
			return func() { clock.Advance(time.Second) }
		}},
		{"queued displacement", flowcontrol.OutcomeRejectedSaturated, func(t *testing.T, fc *flowcontrol.FlowController, _ *clocktest.Clock, s func(context.Context, flowcontrol.Request)) func() {
			full(t, fc)
			submit(context.Background(), fc, req("r", 3))
			s(context.Background(), req("r", 3)) // r's newest; r holds the band
			return func() { submit(context.Background(), fc, req("newcomer", 3)) }
		}},
		{"queued shutdown", flowcontrol.OutcomeRejectedShuttingDown, func(t *testing.T, fc *flowcontrol.FlowController, _ *clocktest.Clock, s func(context.Context, flowcontrol.Request)) func() {
			full(t, fc)
			s(context.Background(), req("r", 0))
			return fc.Close
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			holders = nil
			clock := clocktest.New(time.Unix(1_000_000, 0))
			var armed bool
			fc := mustNew(t, flowcontrol.Config{
				Bands: []flowcontrol.BandConfig{
					{Priority: 7, RequestCapacity: bounded(0)},
					{Priority: 3, RequestCapacity: bounded(2)},
					{Priority: 0},
				},
				NeverPromote: true,
				Gate:         gate.MaxInFlight(1),
				Clock:        clock,
				Observer: func(ev flowcontrol.Event) {
					if armed && ev.Requested.ID == "r" && ev.Outcome == st.want {
						armed = false
						panic("observer boom")
					}
				},
			})
			var (
				calls int
				got   *flowcontrol.Admission
				err   error
			)
			s := func(ctx context.Context, r flowcontrol.Request) {
				fc.Submit(ctx, r, func(a *flowcontrol.Admission, e error) {
					if r.Key.ID == "r" && calls == 0 {
						got, err = a, e
					}
					if r.Key.ID == "r" {
						calls++
					}
				})
			}
			settle := st.run(t, fc, clock, s)
			armed = true
			require.Equal(t, "observer boom", mustPanic(t, settle))
			require.Equal(t, 1, calls, "done calls")
			if st.want == flowcontrol.OutcomeDispatched {
				require.NoError(t, err)
				require.Equal(t, 1, fc.InFlight())
				got.Done()
			} else {
				var rej *flowcontrol.RejectionError
				require.ErrorAs(t, err, &rej)
				require.Equal(t, st.want, rej.Outcome)
				require.Equal(t, st.name == "queued displacement", errors.Is(err, flowcontrol.ErrDisplaced), "displaced: %v", err)
			}
			require.Equal(t, len(holders), fc.InFlight(), "a slot leaked")
			fc.Close() // what still waits ends, so that the holders' slots free
			for _, h := range holders {
				h.Done()
			}
			require.Equal(t, 0, fc.InFlight(), "a slot leaked")
		})
	}
}

// lateClock is a clock whose timers fire only when the test says, and whose
// Stop is always too late: each timer's function stays callable, as a real
// AfterFunc that had started just before Stop would be.
type lateClock struct {
	mu    sync.Mutex
	now   time.Time
	fires []func()
}

type lateTimer struct{}

func (lateTimer) Stop() bool { return false }

func (c *lateClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *lateClock) AfterFunc(_ time.Duration, f func()) flowcontrol.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fires = append(c.fires, f)
	return lateTimer{}
}

// take returns the timers set so far, and forgets them.
func (c *lateClock) take() []func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	fs := c.fires
	c.fires = nil
	return fs
}

// TestLateTimersOfTwoControllersDoNotRace: a request of one controller is
// dispatched, so its waiter is reused, and its TTL timer fires late, on a
// goroutine of its own, while a second controller queues and dispatches a
// request of its own. The late timer must find its waiter moved on and do
// nothing, and — what the race detector checks — it must never touch a
// waiter the other controller is using: waiters are recycled within their
// controller only.
func TestLateTimersOfTwoControllersDoNotRace(t *testing.T) {
	newFC := func(clock *lateClock) *flowcontrol.FlowController {
		return mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: time.Second}},
			Gate:  gate.MaxInFlight(1),
			Clock: clock,
		})
	}
	clockA, clockB := &lateClock{now: time.Unix(1, 0)}, &lateClock{now: time.Unix(1, 0)}
	a, b := newFC(clockA), newFC(clockB)
	// cycle queues one request on fc behind a holder and lets it start, so
	// that its waiter goes back for reuse, and ends its admission.
	cycle := func(fc *flowcontrol.FlowController) {
		h := hold(t, fc)
		c := submit(context.Background(), fc, req("r", 0))
		h.Done()
		require.Equal(t, flowcontrol.OutcomeDispatched, c.outcome(t))
		c.adm.Done()
	}
	for range 200 {
		cycle(a)
		var late sync.WaitGroup
		for _, f := range clockA.take() {
			late.Go(f) // a's timer, late: its request left long ago
		}
		cycle(b) // meanwhile b reuses a waiter
		late.Wait()
		clockB.take()
	}
	require.Equal(t, 0, a.InFlight())
	require.Equal(t, 0, b.InFlight())
	require.Equal(t, int64(0), queued(t, a, 0))
	require.Equal(t, int64(0), queued(t, b, 0))
}

// TestCloseWaitsForCallbacksDecidedBeforeIt: a Submit expires on its
// timer's goroutine a moment before Close, and its callback is still
// running; another Submit started at once and its callback is still
// running on the submitter's goroutine. Close returns only after both
// callbacks have.
func TestCloseWaitsForCallbacksDecidedBeforeIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: time.Second}}, Gate: gate.MaxInFlight(1)})
		releaseExpired, releaseStarted := make(chan struct{}), make(chan struct{})
		go fc.Submit(context.Background(), req("started", 0), func(a *flowcontrol.Admission, err error) {
			require.NoError(t, err)
			<-releaseStarted
			a.Done()
		})
		synctest.Wait()
		fc.Submit(context.Background(), req("expired", 0), func(_ *flowcontrol.Admission, err error) {
			require.Error(t, err)
			<-releaseExpired
		})
		time.Sleep(time.Second) // the timer's goroutine runs the callback, which waits
		synctest.Wait()
		closed := make(chan struct{})
		go func() {
			fc.Close()
			close(closed)
		}()
		synctest.Wait()
		for _, release := range []chan struct{}{releaseExpired, releaseStarted} {
			select {
			case <-closed:
				t.Fatal("Close returned before a callback decided before it had run")
			default:
			}
			close(release)
			synctest.Wait()
		}
		select {
		case <-closed:
		default:
			t.Fatal("Close did not return once every callback had")
		}
		require.Equal(t, 0, fc.InFlight())
	})
}

// TestCloseFromACallbackPanics: Close called on an EnqueueAndWait caller's
// goroutine from inside a callback — the Observer of its own dispatch, or
// a Submit callback that its cancellation delivers — would wait for that
// very call to return. It panics instead, with the package's name, after
// doing what it can: the controller is closed, and no slot is kept.
func TestCloseFromACallbackPanics(t *testing.T) {
	wantPanic := func(t *testing.T, got any) {
		t.Helper()
		msg, ok := got.(string)
		require.True(t, ok, "panicked with %v", got)
		require.True(t, strings.HasPrefix(msg, "flowcontrol: "), msg)
	}
	t.Run("observer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var fc *flowcontrol.FlowController
			fc = mustNew(t, flowcontrol.Config{
				Bands: []flowcontrol.BandConfig{{Priority: 0}},
				Gate:  gate.MaxInFlight(1),
				Observer: func(ev flowcontrol.Event) {
					if ev.Requested.ID == "waiter" {
						fc.Close()
					}
				},
			})
			h := hold(t, fc)
			panicked := startRecovering(context.Background(), fc, req("waiter", 0))
			synctest.Wait()
			h.Done() // starts the waiter, whose Observer closes
			wantPanic(t, <-panicked)
			require.Equal(t, 0, fc.InFlight())
			_, err := fc.EnqueueAndWait(context.Background(), req("later", 0))
			require.ErrorIs(t, err, flowcontrol.ErrRejectedShuttingDown)
		})
	})
	t.Run("submit callback", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			gt := &switchGate{}
			gt.set(1, 5) // band 5 is refused: its waiter holds band 0 back
			fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 5}, {Priority: 0}}, Gate: gt})
			ctx, cancel := context.WithCancel(context.Background())
			panicked := startRecovering(ctx, fc, req("waiter", 5))
			synctest.Wait()
			called := 0
			fc.Submit(context.Background(), req("behind", 0), func(a *flowcontrol.Admission, err error) {
				called++
				require.NoError(t, err)
				defer a.Done()
				fc.Close() // on the waiter's goroutine: its cancellation started this
			})
			cancel()
			wantPanic(t, <-panicked)
			require.Equal(t, 1, called)
			require.Equal(t, 0, fc.InFlight())
			require.Equal(t, int64(0), queued(t, fc, 5)+queued(t, fc, 0))
		})
	})
}

// TestPanicDeliveringOthersKeepsTheNewcomersOutcome: a newcomer displaces
// a queued Submit and starts at once; the displaced request's callback
// panics as the newcomer's enqueue delivers it. The panic reaches the
// newcomer's caller, and the newcomer's own outcome is not lost: an
// EnqueueAndWait's admission is released, a Submit's done is handed it.
func TestPanicDeliveringOthersKeepsTheNewcomersOutcome(t *testing.T) {
	for _, form := range []string{"EnqueueAndWait", "Submit"} {
		t.Run(form, func(t *testing.T) {
			gt := &switchGate{}
			gt.set(1, -1) // band -1 is refused, so its requests wait
			fc := mustNew(t, flowcontrol.Config{
				Bands:           []flowcontrol.BandConfig{{Priority: 0}, {Priority: -1}},
				RequestCapacity: bounded(2),
				Gate:            gt,
			})
			submit(context.Background(), fc, req("hog", -1))
			fc.Submit(context.Background(), req("hog", -1), func(_ *flowcontrol.Admission, err error) {
				require.ErrorIs(t, err, flowcontrol.ErrRejectedSaturated)
				require.ErrorIs(t, err, flowcontrol.ErrDisplaced)
				panic("displaced boom")
			})
			var got *flowcontrol.Admission
			calls := 0
			newcomer := func() {
				if form == "Submit" {
					fc.Submit(context.Background(), req("newcomer", 0), func(a *flowcontrol.Admission, err error) {
						require.NoError(t, err)
						got = a
						calls++
					})
					return
				}
				_, _ = fc.EnqueueAndWait(context.Background(), req("newcomer", 0))
			}
			require.Equal(t, "displaced boom", mustPanic(t, newcomer))
			if form == "Submit" {
				require.Equal(t, 1, calls)
				require.Equal(t, 1, fc.InFlight())
				got.Done()
			}
			require.Equal(t, 0, fc.InFlight(), "the newcomer's slot leaked")
		})
	}
}

// TestDisplacementNeedsTheVictimToHoldMore: fair admission displaces only a
// flow that would still hold more than the newcomer's once it is admitted
// (Config.NoDisplacement's doc). In a band of cost capacity 6 that flow a
// fills with one request of cost 4, b's request of cost 4 is under its share
// (3) but would leave a no better off than b: it is rejected, or a's retry
// would displace it in turn. b's request of cost 3 displaces a's.
func TestDisplacementNeedsTheVictimToHoldMore(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, CostCapacity: bounded(6)}},
		Gate:  gate.MaxInFlight(0),
	})
	a := submit(context.Background(), fc, flowcontrol.Request{Key: key("a", 0), Cost: 4})
	even := submit(context.Background(), fc, flowcontrol.Request{Key: key("b", 0), Cost: 4})
	require.Equal(t, flowcontrol.OutcomeRejectedSaturated, even.outcome(t))
	require.NotErrorIs(t, even.err, flowcontrol.ErrDisplaced)
	require.False(t, a.finished())
	less := submit(context.Background(), fc, flowcontrol.Request{Key: key("b", 0), Cost: 3})
	displaced(t, a)
	require.False(t, less.finished())
}
