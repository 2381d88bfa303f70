package flowcontrol_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// TestDoneInsideCallbackDoesNotRecurse: a Submit callback may call
// back into the controller, and an event loop may keep millions of Submits
// waiting (Submit doc). But a callback that calls Done on its admission at
// once — a request that failed fast downstream — delivers the next
// dispatch from inside itself: Done → release → unlock → deliverAll →
// deliver → done → Done → ... so the stack grows by about six frames per
// waiting request, and a long enough queue ends in a fatal, unrecoverable
// stack overflow ("goroutine stack exceeds 1000000000-byte limit") of
// whatever goroutine called the first Done. The depth must stay bounded.
func TestDoneInsideCallbackDoesNotRecurse(t *testing.T) {
	fc, h := heldSlot(t)
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

// TestReentrantCallbacksAndCloseUnderLoad: Submit callbacks that
// call back into the controller — Done at once, Done later from another
// goroutine, a new Submit from inside the callback, ProvisionBand, Nudge —
// while Close runs from another goroutine. Every Submit gets exactly one
// callback, no admission is left in flight, and the counters return to 0.
func TestReentrantCallbacksAndCloseUnderLoad(t *testing.T) {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 5, RequestCapacity: bounded(6), Fairness: flowcontrol.RoundRobin()},
			{Priority: 0, RequestCapacity: bounded(8), CostCapacity: bounded(40),
				Fairness: flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{})},
		},
		RequestCapacity: bounded(12),
		DefaultTTL:      5 * time.Millisecond,
		Gate:            gate.MaxInFlight(2),
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
