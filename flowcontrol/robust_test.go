package flowcontrol_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
	"github.com/sluicegate/sluice/ordering"
)

// mustPanic runs f and returns what it panicked with, failing the test if
// it returned normally.
func mustPanic(t *testing.T, f func()) (recovered any) {
	t.Helper()
	defer func() { recovered = recover() }()
	f()
	t.Fatal("did not panic")
	return nil
}

// TestObserverPanicOnDispatchReleasesTheSlot: an Observer that panics on a
// dispatch must not keep the slot: with MaxInFlight(1), later requests still
// start, and InFlight returns to 0.
func TestObserverPanicOnDispatchReleasesTheSlot(t *testing.T) {
	armed := true
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0}},
		Gate:  gate.MaxInFlight(1),
		Observer: func(ev flowcontrol.Event) {
			if armed && ev.Outcome == flowcontrol.OutcomeDispatched {
				panic("observer boom")
			}
		},
	})
	require.Equal(t, "observer boom", mustPanic(t, func() { _, _ = fc.EnqueueAndWait(context.Background(), req("a", 0)) }))
	require.Equal(t, 0, fc.InFlight(), "the panicking dispatch kept its slot")
	armed = false
	adm, err := fc.EnqueueAndWait(context.Background(), req("b", 0))
	require.NoError(t, err)
	adm.Done()
	require.Equal(t, 0, fc.InFlight())
}

// TestObserverPanicOnQueuedDispatch: the same for a request that waited,
// through both admission forms. The panic reaches the goroutine the
// observer runs on: the waiting caller's for EnqueueAndWait, the releasing
// caller's for Submit. A Submit's done is called all the same, with the
// admission, which it then owns.
func TestObserverPanicOnQueuedDispatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0}},
			Gate:  gate.MaxInFlight(1),
			Observer: func(ev flowcontrol.Event) {
				if armed.Load() && ev.Outcome == flowcontrol.OutcomeDispatched {
					panic("observer boom")
				}
			},
		})
		h := hold(t, fc)
		panicked := startRecovering(context.Background(), fc, req("waiter", 0))
		synctest.Wait()
		armed.Store(true)
		h.Done() // starts "waiter", whose observer panics on its goroutine
		require.Equal(t, "observer boom", <-panicked)
		require.Equal(t, 0, fc.InFlight(), "the waiter's slot leaked")

		armed.Store(false)
		h = hold(t, fc)
		armed.Store(true)
		var got *flowcontrol.Admission
		calls := 0
		fc.Submit(context.Background(), req("submitted", 0), func(a *flowcontrol.Admission, err error) {
			require.NoError(t, err)
			got = a
			calls++
		})
		require.Equal(t, "observer boom", mustPanic(t, h.Done))
		require.Equal(t, 1, calls, "done must be called, once, even when the observer panics on the dispatch")
		require.Equal(t, 1, fc.InFlight(), "the admission done was given holds the slot")
		got.Done()
		require.Equal(t, 0, fc.InFlight(), "the submitted request's slot leaked")
		require.Equal(t, int64(0), queued(t, fc, 0))
	})
}

// panicPolicy is an ordering policy whose Key panics.
type panicPolicy struct{}

func (panicPolicy) TypeName() string                        { return "panic-ordering-policy" }
func (panicPolicy) RequiredCapability() ordering.Capability { return ordering.CapabilityFIFO }
func (panicPolicy) Key(*ordering.Item) ordering.Key         { panic("key boom") }

// TestPolicyKeyPanicDoesNotWedge: a Key that panics reaches the caller,
// nothing is queued, and the controller — Close included — goes on.
func TestPolicyKeyPanicDoesNotWedge(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, Policy: panicPolicy{}}, {Priority: 1}},
		Gate:  gate.MaxInFlight(1),
	})
	h := hold(t, fc)
	require.Equal(t, "key boom", mustPanic(t, func() { _, _ = fc.EnqueueAndWait(context.Background(), req("a", 0)) }))
	require.Equal(t, "key boom", mustPanic(t, func() {
		fc.Submit(context.Background(), req("b", 0), func(*flowcontrol.Admission, error) { t.Error("done called") })
	}))
	require.Equal(t, int64(0), queued(t, fc, 0))
	h.Done()
	adm, err := fc.EnqueueAndWait(context.Background(), req("c", 1))
	require.NoError(t, err)
	adm.Done()
	fc.Close()
	require.Equal(t, 0, fc.InFlight())
}

// panicGate panics in TryAcquire while armed, and counts slots otherwise.
type panicGate struct {
	limit, inFlight int
	armed           bool
	releasePanics   bool
}

func (g *panicGate) TryAcquire(int) bool {
	if g.armed {
		panic("gate boom")
	}
	if g.inFlight >= g.limit {
		return false
	}
	g.inFlight++
	return true
}

func (g *panicGate) Release(int) {
	g.inFlight--
	if g.releasePanics {
		panic("release boom")
	}
}

// TestGatePanicReleasesTheLock: a TryAcquire that panics reaches the
// caller with the lock released; the request whose enqueue triggered the
// dispatch is withdrawn, not left as a zombie; the controller goes on.
func TestGatePanicReleasesTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &panicGate{limit: 1}
		fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 5}, {Priority: 0}}, Gate: g})
		h := hold(t, fc) // band 0 holds the one slot
		high := start(context.Background(), fc, req("high", 5))
		synctest.Wait()
		require.Equal(t, int64(1), queued(t, fc, 5))

		// Immediate path: band 5 waits, so a band-0 request is not first and
		// its enqueue runs dispatch, which offers band 5's head to the gate.
		g.armed = true
		require.Equal(t, "gate boom", mustPanic(t, func() { _, _ = fc.EnqueueAndWait(context.Background(), req("low", 0)) }))
		require.Equal(t, int64(0), queued(t, fc, 0), "the panicking caller's request stayed queued")
		require.Equal(t, int64(1), queued(t, fc, 5))
		// A panic on a caller that is first: its own TryAcquire.
		require.Equal(t, "gate boom", mustPanic(t, func() { _, _ = fc.EnqueueAndWait(context.Background(), req("top", 9)) }))

		g.armed = false
		h.Done()
		synctest.Wait()
		require.Equal(t, flowcontrol.OutcomeDispatched, high.outcome(t))
		high.adm.Done()
		require.Equal(t, 0, fc.InFlight())
		require.Equal(t, 0, g.inFlight)

		// Release that panics: the controller counts the slot returned.
		a, err := fc.EnqueueAndWait(context.Background(), req("r", 0))
		require.NoError(t, err)
		g.releasePanics = true
		require.Equal(t, "release boom", mustPanic(t, a.Done))
		g.releasePanics = false
		require.Equal(t, 0, fc.InFlight())
		a.Done() // a second Done does nothing, and does not reach the gate
		b, err := fc.EnqueueAndWait(context.Background(), req("s", 0))
		require.NoError(t, err)
		b.Done()
	})
}

// TestGatePanicAfterOwnDispatchReturnsTheSlot: the dispatch run by an
// enqueue may start the caller's own request and then panic on the next
// head; the caller never receives its admission, so its slot goes back.
func TestGatePanicAfterOwnDispatchReturnsTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &countingPanicGate{limit: 1}
		fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 5}, {Priority: 0}, {Priority: -1}}, Gate: g})
		h := hold(t, fc)
		lower := start(context.Background(), fc, req("lower", -1))
		synctest.Wait()
		high := start(context.Background(), fc, req("high", 5))
		synctest.Wait()
		g.limit = 4 // room for three more; count the offers from here
		g.calls, g.panicOn = 0, 3
		// "low" is not first (band 5 waits): its enqueue dispatches "high"
		// (offer 1) and "low" itself (offer 2), then panics offering
		// "lower" (offer 3).
		require.Equal(t, "gate boom", mustPanic(t, func() { _, _ = fc.EnqueueAndWait(context.Background(), req("low", 0)) }))
		require.Equal(t, flowcontrol.OutcomeDispatched, high.outcome(t), "decided before the panic: still delivered")
		require.Equal(t, 2, fc.InFlight(), "the holder and high; low's slot must be back")
		require.Equal(t, 2, g.inFlight)
		require.Equal(t, int64(0), queued(t, fc, 0))
		require.Equal(t, int64(1), queued(t, fc, -1))
		g.panicOn = 0
		high.adm.Done()
		synctest.Wait()
		require.Equal(t, flowcontrol.OutcomeDispatched, lower.outcome(t))
		lower.adm.Done()
		h.Done()
		require.Equal(t, 0, fc.InFlight())
		require.Equal(t, 0, g.inFlight)
	})
}

// countingPanicGate panics on its panicOn-th TryAcquire.
type countingPanicGate struct {
	limit, inFlight, calls, panicOn int
}

func (g *countingPanicGate) TryAcquire(int) bool {
	g.calls++
	if g.calls == g.panicOn {
		panic("gate boom")
	}
	if g.inFlight >= g.limit {
		return false
	}
	g.inFlight++
	return true
}

func (g *countingPanicGate) Release(int) { g.inFlight-- }

// TestSubmitCallbackPanicDoesNotStrandOthers: when one decided request's
// done function panics, the others decided in the same event are still
// delivered, and the panic reaches the goroutine that caused the event.
func TestSubmitCallbackPanicDoesNotStrandOthers(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(0)})
	var got []string
	for i := range 3 {
		name := fmt.Sprint("r", i)
		fc.Submit(context.Background(), req(name, 0), func(_ *flowcontrol.Admission, err error) {
			got = append(got, name)
			if name == "r1" {
				panic("done boom")
			}
		})
	}
	require.Equal(t, "done boom", mustPanic(t, fc.Close))
	require.Equal(t, []string{"r0", "r1", "r2"}, got)
}

// TestShutdownWinsOverADoneContext: once Close has begun, a call whose
// context is already done is told the router is shutting down (503), not
// that it may come back.
func TestShutdownWinsOverADoneContext(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}})
	fc.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	for name, ctx := range map[string]context.Context{"cancelled": cancelled, "expired": expired, "live": context.Background()} {
		_, err := fc.EnqueueAndWait(ctx, req(name, 0))
		require.ErrorIs(t, err, flowcontrol.ErrRejectedShuttingDown, name)
		var got error
		fc.Submit(ctx, req(name, 0), func(_ *flowcontrol.Admission, err error) { got = err })
		require.ErrorIs(t, got, flowcontrol.ErrRejectedShuttingDown, name)
	}
}

// TestShutdownWinsOverAQueuedCancellation: a queued request whose context
// ends while Close runs is shut down, whichever reaches the lock first.
func TestShutdownWinsOverAQueuedCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for range 20 {
			fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(0)})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			w := start(ctx, fc, req("w", 0))
			synctest.Wait()
			closed := make(chan struct{})
			go func() { fc.Close(); close(closed) }()
			cancel()
			<-closed
			o := w.outcome(t)
			if o != flowcontrol.OutcomeRejectedShuttingDown && o != flowcontrol.OutcomeRejectedContextCancelled {
				t.Fatalf("outcome %v", o)
			}
			if o == flowcontrol.OutcomeRejectedContextCancelled {
				// Legitimate only if the cancellation was settled before
				// Close began; with Close started first it must not be.
				continue
			}
		}
		// Deterministic order: Close has begun (closing is set) before the
		// waiter's cancellation reaches the lock.
		fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(0)})
		ctx, cancel := context.WithCancel(context.Background())
		w := start(ctx, fc, req("w", 0))
		synctest.Wait()
		fc.Close()
		cancel()
		require.Equal(t, flowcontrol.OutcomeRejectedShuttingDown, w.outcome(t))
	})
}

// TestReleasePanicStrandsNoWaiter: a Gate whose Release panics (after
// returning its slot) reaches the caller of Done with the lock released, and
// the request waiting for that slot starts within that Done all the same:
// release runs its dispatch in a defer.
func TestReleasePanicStrandsNoWaiter(t *testing.T) {
	g := &panicGate{limit: 1}
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	h := hold(t, fc)
	w := submit(context.Background(), fc, req("w", 0))
	require.False(t, w.finished())
	g.releasePanics = true
	require.Equal(t, "release boom", mustPanic(t, h.Done))
	g.releasePanics = false
	require.Equal(t, 1, fc.InFlight(), "the holder's slot is back and the waiter holds it")
	require.True(t, w.finished(), "the waiter did not start once the gate had room")
	require.NoError(t, w.err)
	w.adm.Done()
	require.Equal(t, 0, fc.InFlight())
}

// TestObserverPanicOnQueuedRejectionStillCallsDone: Submit promises
// that done is called exactly once; the only exception documented is an
// Observer that panics on a dispatch (the admission is released instead).
// When the Observer panics on the expiry of a queued Submit, deliver has
// already recycled the waiter and done is never called: the submitter
// never learns its request ended, and the panic surfaces on the clock's
// timer goroutine instead.
func TestObserverPanicOnQueuedRejectionStillCallsDone(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: time.Second}},
		Gate:  gate.MaxInFlight(0),
		Clock: clock,
		Observer: func(ev flowcontrol.Event) {
			if ev.Outcome == flowcontrol.OutcomeRejectedTTLExpired {
				panic("observer boom")
			}
		},
	})
	w := submit(context.Background(), fc, req("w", 0))
	require.Equal(t, "observer boom", mustPanic(t, func() { clock.Advance(time.Second) }))
	require.True(t, w.finished(), "done was never called for the expired request")
}
