package flowcontrol_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/ordering"
)

func TestImmediateDispatchWithoutGate(t *testing.T) {
	rec := &recorder{}
	fc := mustNew(t, flowcontrol.Config{
		Bands:    []flowcontrol.BandConfig{{Priority: 0}},
		Observer: rec.observe,
	})
	var adms []*flowcontrol.Admission
	for i := range 100 {
		a, err := fc.EnqueueAndWait(context.Background(), req(fmt.Sprint(i), 0))
		if err != nil {
			t.Fatal(err)
		}
		if a.QueueTime() != 0 || a.Effective() != key(fmt.Sprint(i), 0) || a.Requested() != key(fmt.Sprint(i), 0) {
			t.Fatalf("admission %d: requested %v effective %v queue time %v", i, a.Requested(), a.Effective(), a.QueueTime())
		}
		adms = append(adms, a)
	}
	if got := fc.InFlight(); got != 100 {
		t.Fatalf("InFlight = %d, want 100", got)
	}
	for _, a := range adms {
		a.Done()
	}
	if got := fc.InFlight(); got != 0 {
		t.Fatalf("InFlight after Done = %d, want 0", got)
	}
	if got := rec.count(flowcontrol.OutcomeDispatched); got != 100 {
		t.Fatalf("observer saw %d dispatches, want 100", got)
	}
}

func TestDoneIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0}},
			Gate:  flowcontrol.MaxInFlight(1),
		})
		a := hold(t, fc)
		w1 := start(t.Context(), fc, req("w1", 0))
		synctest.Wait()
		w2 := start(t.Context(), fc, req("w2", 0))
		synctest.Wait()
		a.Done()
		a.Done() // must not free a second slot
		synctest.Wait()
		if !w1.finished() || w2.finished() {
			t.Fatalf("after a double Done: w1 finished %v, w2 finished %v; want only w1", w1.finished(), w2.finished())
		}
		if got := fc.InFlight(); got != 1 {
			t.Fatalf("InFlight = %d, want 1", got)
		}
		w1.adm.Done()
		synctest.Wait()
		w2.adm.Done()
		w2.adm.Done()
		if got := fc.InFlight(); got != 0 {
			t.Fatalf("InFlight = %d, want 0", got)
		}
	})
}

func TestQueuedRequestDispatchesOnDoneWithQueueTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0}},
			Gate:  flowcontrol.MaxInFlight(1),
		})
		h := hold(t, fc)
		w := start(t.Context(), fc, req("w", 0))
		synctest.Wait()
		if w.finished() || queued(t, fc, 0) != 1 {
			t.Fatalf("waiter finished %v, queued %d; want still queued", w.finished(), queued(t, fc, 0))
		}
		time.Sleep(1500 * time.Millisecond)
		h.Done()
		synctest.Wait()
		if w.outcome(t) != flowcontrol.OutcomeDispatched {
			t.Fatalf("outcome %v", w.err)
		}
		if got := w.adm.QueueTime(); got != 1500*time.Millisecond {
			t.Fatalf("QueueTime = %v, want 1.5s", got)
		}
		if queued(t, fc, 0) != 0 {
			t.Fatal("band not empty after dispatch")
		}
		w.adm.Done()
	})
}

// TestTTLExpiresAtExactlyTheTTL: expiry happens at the TTL on the fake clock,
// not at a sweep: 1ns before it the request still waits.
func TestTTLExpiresAtExactlyTheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 3 * time.Second
		rec := &recorder{}
		fc := mustNew(t, flowcontrol.Config{
			Bands:    []flowcontrol.BandConfig{{Priority: 0, TTL: ttl}},
			Gate:     flowcontrol.MaxInFlight(0),
			Observer: rec.observe,
		})
		w := start(t.Context(), fc, flowcontrol.Request{Key: key("w", 0), ByteSize: 7})
		synctest.Wait()
		time.Sleep(ttl - time.Nanosecond)
		synctest.Wait()
		if w.finished() {
			t.Fatalf("finished 1ns before its TTL: %v", w.err)
		}
		if s, _ := fc.CapacitySnapshot(0); s.QueuedRequests != 1 || s.QueuedBytes != 7 {
			t.Fatalf("snapshot before expiry: %v", s)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !w.finished() {
			t.Fatal("not finished at its TTL")
		}
		rej := w.rejection(t)
		if rej.Outcome != flowcontrol.OutcomeRejectedTTLExpired || !errors.Is(w.err, flowcontrol.ErrRejectedTTLExpired) {
			t.Fatalf("outcome %v, error %v; want expired", rej.Outcome, w.err)
		}
		if errors.Is(w.err, context.DeadlineExceeded) {
			t.Fatalf("band TTL expiry matches context.DeadlineExceeded: %v", w.err)
		}
		if rej.QueueTime != ttl || rej.RetryAfter != 0 {
			t.Fatalf("QueueTime %v RetryAfter %v; want %v and none", rej.QueueTime, rej.RetryAfter, ttl)
		}
		if got := rej.Outcome.String(); got != "rejected-ttl-expired" {
			t.Fatalf("DroppedReason = %q", got)
		}
		if got := rej.Outcome.HTTPStatus(); got != http.StatusTooManyRequests {
			t.Fatalf("HTTPStatus = %d", got)
		}
		if s, _ := fc.CapacitySnapshot(0); s.QueuedRequests != 0 || s.QueuedBytes != 0 {
			t.Fatalf("snapshot after expiry: %v", s)
		}
		if rec.count(flowcontrol.OutcomeRejectedTTLExpired) != 1 {
			t.Fatalf("observer events: %v", rec.events)
		}
	})
}

// TestTTLIsTheSmallestOfBandDefaultOwnAndDeadline checks that each of the
// four sources decides the expiry when it is the smallest, and that a context
// deadline is an expiry matching context.DeadlineExceeded.
func TestTTLIsTheSmallestOfBandDefaultOwnAndDeadline(t *testing.T) {
	cases := []struct {
		name                      string
		band, dflt, own, deadline time.Duration // 0 = unset
		want                      time.Duration
		wantDeadlineExceededError bool
	}{
		{name: "band", band: 2 * time.Second, dflt: 5 * time.Second, own: 7 * time.Second, deadline: 9 * time.Second, want: 2 * time.Second},
		{name: "default", band: 5 * time.Second, dflt: 2 * time.Second, own: 7 * time.Second, deadline: 9 * time.Second, want: 2 * time.Second},
		{name: "own", band: 5 * time.Second, dflt: 7 * time.Second, own: 2 * time.Second, deadline: 9 * time.Second, want: 2 * time.Second},
		{name: "deadline", band: 5 * time.Second, dflt: 7 * time.Second, own: 9 * time.Second, deadline: 2 * time.Second, want: 2 * time.Second, wantDeadlineExceededError: true},
		{name: "only-own", own: 4 * time.Second, want: 4 * time.Second},
		{name: "only-deadline", deadline: 4 * time.Second, want: 4 * time.Second, wantDeadlineExceededError: true},
		{name: "deadline-ties-own", own: 3 * time.Second, deadline: 3 * time.Second, want: 3 * time.Second, wantDeadlineExceededError: true},
		{name: "negative-own-is-none", band: 6 * time.Second, own: -time.Second, want: 6 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fc := mustNew(t, flowcontrol.Config{
					Bands:      []flowcontrol.BandConfig{{Priority: 0, TTL: tc.band}},
					DefaultTTL: tc.dflt,
					Gate:       flowcontrol.MaxInFlight(0),
				})
				ctx := t.Context()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				begin := time.Now()
				w := start(ctx, fc, flowcontrol.Request{Key: key("w", 0), TTL: tc.own})
				<-w.done
				if got := time.Since(begin); got != tc.want {
					t.Fatalf("expired after %v, want %v", got, tc.want)
				}
				rej := w.rejection(t)
				if rej.Outcome != flowcontrol.OutcomeRejectedTTLExpired || rej.QueueTime != tc.want {
					t.Fatalf("outcome %v after %v queued: %v", rej.Outcome, rej.QueueTime, w.err)
				}
				if !errors.Is(w.err, flowcontrol.ErrRejectedTTLExpired) || errors.Is(w.err, flowcontrol.ErrRejectedContextCancelled) {
					t.Fatalf("error %v: want ErrRejectedTTLExpired only", w.err)
				}
				if got := errors.Is(w.err, context.DeadlineExceeded); got != tc.wantDeadlineExceededError {
					t.Fatalf("errors.Is(err, context.DeadlineExceeded) = %v, want %v (err %v)", got, tc.wantDeadlineExceededError, w.err)
				}
			})
		})
	}
}

func TestContextCancelWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		fc := mustNew(t, flowcontrol.Config{
			Bands:    []flowcontrol.BandConfig{{Priority: 0}},
			Gate:     flowcontrol.MaxInFlight(0),
			Observer: rec.observe,
		})
		ctx, cancel := context.WithCancel(t.Context())
		w := start(ctx, fc, req("w", 0))
		time.Sleep(time.Second)
		cancel()
		synctest.Wait()
		rej := w.rejection(t)
		if rej.Outcome != flowcontrol.OutcomeRejectedContextCancelled || rej.QueueTime != time.Second {
			t.Fatalf("outcome %v queue time %v", rej.Outcome, rej.QueueTime)
		}
		if !errors.Is(w.err, flowcontrol.ErrRejectedContextCancelled) || !errors.Is(w.err, context.Canceled) {
			t.Fatalf("error %v does not match ErrRejectedContextCancelled and context.Canceled", w.err)
		}
		if rej.Outcome.String() != "rejected-context-cancelled" || rej.Outcome.HTTPStatus() != http.StatusServiceUnavailable {
			t.Fatalf("reason %q status %d", rej.Outcome.String(), rej.Outcome.HTTPStatus())
		}
		if rej.RetryAfter != 0 {
			t.Fatalf("RetryAfter on a cancellation: %v", rej.RetryAfter)
		}
		if rec.count(flowcontrol.OutcomeRejectedContextCancelled) != 1 {
			t.Fatalf("events %v", rec.events)
		}
	})
}

func TestContextCauseIsMatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0}},
			Gate:  flowcontrol.MaxInFlight(0),
		})
		errClientGone := errors.New("client went away")
		ctx, cancel := context.WithCancelCause(t.Context())
		w := start(ctx, fc, req("w", 0))
		synctest.Wait()
		cancel(errClientGone)
		synctest.Wait()
		if !errors.Is(w.err, errClientGone) || !errors.Is(w.err, context.Canceled) || !errors.Is(w.err, flowcontrol.ErrRejectedContextCancelled) {
			t.Fatalf("error %v should match the cause, context.Canceled and ErrRejectedContextCancelled", w.err)
		}
		if !strings.Contains(w.err.Error(), "client went away") {
			t.Fatalf("error text %q lacks the cause", w.err)
		}
	})
}

// TestCancelledQueuedRequestLeavesSnapshotImmediately: no zombie counts
// against capacity or headroom once its context is cancelled.
func TestCancelledQueuedRequestLeavesSnapshotImmediately(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands:          []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(2), ByteCapacity: bounded(100)}},
			Gate:           flowcontrol.MaxInFlight(0),
			NoDisplacement: true,
		})
		ctx, cancel := context.WithCancel(t.Context())
		a := start(ctx, fc, flowcontrol.Request{Key: key("a", 0), ByteSize: 60})
		b := start(t.Context(), fc, flowcontrol.Request{Key: key("b", 0), ByteSize: 40})
		synctest.Wait()
		want := capacity.Snapshot{Priority: 0, QueuedRequests: 2, QueuedBytes: 100, QueuedCost: 2, RequestCapacity: bounded(2), ByteCapacity: bounded(100)}
		if s, _ := fc.CapacitySnapshot(0); s != want {
			t.Fatalf("snapshot %v, want %v", s, want)
		}
		// Full: a third request is refused.
		if _, err := fc.EnqueueAndWait(t.Context(), req("c", 0)); !errors.Is(err, flowcontrol.ErrRejectedSaturated) {
			t.Fatalf("third request: %v, want saturated", err)
		}
		cancel()
		synctest.Wait() // the cancelled waiter has run; no clock has moved
		want.QueuedRequests, want.QueuedBytes, want.QueuedCost = 1, 40, 1
		if s, _ := fc.CapacitySnapshot(0); s != want {
			t.Fatalf("snapshot after cancel %v, want %v", s, want)
		}
		if a.outcome(t) != flowcontrol.OutcomeRejectedContextCancelled || b.finished() {
			t.Fatalf("a %v, b finished %v", a.err, b.finished())
		}
		// The room it left is usable at once.
		c := start(t.Context(), fc, flowcontrol.Request{Key: key("c", 0), ByteSize: 60})
		synctest.Wait()
		if c.finished() {
			t.Fatalf("c should queue in the freed room: %v", c.err)
		}
	})
}

func TestContextAlreadyDoneIsRefusedAtOnce(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a, err := fc.EnqueueAndWait(ctx, req("x", 0))
	if a != nil || !errors.Is(err, flowcontrol.ErrRejectedContextCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: admission %v error %v", a, err)
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	a, err = fc.EnqueueAndWait(dctx, req("y", 0))
	if a != nil || !errors.Is(err, flowcontrol.ErrRejectedTTLExpired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired context: admission %v error %v", a, err)
	}
	if fc.InFlight() != 0 {
		t.Fatal("a refused request holds a slot")
	}
}

// TestGrantBeforeCancelWins: a grant and a cancellation that race are settled
// under the lock. When the grant comes first the caller gets the admission,
// even though its context is done by the time it runs, and it holds the slot.
func TestGrantBeforeCancelWins(t *testing.T) {
	for i := range 50 { // the waiter's select sees both channels ready; vary its choice
		synctest.Test(t, func(t *testing.T) {
			fc := mustNew(t, flowcontrol.Config{
				Bands: []flowcontrol.BandConfig{{Priority: 0}},
				Gate:  flowcontrol.MaxInFlight(1),
			})
			h := hold(t, fc)
			ctx, cancel := context.WithCancel(t.Context())
			w := start(ctx, fc, req("w", 0))
			synctest.Wait()
			h.Done() // grants w under the lock ...
			cancel() // ... before w's goroutine has run
			synctest.Wait()
			if w.outcome(t) != flowcontrol.OutcomeDispatched {
				t.Fatalf("run %d: granted request ended %v", i, w.err)
			}
			if fc.InFlight() != 1 {
				t.Fatalf("run %d: InFlight %d, want 1", i, fc.InFlight())
			}
			w.adm.Done()
		})
	}
}

// TestGrantAtTheTTLInstant: a slot freed at exactly a waiter's TTL races its
// expiry. Either outcome is allowed, but exactly one happens, and an expired
// waiter leaves no slot taken.
func TestGrantAtTheTTLInstant(t *testing.T) {
	seen := map[flowcontrol.Outcome]int{}
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			fc := mustNew(t, flowcontrol.Config{
				Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: time.Second}},
				Gate:  flowcontrol.MaxInFlight(1),
			})
			h := hold(t, fc)
			w := start(t.Context(), fc, req("w", 0))
			time.Sleep(time.Second) // wakes at the same instant as w's timer
			h.Done()
			synctest.Wait()
			o := w.outcome(t)
			seen[o]++
			switch o {
			case flowcontrol.OutcomeDispatched:
				if fc.InFlight() != 1 {
					t.Fatalf("dispatched, InFlight %d", fc.InFlight())
				}
				w.adm.Done()
			case flowcontrol.OutcomeRejectedTTLExpired:
				if fc.InFlight() != 0 {
					t.Fatalf("expired, InFlight %d", fc.InFlight())
				}
			default:
				t.Fatalf("outcome %v", o)
			}
			if fc.InFlight() != 0 || queued(t, fc, 0) != 0 {
				t.Fatalf("InFlight %d queued %d at the end", fc.InFlight(), queued(t, fc, 0))
			}
		})
	}
	t.Logf("outcomes at the TTL instant: %v", seen)
}

// TestFallbackKeepsTheEffectiveBand: asked 5 with band 5 missing → effective
// 0, requested 5; provisioning band 5 afterwards changes neither the
// admission nor the band the request was counted in.
func TestFallbackKeepsTheEffectiveBand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		fc := mustNew(t, flowcontrol.Config{
			Bands:    []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(10)}},
			Gate:     flowcontrol.MaxInFlight(1),
			Observer: rec.observe,
		})
		h := hold(t, fc)
		w := start(t.Context(), fc, req("asks-5", 5))
		synctest.Wait()
		if _, err := fc.CapacitySnapshot(5); !errors.Is(err, capacity.ErrBandNotFound) {
			t.Fatalf("CapacitySnapshot(5) before provisioning: %v", err)
		}
		if got := queued(t, fc, 0); got != 1 {
			t.Fatalf("band 0 holds %d, want the fallen-back request", got)
		}
		if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: 5, RequestCapacity: bounded(3)}); err != nil {
			t.Fatal(err)
		}
		if s, err := fc.CapacitySnapshot(5); err != nil || s.QueuedRequests != 0 || s.RequestCapacity != bounded(3) {
			t.Fatalf("band 5 after provisioning: %v %v", s, err)
		}
		if got := queued(t, fc, 0); got != 1 {
			t.Fatalf("band 0 holds %d after provisioning band 5, want 1", got)
		}
		h.Done()
		synctest.Wait()
		if w.outcome(t) != flowcontrol.OutcomeDispatched {
			t.Fatal(w.err)
		}
		if w.adm.Requested() != key("asks-5", 5) || w.adm.Effective() != key("asks-5", 0) {
			t.Fatalf("requested %v effective %v; want 5 and 0", w.adm.Requested(), w.adm.Effective())
		}
		ev := rec.events[len(rec.events)-1]
		if ev.Requested.Priority != 5 || ev.Effective.Priority != 0 || ev.Outcome != flowcontrol.OutcomeDispatched {
			t.Fatalf("event %+v", ev)
		}
		w.adm.Done()
		// A new request for 5 now uses band 5.
		a, err := fc.EnqueueAndWait(t.Context(), req("later", 5))
		if err != nil || a.Effective().Priority != 5 {
			t.Fatalf("after provisioning: %v %v", a, err)
		}
		a.Done()
	})
}

func TestFallbackToConfiguredPriority(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
		FallbackPriority: -1,
	})
	for _, p := range []int{7, 0, 100, -50} {
		a, err := fc.EnqueueAndWait(context.Background(), req("x", p))
		if err != nil || a.Effective().Priority != -1 || a.Requested().Priority != p {
			t.Fatalf("priority %d: %v %v", p, a, err)
		}
		a.Done()
	}
	a, err := fc.EnqueueAndWait(context.Background(), req("x", 10))
	if err != nil || a.Effective().Priority != 10 {
		t.Fatalf("provisioned band: %v %v", a, err)
	}
	a.Done()
}

// TestNeverPromote: sheddable traffic stays sheddable — a negative request
// goes to the nearest band at or below it, or is rejected.
func TestNeverPromote(t *testing.T) {
	rec := &recorder{}
	fc := mustNew(t, flowcontrol.Config{
		Bands:        []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}, {Priority: -5}},
		NeverPromote: true,
		Observer:     rec.observe,
	})
	for _, tc := range []struct{ asked, want int }{{-3, -5}, {-5, -5}, {5, 0}, {0, 0}, {50, 10}} {
		a, err := fc.EnqueueAndWait(context.Background(), req("x", tc.asked))
		if err != nil || a.Effective().Priority != tc.want {
			t.Fatalf("asked %d: admission %v error %v, want band %d", tc.asked, a, err, tc.want)
		}
		a.Done()
	}
	a, err := fc.EnqueueAndWait(context.Background(), req("shed", -10))
	var rej *flowcontrol.RejectionError
	if a != nil || !errors.As(err, &rej) || !errors.Is(err, flowcontrol.ErrRejectedSaturated) {
		t.Fatalf("asked -10: admission %v error %v, want a capacity rejection", a, err)
	}
	if rej.Outcome != flowcontrol.OutcomeRejectedSaturated || rej.Effective != rej.Requested || rej.RetryAfter != 0 {
		t.Fatalf("rejection %+v: want capacity, effective = requested, no Retry-After", rej)
	}
	if !strings.Contains(err.Error(), "no band at or below priority -10") {
		t.Fatalf("error text %q", err)
	}
	ev := rec.events[len(rec.events)-1]
	if ev.Outcome != flowcontrol.OutcomeRejectedSaturated || ev.Effective.Priority != -10 {
		t.Fatalf("event %+v", ev)
	}
}

// TestStrictPriorityAcrossThreeBands: with one slot, every waiting request of
// a higher band goes before any of a lower band, whatever the arrival order.
func TestStrictPriorityAcrossThreeBands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: -1}, {Priority: 0}, {Priority: 5}},
			Gate:  flowcontrol.MaxInFlight(1),
		})
		h := hold(t, fc)
		var calls []*call
		for i, p := range []int{-1, 0, 5, -1, 0, 5, 0} {
			calls = append(calls, start(t.Context(), fc, req(fmt.Sprintf("%d:%d", i, p), p)))
			synctest.Wait() // fix the arrival order
		}
		order := ids(dispatchOrder(t, h, calls))
		want := []string{"2:5", "5:5", "1:0", "4:0", "6:0", "0:-1", "3:-1"}
		if fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("dispatch order %v, want %v", order, want)
		}
	})
}

// TestStrictPriorityHoldsLowerBandsWhileHigherIsRefused: a gate that refuses
// band 5 but would take band 0 still holds band 0 back; once the band-5
// waiter is cancelled, band 0 dispatches at once (cancellation is an event).
func TestStrictPriorityHoldsLowerBandsWhileHigherIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := &switchGate{}
		gate.set(10, 5)
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 5}},
			Gate:  gate,
		})
		ctx, cancel := context.WithCancel(t.Context())
		high := start(ctx, fc, req("high", 5))
		synctest.Wait()
		low := start(t.Context(), fc, req("low", 0))
		synctest.Wait()
		if high.finished() || low.finished() {
			t.Fatalf("high finished %v, low finished %v; want both waiting", high.finished(), low.finished())
		}
		fc.Nudge()
		synctest.Wait()
		if low.finished() {
			t.Fatal("low overtook a waiting higher band")
		}
		cancel()
		synctest.Wait()
		if high.outcome(t) != flowcontrol.OutcomeRejectedContextCancelled || low.outcome(t) != flowcontrol.OutcomeDispatched {
			t.Fatalf("high %v, low %v", high.err, low.err)
		}
		low.adm.Done()
	})
}

func TestNudgeDispatchesWhenAnExternalGateOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := &switchGate{}
		fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate})
		w1 := start(t.Context(), fc, req("w1", 0))
		synctest.Wait()
		w2 := start(t.Context(), fc, req("w2", 0))
		synctest.Wait()
		gate.set(1)
		synctest.Wait()
		if w1.finished() || w2.finished() {
			t.Fatal("dispatched without an event")
		}
		fc.Nudge()
		synctest.Wait()
		if !w1.finished() || w2.finished() {
			t.Fatalf("after Nudge: w1 %v w2 %v; want w1 only (FCFS)", w1.finished(), w2.finished())
		}
		gate.set(2)
		fc.Nudge()
		synctest.Wait()
		if !w2.finished() {
			t.Fatal("w2 not dispatched by the second Nudge")
		}
		w1.adm.Done()
		w2.adm.Done()
	})
}

// TestSLODeadlineOrderEndToEnd: a band running the slo-deadline policy
// dispatches by received time + x-llm-d-slo-ttft-ms, requests without a valid
// SLO last in received order.
func TestSLODeadlineOrderEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, Policy: ordering.SLODeadline()}},
			Gate:  flowcontrol.MaxInFlight(1),
		})
		h := hold(t, fc)
		t0 := time.Now()
		type spec struct {
			id       string
			received time.Duration // after t0
			slo      string        // header value; "" = absent
		}
		specs := []spec{
			{"no-slo-early", 0, ""},
			{"slo-500", 0, "500"},
			{"slo-100-late", 300 * time.Millisecond, "100"}, // deadline 400ms
			{"slo-300", 0, "300"},
			{"bad-slo", 0, "soon"},
			{"alias-200", 0, ""},
			{"no-slo-later", 50 * time.Millisecond, ""},
		}
		var calls []*call
		for _, s := range specs {
			hdr := http.Header{}
			if s.slo != "" {
				hdr.Set("x-llm-d-slo-ttft-ms", s.slo)
			}
			if s.id == "alias-200" {
				hdr["x-slo-ttft-ms"] = []string{"200"} // deprecated alias, non-canonical key
			}
			calls = append(calls, start(t.Context(), fc, flowcontrol.Request{
				Key: key(s.id, 0), Header: hdr, ReceivedTime: t0.Add(s.received),
			}))
			synctest.Wait()
		}
		order := ids(dispatchOrder(t, h, calls))
		want := []string{"alias-200", "slo-300", "slo-100-late", "slo-500", "no-slo-early", "bad-slo", "no-slo-later"}
		if fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("order %v, want %v", order, want)
		}
	})
}

func TestEDFBandUsesTheEffectiveTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands:      []flowcontrol.BandConfig{{Priority: 0, Policy: ordering.EDF()}},
			DefaultTTL: time.Hour,
			Gate:       flowcontrol.MaxInFlight(1),
		})
		h := hold(t, fc)
		long := start(t.Context(), fc, flowcontrol.Request{Key: key("long", 0)}) // default TTL: 1h
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // deadline sets its TTL
		defer cancel()
		short := start(ctx, fc, flowcontrol.Request{Key: key("short", 0)})
		synctest.Wait()
		h.Done()
		synctest.Wait()
		if !short.finished() || long.finished() {
			t.Fatalf("EDF: short finished %v, long finished %v", short.finished(), long.finished())
		}
		short.adm.Done()
		synctest.Wait()
		long.adm.Done()
	})
}

// TestCapacityRejections covers band and global limits on requests and bytes.
// None of these bands has dispatched anything, so there is no measured rate
// and no Retry-After.
func TestCapacityRejections(t *testing.T) {
	cases := []struct {
		name    string
		cfg     flowcontrol.Config
		fill    []int64 // byte sizes queued first, in band 0
		size    int64
		message string
	}{
		{"band-requests", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(2)}}},
			[]int64{1, 1}, 1, "band 0 request capacity 2 reached"},
		{"band-bytes", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, ByteCapacity: bounded(100)}}},
			[]int64{60, 30}, 11, "band 0 byte capacity 100 exceeded"},
		{"global-requests", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 1}}, RequestCapacity: bounded(2)},
			[]int64{1, 1}, 1, "global request capacity 2 reached"},
		{"global-bytes", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 1}}, ByteCapacity: bounded(50)},
			[]int64{20, 20}, 11, "global byte capacity 50 exceeded"},
		{"band-closed-by-zero-capacity", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(0)}}},
			nil, 1, "band 0 request capacity 0 reached"},
		{"request-larger-than-band-bytes", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, ByteCapacity: bounded(10)}}},
			nil, 11, "band 0 byte capacity 10 exceeded"},
		// A size near math.MaxInt64 (a client may declare such a
		// Content-Length) must not wrap the sum around and fit.
		{"band-bytes-huge-request", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, ByteCapacity: bounded(100)}}},
			[]int64{10}, math.MaxInt64, "band 0 byte capacity 100 exceeded"},
		{"global-bytes-huge-request", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 1}}, ByteCapacity: bounded(50)},
			[]int64{10}, math.MaxInt64, "global byte capacity 50 exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tc.cfg.Gate = flowcontrol.MaxInFlight(0)
				tc.cfg.NoDisplacement = true // fair admission has its own tests
				rec := &recorder{}
				tc.cfg.Observer = rec.observe
				fc := mustNew(t, tc.cfg)
				for i, size := range tc.fill {
					start(t.Context(), fc, flowcontrol.Request{Key: key(fmt.Sprint(i), 0), ByteSize: size})
				}
				synctest.Wait()
				// The fill is in band 0; in the global cases the request
				// that overflows asks for band 1: the limit spans bands.
				p := 0
				if strings.HasPrefix(tc.name, "global") {
					p = 1
				}
				before, _ := fc.CapacitySnapshot(p)
				a, err := fc.EnqueueAndWait(t.Context(), flowcontrol.Request{Key: key("over", p), ByteSize: tc.size})
				var rej *flowcontrol.RejectionError
				if a != nil || !errors.As(err, &rej) {
					t.Fatalf("admission %v error %v, want a rejection", a, err)
				}
				if rej.Outcome != flowcontrol.OutcomeRejectedSaturated || !errors.Is(err, flowcontrol.ErrRejectedSaturated) {
					t.Fatalf("outcome %v error %v", rej.Outcome, err)
				}
				if rej.Outcome.String() != "rejected-saturated" || rej.Outcome.HTTPStatus() != http.StatusTooManyRequests {
					t.Fatalf("reason %q status %d", rej.Outcome.String(), rej.Outcome.HTTPStatus())
				}
				if !strings.Contains(err.Error(), tc.message) {
					t.Fatalf("error %q lacks %q", err, tc.message)
				}
				if rej.RetryAfter != 0 {
					t.Fatalf("RetryAfter %v without a measured rate", rej.RetryAfter)
				}
				if after, _ := fc.CapacitySnapshot(p); after != before {
					t.Fatalf("a rejected request changed the band: %v → %v", before, after)
				}
				if rec.count(flowcontrol.OutcomeRejectedSaturated) != 1 {
					t.Fatalf("events %v", rec.events)
				}
			})
		})
	}
}

func TestCapacityAllowsExactlyTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(3), ByteCapacity: bounded(30)}},
			Gate:  flowcontrol.MaxInFlight(0),
		})
		for i := range 3 {
			start(t.Context(), fc, flowcontrol.Request{Key: key(fmt.Sprint(i), 0), ByteSize: 10})
		}
		synctest.Wait()
		if s, _ := fc.CapacitySnapshot(0); s.QueuedRequests != 3 || s.QueuedBytes != 30 {
			t.Fatalf("bands at their bounds should hold 3 requests / 30 bytes: %v", s)
		}
	})
}

func TestNegativeByteSizeCountsAsZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, ByteCapacity: bounded(0)}},
			Gate:  flowcontrol.MaxInFlight(0),
		})
		w := start(t.Context(), fc, flowcontrol.Request{Key: key("unknown-length", 0), ByteSize: -1})
		synctest.Wait()
		if w.finished() {
			t.Fatalf("a size of -1 should count as 0 and fit: %v", w.err)
		}
		if s, _ := fc.CapacitySnapshot(0); s.QueuedBytes != 0 || s.QueuedRequests != 1 {
			t.Fatalf("snapshot %v", s)
		}
	})
}

// TestRetryAfterOnlyOnCapacityRejections measures a band's dispatch rate on
// the fake clock and checks the projection: whole seconds, rounded up, at
// most 30; and that no other outcome carries it.
func TestRetryAfterOnlyOnCapacityRejections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(5), TTL: time.Hour}},
			Gate:  flowcontrol.MaxInFlight(1),
		})
		// Dispatch two requests per second for 10 seconds: the holder of
		// the slot is released every 500ms and the next waiter starts.
		h := hold(t, fc)
		var last *call
		for range 20 {
			last = start(t.Context(), fc, req("steady", 0))
			synctest.Wait()
			time.Sleep(500 * time.Millisecond)
			h.Done()
			synctest.Wait()
			h = last.adm
		}
		// Fill the band: 5 waiters behind the holder.
		var waiting []*call
		for i := range 5 {
			waiting = append(waiting, start(t.Context(), fc, req(fmt.Sprint("w", i), 0)))
		}
		synctest.Wait()
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
		// Expiry and cancellation carry none.
		time.Sleep(time.Hour)
		synctest.Wait()
		for _, w := range waiting {
			if r := w.rejection(t); r.Outcome != flowcontrol.OutcomeRejectedTTLExpired || r.RetryAfter != 0 {
				t.Fatalf("expired waiter: %v RetryAfter %v", r.Outcome, r.RetryAfter)
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
		for i := range 5 {
			start(t.Context(), fc, req(fmt.Sprint("again", i), 0))
		}
		synctest.Wait()
		_, err := fc.EnqueueAndWait(t.Context(), req("over", 0))
		if !errors.As(err, &rej) || rej.RetryAfter != 30*time.Second {
			t.Fatalf("after a stuck hour: %v, want RetryAfter 30s", err)
		}
		h.Done()
	})
}

func TestCloseRejectsQueuedAndLaterRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		fc, err := flowcontrol.New(flowcontrol.Config{
			Bands:    []flowcontrol.BandConfig{{Priority: 0}, {Priority: 3, Policy: ordering.EDF()}},
			Gate:     flowcontrol.MaxInFlight(1),
			Observer: rec.observe,
		})
		if err != nil {
			t.Fatal(err)
		}
		h := hold(t, fc)
		var calls []*call
		for i := range 6 {
			calls = append(calls, start(t.Context(), fc, flowcontrol.Request{Key: key(fmt.Sprint(i), 3*(i%2)), ByteSize: 5, TTL: time.Minute}))
		}
		synctest.Wait()
		time.Sleep(2 * time.Second)
		fc.Close()
		// Close returned: every queued call has finished its work, its
		// observer call included. (The goroutines that made the calls may
		// not have run on yet; synctest.Wait lets them.)
		if got := rec.count(flowcontrol.OutcomeRejectedShuttingDown); got != 6 {
			t.Fatalf("observer saw %d shutdowns when Close returned, want 6", got)
		}
		synctest.Wait()
		for _, c := range calls {
			if !c.finished() {
				t.Fatal("a queued call never returned after Close")
			}
			rej := c.rejection(t)
			if rej.Outcome != flowcontrol.OutcomeRejectedShuttingDown || !errors.Is(c.err, flowcontrol.ErrRejectedShuttingDown) || rej.QueueTime != 2*time.Second {
				t.Fatalf("outcome %v error %v queue time %v", rej.Outcome, c.err, rej.QueueTime)
			}
			if rej.Outcome.String() != "rejected-shutting-down" || rej.Outcome.HTTPStatus() != http.StatusServiceUnavailable {
				t.Fatalf("reason %q status %d", rej.Outcome.String(), rej.Outcome.HTTPStatus())
			}
		}
		if got := rec.count(flowcontrol.OutcomeRejectedShuttingDown); got != 6 {
			t.Fatalf("observer saw %d shutdowns, want 6", got)
		}
		for _, p := range []int{0, 3} {
			if s, _ := fc.CapacitySnapshot(p); s.QueuedRequests != 0 || s.QueuedBytes != 0 {
				t.Fatalf("band %d after Close: %v", p, s)
			}
		}
		// Later calls fail at once, whatever their band.
		for _, p := range []int{0, 3, 42} {
			a, err := fc.EnqueueAndWait(t.Context(), req("late", p))
			if a != nil || !errors.Is(err, flowcontrol.ErrRejectedShuttingDown) {
				t.Fatalf("after Close: %v %v", a, err)
			}
		}
		if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: 9}); !errors.Is(err, flowcontrol.ErrRejectedShuttingDown) {
			t.Fatalf("ProvisionBand after Close: %v", err)
		}
		// The admission granted before Close stays valid.
		if fc.InFlight() != 1 {
			t.Fatalf("InFlight %d", fc.InFlight())
		}
		h.Done()
		fc.Nudge()
		fc.Close()
		if fc.InFlight() != 0 {
			t.Fatalf("InFlight %d after Done", fc.InFlight())
		}
	})
}

// TestObserverRunsOutsideTheLock: an observer that calls back into the
// controller would deadlock if it ran under the controller's lock.
func TestObserverRunsOutsideTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fc *flowcontrol.FlowController
		var mu sync.Mutex
		var seen []string
		fc = mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(1), TTL: time.Second}},
			Gate:  flowcontrol.MaxInFlight(1),
			Observer: func(ev flowcontrol.Event) {
				fc.Nudge()
				s, _ := fc.CapacitySnapshot(0)
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, fmt.Sprintf("%s:%s:%d:%d", ev.Requested.ID, ev.Outcome, fc.InFlight(), s.QueuedRequests))
			},
		})
		h := hold(t, fc)                         // dispatched
		w := start(t.Context(), fc, req("w", 0)) // queued, then expires
		synctest.Wait()
		fc.EnqueueAndWait(t.Context(), req("full", 0)) // rejected
		time.Sleep(time.Second)
		synctest.Wait()
		h.Done()
		if w.outcome(t) != flowcontrol.OutcomeRejectedTTLExpired {
			t.Fatal(w.err)
		}
		want := "[holder:dispatched:1:0 full:rejected-saturated:1:1 w:rejected-ttl-expired:1:0]"
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(seen) != want {
			t.Fatalf("observer saw %v, want %v", seen, want)
		}
	})
}

func TestProvisionBandChangesCapacityAndTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(1), TTL: time.Hour, Policy: ordering.FCFS()}},
			Gate:  flowcontrol.MaxInFlight(0),
		})
		first := start(t.Context(), fc, req("first", 0))
		synctest.Wait()
		if _, err := fc.EnqueueAndWait(t.Context(), req("second", 0)); !errors.Is(err, flowcontrol.ErrRejectedSaturated) {
			t.Fatalf("second: %v", err)
		}
		// Same policy (by name or left empty) and queue are accepted.
		err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: 0, RequestCapacity: bounded(2), TTL: time.Second, Queue: ordering.QueueFIFO, Policy: ordering.FCFS()})
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := fc.CapacitySnapshot(0); s.RequestCapacity != bounded(2) {
			t.Fatalf("snapshot %v", s)
		}
		second := start(t.Context(), fc, req("second", 0))
		time.Sleep(time.Second)
		synctest.Wait()
		if second.outcome(t) != flowcontrol.OutcomeRejectedTTLExpired {
			t.Fatalf("second should expire with the new TTL: %v", second.err)
		}
		if first.finished() {
			t.Fatal("first kept the TTL it was enqueued with and must still wait")
		}
	})
}

// TestManyBandsStrictPriority uses more than 64 bands, so that the bitset of
// non-empty bands spans several words, and provisions bands in between at
// run time.
func TestManyBandsStrictPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bands []flowcontrol.BandConfig
		for p := 0; p < 200; p += 2 {
			bands = append(bands, flowcontrol.BandConfig{Priority: p})
		}
		fc := mustNew(t, flowcontrol.Config{Bands: bands, Gate: flowcontrol.MaxInFlight(1)})
		h := hold(t, fc)
		for p := 1; p < 200; p += 20 {
			if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: p}); err != nil {
				t.Fatal(err)
			}
		}
		var calls []*call
		for _, p := range []int{0, 199, 181, 100, 2, 150, 61, 198} {
			calls = append(calls, start(t.Context(), fc, req(fmt.Sprint(p), p)))
			synctest.Wait()
		}
		var order []int
		for _, c := range dispatchOrder(t, h, calls) {
			order = append(order, c.adm.Effective().Priority)
		}
		// 199 is not provisioned: it falls back to band 0.
		want := []int{198, 181, 150, 100, 61, 2, 0, 0}
		if fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("order %v, want %v", order, want)
		}
	})
}

func TestCapacitySnapshotIsAllocationFree(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 7, RequestCapacity: bounded(4)}}})
	var s capacity.Snapshot
	allocs := testing.AllocsPerRun(1000, func() { s, _ = fc.CapacitySnapshot(7) })
	if allocs != 0 {
		t.Fatalf("CapacitySnapshot allocates %v times per call", allocs)
	}
	if s.Priority != 7 || s.RequestCapacity != bounded(4) {
		t.Fatalf("snapshot %v", s)
	}
	var _ capacity.Reader = fc
	if _, err := fc.CapacitySnapshot(3); !errors.Is(err, capacity.ErrBandNotFound) || !strings.Contains(err.Error(), "3") {
		t.Fatalf("missing band: %v", err)
	}
}

func TestOutcomeStrings(t *testing.T) {
	// One stem per outcome: the constant is Outcome + the stem, the
	// sentinel Err + the stem, and String() the stem as llm-d's dropped
	// reason spells it.
	cases := []struct {
		o        flowcontrol.Outcome
		str      string
		status   int
		sentinel error
	}{
		{flowcontrol.OutcomeDispatched, "dispatched", 200, nil},
		{flowcontrol.OutcomeRejectedSaturated, "rejected-saturated", 429, flowcontrol.ErrRejectedSaturated},
		{flowcontrol.OutcomeRejectedTTLExpired, "rejected-ttl-expired", 429, flowcontrol.ErrRejectedTTLExpired},
		{flowcontrol.OutcomeRejectedContextCancelled, "rejected-context-cancelled", 503, flowcontrol.ErrRejectedContextCancelled},
		{flowcontrol.OutcomeRejectedShuttingDown, "rejected-shutting-down", 503, flowcontrol.ErrRejectedShuttingDown},
		{flowcontrol.OutcomeEvictedQueuePressure, "evicted-queue-pressure", 429, flowcontrol.ErrEvictedQueuePressure},
		{flowcontrol.Outcome(99), "Outcome(99)", 0, nil},
	}
	for _, tc := range cases {
		if tc.o.String() != tc.str || tc.o.HTTPStatus() != tc.status {
			t.Errorf("%d: %q %d; want %q %d", int(tc.o), tc.o.String(), tc.o.HTTPStatus(), tc.str, tc.status)
		}
		if tc.sentinel == nil {
			continue
		}
		err := error(&flowcontrol.RejectionError{Outcome: tc.o, Requested: key("x", 1), Effective: key("x", 0)})
		if !errors.Is(err, tc.sentinel) {
			t.Errorf("%v: errors.Is(%v, its sentinel) is false", tc.o, err)
		}
		if !strings.Contains(err.Error(), tc.str) || !strings.Contains(err.Error(), "priority 1 (band 0)") {
			t.Errorf("%v: error text %q", tc.o, err)
		}
	}
	if flowcontrol.DroppedReasonHeader != "x-llm-d-request-dropped-reason" {
		t.Fatal(flowcontrol.DroppedReasonHeader)
	}
}

// TestExtremePriorities: bands at math.MaxInt and math.MinInt (a natural
// "always first" and "shed first") are ordered and looked up like any other:
// ordering them by subtracting priorities would overflow.
func TestExtremePriorities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: math.MinInt}, {Priority: 0}, {Priority: math.MaxInt}},
			Gate:  flowcontrol.MaxInFlight(1),
		})
		for _, p := range []int{math.MinInt, 0, math.MaxInt} {
			if _, err := fc.CapacitySnapshot(p); err != nil {
				t.Fatalf("CapacitySnapshot(%d): %v", p, err)
			}
		}
		h := hold(t, fc)
		var calls []*call
		for _, p := range []int{math.MinInt, 0, math.MaxInt} {
			calls = append(calls, start(t.Context(), fc, req(fmt.Sprint(p), p)))
			synctest.Wait()
		}
		var order []int
		for _, c := range dispatchOrder(t, h, calls) {
			if c.adm.Effective().Priority != c.req.Key.Priority {
				t.Errorf("asked %d, admitted in band %d", c.req.Key.Priority, c.adm.Effective().Priority)
			}
			order = append(order, c.adm.Effective().Priority)
		}
		if want := []int{math.MaxInt, 0, math.MinInt}; !slices.Equal(order, want) {
			t.Fatalf("dispatch order %v, want %v", order, want)
		}
	})
}
