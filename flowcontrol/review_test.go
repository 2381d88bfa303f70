package flowcontrol_test

// Adversarial review tests. Each test that documents a bug says which
// contract it breaks; the others cover edges that held.

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/clocktest"
	"github.com/sluicegate/sluice/ordering"
)

// TestReviewBandLimitDisplacesOnlyInItsBand: when a request is refused by
// its band's request capacity and the controller's request capacity at
// once, displacing the newest request of its own band's fullest flow makes
// room in both scopes. Contract (Config.NoDisplacement, limits.go victim
// doc): the victims of a band limit come from the request's band; only a
// controller-wide limit reaches other bands. Displacing a request of a
// lower band cannot free room in the full band, so it must not happen.
func TestReviewBandLimitDisplacesOnlyInItsBand(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 0, RequestCapacity: bounded(4)},
			{Priority: -1},
		},
		RequestCapacity: bounded(9),
		Gate:            flowcontrol.MaxInFlight(0), // everything waits
	})
	var a, b []*call
	for range 4 {
		a = append(a, submit(context.Background(), fc, req("A", 0)))
	}
	for range 5 {
		b = append(b, submit(context.Background(), fc, req("B", -1)))
	}
	require.Equal(t, int64(4), queued(t, fc, 0))
	require.Equal(t, int64(5), queued(t, fc, -1))

	c := submit(context.Background(), fc, req("C", 0))
	require.False(t, c.finished(), "C was refused: %v", c.err)

	// A's newest is the one victim needed: it frees a place in band 0 and
	// in the controller.
	require.True(t, a[3].finished(), "A's newest request was not displaced")
	require.Equal(t, flowcontrol.OutcomeEvictedQueuePressure, a[3].outcome(t))
	for i, v := range b {
		require.False(t, v.finished(), "B[%d] in band -1 was displaced (%v) to make room in full band 0", i, v.err)
	}
	require.Equal(t, int64(5), queued(t, fc, -1))
}

// TestReviewRetryAfterOfAStalledScopeIsTheCap: a scope whose measured drain
// rate has decayed to almost nothing (its waiters sat for minutes behind a
// closed gate) can barely make room, so it must send the longest
// Retry-After (30s), not the shortest. Contract (package doc, Retry-After;
// retry.go retryAfter doc: "never sooner than one interval from now ...
// between 1s and maxRetryAfter").
func TestReviewRetryAfterOfAStalledScopeIsTheCap(t *testing.T) {
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

// blockingPolicy is FCFS, but its Key blocks for a request carrying the
// x-block header until release is closed, after telling entered.
type blockingPolicy struct {
	entered chan struct{}
	release chan struct{}
}

func (blockingPolicy) TypeName() string                        { return "blocking-fcfs-ordering-policy" }
func (blockingPolicy) RequiredCapability() ordering.Capability { return ordering.CapabilityFIFO }
func (p blockingPolicy) Key(it *ordering.Item) ordering.Key {
	if it.Header.Get("x-block") != "" {
		close(p.entered)
		<-p.release
	}
	return ordering.FCFS().Key(it)
}

// TestReviewQueueTimeIsNeverNegative: a request's queue time is how long it
// waited, measured on the controller's clock. Contract (Admission.QueueTime,
// Event.QueueTime; "Time comes from one injectable clock"). enqueue runs
// dispatch with the time its caller read before taking the lock (before
// Policy.Key ran), so a request queued in the meantime is dispatched "before"
// it was queued and reports a negative queue time; the drain meters see time
// run backwards too.
func TestReviewQueueTimeIsNeverNegative(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	g := &switchGate{}
	g.set(0)
	pol := blockingPolicy{entered: make(chan struct{}), release: make(chan struct{})}
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 5}, {Priority: 0, Policy: pol}},
		Gate:  g,
		Clock: clock,
	})
	slow := flowcontrol.Request{Key: key("slow", 0), Header: map[string][]string{"X-Block": {"1"}}}
	a := start(context.Background(), fc, slow)
	<-pol.entered // a read the clock and is deriving its key, unlocked

	clock.Advance(10 * time.Second)
	b := submit(context.Background(), fc, req("b", 5)) // queued at +10s
	require.False(t, b.finished())
	g.set(1) // room for one; no Nudge: a's enqueue will dispatch b

	close(pol.release)
	<-b.done
	require.NoError(t, b.err)
	require.GreaterOrEqual(t, b.adm.QueueTime(), time.Duration(0),
		"b waited no time at all on the clock, yet its queue time is %v", b.adm.QueueTime())
	b.adm.Done()
	<-a.done
	require.NoError(t, a.err)
	a.adm.Done()
}

// TestReviewHugeSizesKeepCountersSane: ByteSize and Cost are whatever a
// client declares. In a band without byte or cost capacity, two requests of
// the largest int64 size used to wrap the band's counters around to
// negative values, so CapacitySnapshot reported -2 bytes queued. Contract
// (capacity.Snapshot, "each counter is exact"; "every sum of client-supplied
// numbers saturates or is refused; it never wraps"): each counts as
// MaxRequestBytes and MaxRequestCost, so both queue and every counter holds
// their exact sum. (A total that would pass the range of int64 all the same
// is refused: TestCounterRangeIsRefused.)
func TestReviewHugeSizesKeepCountersSane(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0}},
		Gate:  flowcontrol.MaxInFlight(0),
	})
	huge := flowcontrol.Request{Key: key("a", 0), ByteSize: math.MaxInt64, Cost: math.MaxInt64}
	x := submit(context.Background(), fc, huge)
	y := submit(context.Background(), fc, flowcontrol.Request{Key: key("b", 0), ByteSize: math.MaxInt64, Cost: math.MaxInt64})
	require.False(t, x.finished(), "the first was refused: %v", x.err)
	require.False(t, y.finished(), "the second was refused: %v", y.err)
	s, err := fc.CapacitySnapshot(0)
	require.NoError(t, err)
	require.Equal(t, int64(2), s.QueuedRequests)
	require.Equal(t, 2*flowcontrol.MaxRequestBytes, s.QueuedBytes)
	require.Equal(t, 2*flowcontrol.MaxRequestCost, s.QueuedCost)
	fs, err := fc.FlowSnapshot(0, "a")
	require.NoError(t, err)
	require.Equal(t, flowcontrol.MaxRequestBytes, fs.QueuedBytes)
	require.Equal(t, flowcontrol.MaxRequestCost, fs.QueuedCost)
	fc.Close()
	require.True(t, errors.Is(x.err, flowcontrol.ErrRejectedShuttingDown))
	require.True(t, errors.Is(y.err, flowcontrol.ErrRejectedShuttingDown))
	s, err = fc.CapacitySnapshot(0)
	require.NoError(t, err)
	require.Zero(t, s.QueuedRequests+s.QueuedBytes+s.QueuedCost, "%v", s)
}

// TestReviewDoneInsideCallbackDoesNotRecurse: a Submit callback may call
// back into the controller, and an event loop may keep millions of Submits
// waiting (Submit doc). But a callback that calls Done on its admission at
// once — a request that failed fast downstream — delivers the next
// dispatch from inside itself: Done → release → unlock → deliverAll →
// deliver → done → Done → ... so the stack grows by about six frames per
// waiting request, and a long enough queue ends in a fatal, unrecoverable
// stack overflow ("goroutine stack exceeds 1000000000-byte limit") of
// whatever goroutine called the first Done. The depth must stay bounded.
func TestReviewDoneInsideCallbackDoesNotRecurse(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0}},
		Gate:  flowcontrol.MaxInFlight(1),
	})
	h := hold(t, fc)
	const n = 2000
	var depths []int
	pcs := make([]uintptr, 64*n)
	for range n {
		fc.Submit(context.Background(), req("a", 0), func(a *flowcontrol.Admission, err error) {
			if err != nil {
				t.Error(err)
				return
			}
			depths = append(depths, runtime.Callers(0, pcs))
			a.Done()
		})
	}
	h.Done()
	require.Len(t, depths, n)
	require.Equal(t, 0, fc.InFlight())
	require.LessOrEqual(t, depths[n-1], depths[0]+32,
		"the %dth callback ran %d frames deeper than the first", n, depths[n-1]-depths[0])
}

// TestReviewReleasePanicStrandsNoWaiter: a Gate whose Release panics (after
// returning its slot) reaches the caller of Done with the lock released, and
// the request waiting for that slot starts within that Done all the same:
// release runs its dispatch in a defer.
func TestReviewReleasePanicStrandsNoWaiter(t *testing.T) {
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

// TestReviewDRRExtremeCostsAndWeights: deficit round robin with int64
// extremes — a fixed quantum of 1, weights of MaxInt64, costs of MaxInt64
// and of 1, and an EDF order that puts a huge head in front of a flow in
// the middle of its turn — serves every request, never hangs in Next or
// skipRounds, and leaves nothing queued.
func TestReviewDRRExtremeCostsAndWeights(t *testing.T) {
	for _, quantum := range []int64{0, 1, math.MaxInt64} {
		g := &switchGate{}
		g.set(0)
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{
				Priority: 0,
				Policy:   ordering.EDF(),
				Fairness: flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{
					Quantum: quantum,
					Weights: map[string]int64{"heavy": math.MaxInt64, "mid": 3},
				}),
			}},
			Gate: g,
		})
		var calls []*call
		add := func(id string, cost int64, ttl time.Duration) {
			calls = append(calls, submit(context.Background(), fc,
				flowcontrol.Request{Key: key(id, 0), Cost: cost, TTL: ttl}))
		}
		// Costs as large as the band's cost counter can hold together
		// (a larger sum is refused: TestReviewHugeSizesKeepCountersSane).
		const huge = math.MaxInt64 / 32
		for i := range 5 {
			add("heavy", huge-int64(i), 0)
			add("light", 1, 0)
			add("mid", huge/2, 0)
			add("one", int64(i+1), 0)
		}
		g.set(1)
		for i := 0; ; i++ {
			fc.Nudge()
			var running *call
			for _, c := range calls {
				if c.finished() && c.adm != nil {
					running = c
				}
			}
			if running == nil {
				break
			}
			if i == 3 {
				// A costly request with the earliest deadline becomes the
				// head of "one" in the middle of the drain.
				add("one", huge, time.Hour)
			}
			running.adm.Done()
			running.adm = nil
		}
		for _, c := range calls {
			require.True(t, c.finished(), "quantum %d: %s never served", quantum, c.req.Key.ID)
			require.NoError(t, c.err)
		}
		s, err := fc.CapacitySnapshot(0)
		require.NoError(t, err)
		require.Zero(t, s.QueuedRequests)
		require.Zero(t, fc.InFlight())
	}
}

// TestReviewReentrantCallbacksAndCloseUnderLoad: Submit callbacks that
// call back into the controller — Done at once, Done later from another
// goroutine, a new Submit from inside the callback, ProvisionBand, Nudge —
// while Close runs from another goroutine. Every Submit gets exactly one
// callback, no admission is left in flight, and the counters return to 0.
func TestReviewReentrantCallbacksAndCloseUnderLoad(t *testing.T) {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 5, RequestCapacity: bounded(6), Fairness: flowcontrol.RoundRobin()},
			{Priority: 0, RequestCapacity: bounded(8), CostCapacity: bounded(40),
				Fairness: flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{})},
		},
		RequestCapacity: bounded(12),
		DefaultTTL:      5 * time.Millisecond,
		Gate:            flowcontrol.MaxInFlight(2),
	})
	require.NoError(t, err)
	var (
		submitted, called atomic.Int64
		twice             atomic.Bool
		pending           sync.WaitGroup // callbacks still to come
		later             sync.WaitGroup // Done calls on other goroutines
	)
	var send func(n int)
	send = func(n int) {
		submitted.Add(1)
		pending.Add(1)
		ctx, cancel := context.WithCancel(context.Background())
		if n%5 == 0 {
			cancel()
		}
		var once atomic.Bool
		fc.Submit(ctx, flowcontrol.Request{Key: key("f"+strconv.Itoa(n%7), []int{5, 0, 3}[n%3]), Cost: int64(n % 9)},
			func(a *flowcontrol.Admission, err error) {
				defer pending.Done()
				defer cancel()
				called.Add(1)
				if !once.CompareAndSwap(false, true) {
					twice.Store(true)
				}
				if a != nil {
					if n%2 == 0 {
						a.Done()
						a.Done()
					} else {
						later.Go(a.Done)
					}
				}
				if n%11 == 0 {
					fc.Nudge()
				}
				if !errors.Is(err, flowcontrol.ErrRejectedShuttingDown) {
					send(n + 7)
				}
			})
	}
	for i := range 8 {
		go send(i)
	}
	for submitted.Load() < 3000 {
		runtime.Gosched()
	}
	_ = fc.ProvisionBand(flowcontrol.BandConfig{Priority: 3})
	for submitted.Load() < 6000 {
		runtime.Gosched()
	}
	fc.Close()
	pending.Wait()
	later.Wait()
	require.False(t, twice.Load(), "a done function ran twice")
	require.Equal(t, submitted.Load(), called.Load())
	require.Equal(t, 0, fc.InFlight())
	for _, p := range []int{5, 3, 0} {
		s, err := fc.CapacitySnapshot(p)
		require.NoError(t, err)
		require.Zero(t, s.QueuedRequests+s.QueuedBytes+s.QueuedCost, "band %d: %+v", p, s)
	}
}

// TestReviewObserverPanicOnQueuedRejectionStillCallsDone: Submit promises
// that done is called exactly once; the only exception documented is an
// Observer that panics on a dispatch (the admission is released instead).
// When the Observer panics on the expiry of a queued Submit, deliver has
// already recycled the waiter and done is never called: the submitter
// never learns its request ended, and the panic surfaces on the clock's
// timer goroutine instead.
func TestReviewObserverPanicOnQueuedRejectionStillCallsDone(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: time.Second}},
		Gate:  flowcontrol.MaxInFlight(0),
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
