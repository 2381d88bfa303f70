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
	"github.com/sluicegate/sluice/flowcontrol/gate"
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
		fc, a := heldSlot(t)
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
		fc, h := heldSlot(t)
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

// TestFallbackKeepsTheEffectiveBand: asked 5 with band 5 missing → effective
// 0, requested 5; provisioning band 5 afterwards changes neither the
// admission nor the band the request was counted in.
func TestFallbackKeepsTheEffectiveBand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		fc := mustNew(t, flowcontrol.Config{
			Bands:    []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(10)}},
			Gate:     gate.MaxInFlight(1),
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

func TestCloseRejectsQueuedAndLaterRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		fc, err := flowcontrol.New(flowcontrol.Config{
			Bands:    []flowcontrol.BandConfig{{Priority: 0}, {Priority: 3, Policy: ordering.EDF()}},
			Gate:     gate.MaxInFlight(1),
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
			Gate:  gate.MaxInFlight(1),
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
			Gate:  gate.MaxInFlight(0),
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

// TestExtremePriorities: bands at math.MaxInt and math.MinInt (a natural
// "always first" and "shed first") are ordered and looked up like any other:
// ordering them by subtracting priorities would overflow.
func TestExtremePriorities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: math.MinInt}, {Priority: 0}, {Priority: math.MaxInt}},
			Gate:  gate.MaxInFlight(1),
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
