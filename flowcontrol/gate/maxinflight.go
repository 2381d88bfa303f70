package gate

import (
	"errors"
	"fmt"
)

// MaxInFlight returns a gate that lets at most n requests, of any band, be
// in flight (started and not yet given back) at once. MaxInFlight(0)
// admits nothing. A negative n is a configuration error: binding the gate
// fails, naming it.
//
// The gate belongs to the one [Controller] it is bound to and, as a
// [BoundGate], refuses to be bound to a second. It is a [CountGate]: as a
// controller's own gate its count is atomic, so that the controller can
// admit a request and end an admission without taking its lock while
// nothing waits; composed inside another gate, it is a plain count guarded
// by the composite's lock. It is a [SaturationDetector]: its saturation is
// the requests in flight ÷ n. Its String names it and its limit,
// "MaxInFlight(n)".
func MaxInFlight(n int) Gate {
	return &maxInFlight{count: Count{limit: int64(n)}}
}

type maxInFlight struct {
	count Count
	owner binding
}

// Bind claims g for c: a negative limit, or a gate another controller has
// claimed, is an error.
func (g *maxInFlight) Bind(c Controller) error {
	if g.count.limit < 0 {
		return errors.New("negative limit")
	}
	if !g.owner.claim(c) {
		return errors.New("already used by another controller")
	}
	return nil
}

func (g *maxInFlight) unbind(c Controller) { g.owner.release(c) }

func (g *maxInFlight) String() string { return fmt.Sprintf("MaxInFlight(%d)", g.count.limit) }

// TryAcquire takes a slot if fewer than n are taken.
func (g *maxInFlight) TryAcquire(int) bool { return g.count.TryTake() }

// Release gives a slot back. It panics if more slots come back than were
// granted.
func (g *maxInFlight) Release(int) {
	if g.count.Give() < 0 {
		panic("gate: MaxInFlight gate released more slots than it granted")
	}
}

// Count makes the gate's count atomic and returns it.
func (g *maxInFlight) Count() *Count { return g.count.share() }

// Saturation returns the requests in flight ÷ the limit; 1 for a limit of
// 0, which admits nothing.
func (g *maxInFlight) Saturation() float64 {
	if g.count.limit <= 0 {
		return 1
	}
	return float64(g.count.Taken()) / float64(g.count.limit)
}
