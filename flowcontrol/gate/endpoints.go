package gate

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// EndpointsGate refuses every request while no endpoint can take one, and
// tells the controller so: the requests waiting then end with
// [github.com/sluicegate/sluice/flowcontrol.OutcomeRejectedNoEndpoints] (503) after the controller's
// [github.com/sluicegate/sluice/flowcontrol.Config.NoEndpointsTTL], instead of waiting out their TTL
// for a model server that is not there.
//
// The gate does not watch the endpoints itself. The router does — from
// the connections it fails to open, the metrics scrapes that fail, a
// discovery service — and tells the gate how many endpoints are up with
// [EndpointsGate.SetAvailable]. While some are, the gate admits every
// request: it is meant to be composed, first, with the gate that decides
// how much the endpoints may take, through [All]:
//
//	endpoints := gate.Endpoints(0) // none up until the router has reached one
//	cfg.Gate = gate.All(endpoints, MaxInFlight(64))
//
// All reports no endpoints when any of its gates does and keeps the
// optional interfaces of the others (a [ConcurrencyGate]'s costs, an
// [AdaptiveGate]'s first tokens, a [SaturationGate]'s own NoEndpoints), so
// this works with every gate. Placed first, the gate refuses before any
// other is asked, and the others' slots are left as they were.
//
// An EndpointsGate is a [EndpointGate], a
// [BoundGate] and a [SaturationDetector] that
// always reports 0: it counts nothing in flight. SetAvailable nudges the controller when the
// count reaches 0, so that the requests already waiting start their
// no-endpoints TTL then rather than at the next event, and when it leaves
// 0, so that they start at once. It serves one controller. Its methods are
// safe for concurrent use; TryAcquire reads one atomic.
type EndpointsGate struct {
	available atomic.Int64
	fc        binding // set by Bind
}

// Endpoints returns a gate that admits while available endpoints, and then
// as many as [EndpointsGate.SetAvailable] says, are up. It panics if
// available is negative.
func Endpoints(available int) *EndpointsGate {
	g := &EndpointsGate{}
	g.available.Store(int64(checkAvailable("Endpoints", available)))
	return g
}

func checkAvailable(fn string, n int) int {
	if n < 0 {
		panic(fmt.Sprintf("gate: %s: negative endpoint count %d", fn, n))
	}
	return n
}

// SetAvailable records that n endpoints can take requests now, and nudges
// the controller when that makes the pool empty or no longer empty. It
// panics if n is negative. Any goroutine may call it, but not a Gate
// method: the nudge takes the controller's lock.
func (g *EndpointsGate) SetAvailable(n int) {
	old := g.available.Swap(int64(checkAvailable("EndpointsGate.SetAvailable", n)))
	if (old == 0) == (n == 0) {
		return // the gate answers as it did
	}
	if fc := g.fc.controller(); fc != nil {
		fc.Nudge()
	}
}

// Available returns the number of endpoints last set.
func (g *EndpointsGate) Available() int { return int(g.available.Load()) }

// TryAcquire reports whether any endpoint is up. It takes no slot: the
// gates composed with it count what runs.
func (g *EndpointsGate) TryAcquire(int) bool { return g.available.Load() > 0 }

// Release does nothing: TryAcquire takes no slot.
func (g *EndpointsGate) Release(int) {}

// Saturation returns 0: the gate takes no slot, so it measures no load.
// Composed in [All], it leaves the saturation to the other gates.
func (g *EndpointsGate) Saturation() float64 { return 0 }

// NoEndpoints reports whether no endpoint is up.
func (g *EndpointsGate) NoEndpoints() bool { return g.available.Load() == 0 }

// Bind records the controller that SetAvailable nudges. It refuses a
// second controller.
func (g *EndpointsGate) Bind(c Controller) error {
	if !g.fc.claim(c) {
		return errors.New("gate: EndpointsGate already serves another controller")
	}
	return nil
}

func (g *EndpointsGate) unbind(c Controller) { g.fc.release(c) }
