package flowcontrol_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// TestStrictPriorityAcrossThreeBands: with one slot, every waiting request of
// a higher band goes before any of a lower band, whatever the arrival order.
func TestStrictPriorityAcrossThreeBands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: -1}, {Priority: 0}, {Priority: 5}},
			Gate:  gate.MaxInFlight(1),
		})
		h := hold(t, fc)
		var calls []*call
		for i, p := range []int{-1, 0, 5, -1, 0, 5, 0} {
			calls = append(calls, start(t.Context(), fc, req(fmt.Sprintf("%d:%d", i, p), p)))
			synctest.Wait() // fix the arrival order
		}
		requireOrder(t, h, calls, "2:5", "5:5", "1:0", "4:0", "6:0", "0:-1", "3:-1")
	})
}

// TestStrictPriorityHoldsLowerBandsWhileHigherIsRefused: a gate that refuses
// band 5 but would take band 0 still holds band 0 back; once the band-5
// waiter is cancelled, band 0 dispatches at once (cancellation is an event).
func TestStrictPriorityHoldsLowerBandsWhileHigherIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gt := &switchGate{}
		gt.set(10, 5)
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 5}},
			Gate:  gt,
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
		gt := &switchGate{}
		fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gt})
		w1 := start(t.Context(), fc, req("w1", 0))
		synctest.Wait()
		w2 := start(t.Context(), fc, req("w2", 0))
		synctest.Wait()
		gt.set(1)
		synctest.Wait()
		if w1.finished() || w2.finished() {
			t.Fatal("dispatched without an event")
		}
		fc.Nudge()
		synctest.Wait()
		if !w1.finished() || w2.finished() {
			t.Fatalf("after Nudge: w1 %v w2 %v; want w1 only (FCFS)", w1.finished(), w2.finished())
		}
		gt.set(2)
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
			Gate:  gate.MaxInFlight(1),
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
		requireOrder(t, h, calls, "alias-200", "slo-300", "slo-100-late", "slo-500", "no-slo-early", "bad-slo", "no-slo-later")
	})
}

func TestEDFBandUsesTheEffectiveTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands:      []flowcontrol.BandConfig{{Priority: 0, Policy: ordering.EDF()}},
			DefaultTTL: time.Hour,
			Gate:       gate.MaxInFlight(1),
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

// TestManyBandsStrictPriority uses more than 64 bands, so that the bitset of
// non-empty bands spans several words, and provisions bands in between at
// run time.
func TestManyBandsStrictPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bands []flowcontrol.BandConfig
		for p := 0; p < 200; p += 2 {
			bands = append(bands, flowcontrol.BandConfig{Priority: p})
		}
		fc := mustNew(t, flowcontrol.Config{Bands: bands, Gate: gate.MaxInFlight(1)})
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
