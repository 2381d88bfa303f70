package gate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
)

// innerGates returns one gate of each kind the endpoints gate composes
// with, each built to admit: a plain in-flight limit, a concurrency
// budget, a saturation gate with fresh metrics, an adaptive gate, and an
// All of two.
func innerGates(t *testing.T, clock *clocktest.Clock) map[string]gate.Gate {
	t.Helper()
	freshSaturation := func() *gate.SaturationGate {
		g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock, MetricsStalenessThreshold: time.Hour})
		g.Update("e", gate.Metrics{})
		return g
	}
	budget, err := gate.Concurrency(gate.ConcurrencyConfig{MaxConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := gate.Concurrency(gate.ConcurrencyConfig{Mode: gate.ModeTokens, MaxTokenConcurrency: 100})
	if err != nil {
		t.Fatal(err)
	}
	adaptive, err := gate.Adaptive(gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: 4})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]gate.Gate{
		"MaxInFlight": gate.MaxInFlight(4),
		"Concurrency": budget,
		"Saturation":  freshSaturation(),
		"Adaptive":    adaptive,
		"All":         gate.All(tokens, freshSaturation()),
	}
}

// With every endpoint down, a request ends rejected-no-endpoints exactly
// NoEndpointsTTL after it was queued, whatever gate decides how much the
// endpoints take; once one is up again, a waiting request starts at once,
// on SetAvailable's nudge alone.
func TestEndpointsGateFailsFastWithAnyGate(t *testing.T) {
	const noEndpointsTTL = 2 * time.Second
	for name, inner := range innerGates(t, newClock()) {
		t.Run(name, func(t *testing.T) {
			clock := newClock()
			endpoints := gate.Endpoints(1)
			fc := mustNew(t, flowcontrol.Config{
				Bands:          []flowcontrol.BandConfig{{Priority: 0}},
				Gate:           gate.All(endpoints, inner),
				Clock:          clock,
				DefaultTTL:     time.Minute,
				NoEndpointsTTL: noEndpointsTTL,
			})
			up := submit(fc, "up", 0)
			if got := up.outcome(t); got != flowcontrol.OutcomeDispatched {
				t.Fatalf("with an endpoint up: %v, want dispatched", got)
			}
			up.adm.Done()

			endpoints.SetAvailable(0)
			down := submit(fc, "down", 0)
			clock.Advance(noEndpointsTTL - time.Nanosecond)
			if down.done {
				t.Fatalf("ended %v before NoEndpointsTTL", down.err)
			}
			clock.Advance(time.Nanosecond)
			if got := down.outcome(t); got != flowcontrol.OutcomeRejectedNoEndpoints {
				t.Fatalf("outcome %v, want rejected-no-endpoints", got)
			}

			back := submit(fc, "back", 0)
			clock.Advance(time.Second)
			if back.done {
				t.Fatalf("started %v with no endpoint", back.err)
			}
			endpoints.SetAvailable(2)
			if got := back.outcome(t); got != flowcontrol.OutcomeDispatched {
				t.Fatalf("once an endpoint is back: %v, want dispatched at once", got)
			}
			back.adm.Done()
			if fc.InFlight() != 0 {
				t.Fatalf("in flight %d after every Done", fc.InFlight())
			}
		})
	}
}

// A request that waits for room while the endpoints are up (the limit is
// full) and then sees them all go down ends NoEndpointsTTL after they
// went: SetAvailable(0) nudges the controller, which notes the empty pool
// then, not at the next event.
func TestEndpointsGateCountsFromWhenThePoolEmptied(t *testing.T) {
	clock := newClock()
	endpoints := gate.Endpoints(1)
	fc := mustNew(t, flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{{Priority: 0}},
		Gate:           gate.All(endpoints, gate.MaxInFlight(1)),
		Clock:          clock,
		DefaultTTL:     time.Minute,
		NoEndpointsTTL: 2 * time.Second,
	})
	running := submit(fc, "running", 0)
	if running.outcome(t) != flowcontrol.OutcomeDispatched {
		t.Fatal(running.err)
	}
	waiting := submit(fc, "waiting", 0)
	clock.Advance(10 * time.Second) // waits for the slot, endpoints up
	endpoints.SetAvailable(0)
	clock.Advance(2*time.Second - time.Nanosecond)
	if waiting.done {
		t.Fatalf("ended %v before NoEndpointsTTL from the moment the pool emptied", waiting.err)
	}
	clock.Advance(time.Nanosecond)
	if got := waiting.outcome(t); got != flowcontrol.OutcomeRejectedNoEndpoints {
		t.Fatalf("outcome %v, want rejected-no-endpoints", got)
	}
	running.adm.Done()
}

// The gate takes no slot, so a count that changes between 0 and more does
// not disturb the inner gate's accounting, and a second controller is
// refused.
func TestEndpointsGateContract(t *testing.T) {
	g := gate.Endpoints(0)
	if g.TryAcquire(0) || !g.NoEndpoints() || g.Available() != 0 {
		t.Fatal("Endpoints(0) must refuse and report no endpoints")
	}
	g.SetAvailable(3) // not bound: nothing to nudge
	if !g.TryAcquire(5) || g.NoEndpoints() || g.Available() != 3 {
		t.Fatal("SetAvailable(3) must admit and report endpoints")
	}
	g.Release(5)
	if !g.TryAcquire(-1) {
		t.Fatal("TryAcquire took a slot")
	}
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	if err := g.Bind(fc); err != nil {
		t.Fatalf("Bind to the same controller again: %v", err)
	}
	_, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	if err == nil || !strings.Contains(err.Error(), "another controller") {
		t.Fatalf("a second controller: %v, want refused", err)
	}
	for _, f := range []func(){func() { gate.Endpoints(-1) }, func() { g.SetAvailable(-1) }} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "gate: ") {
					t.Errorf("a negative count: recovered %v, want a panic starting with the package name", r)
				}
			}()
			f()
		}()
	}
	if g.Available() != 3 {
		t.Fatalf("a refused SetAvailable changed the count to %d", g.Available())
	}
}
