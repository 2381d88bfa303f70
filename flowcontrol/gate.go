package flowcontrol

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Gate decides whether one more request may start. The controller asks its
// gate for the head of the highest waiting band only (or, with guarantees,
// of the highest band short of its guarantee: see [BandConfig.Guarantee]);
// a refusal stops dispatch until the next event (a Done, an enqueue, an
// expiry or cancellation, or [FlowController.Nudge]).
//
// The controller calls both methods with its lock held, so they must be fast,
// must not block, must not panic and must not call back into the controller.
// A gate whose state changes for reasons the controller cannot see (a
// backend's load, a token bucket refilling) must be followed by a call to
// Nudge when it may admit more.
type Gate interface {
	// TryAcquire reports whether one more request of band priority may
	// start now, and if so takes a slot for it.
	TryAcquire(priority int) bool
	// Release returns the slot taken for a request of band priority when
	// that request's admission is done.
	Release(priority int)
}

// A gate may also implement any of six optional interfaces; the
// controller discovers them once, in [New]:
//   - [MeteredGate], to learn the cost of the request each slot carries and
//     how each admission used it (its time to first token, its hold time) —
//     a token budget or a gate that learns its limit from latency;
//   - [BoundGate], to learn the controller it serves — to call
//     [FlowController.Nudge] when its own state changes, or to refuse a
//     second controller;
//   - [EndpointGate], to say that there is nothing to send requests to, so
//     that they end [OutcomeRejectedNoEndpoints] after
//     [Config.NoEndpointsTTL] instead of waiting out their TTL;
//   - [SaturationDetector], to say how full it is: a band ceiling
//     (package gate's Ceiling) refuses a band once the saturation reaches
//     the band's ceiling, and eviction and guarantees count a running
//     admission's footprint in it;
//   - [CeilingGate], to tell eviction how far the saturation stands above
//     a refused band's ceiling;
//   - [LagGate], to say how long a slot given back may go unseen, the
//     default grace between eviction decisions.
//
// Package [github.com/sluicegate/sluice/flowcontrol/gate] holds gates built on them.

// Slot is what a [MeteredGate] learns about the request that took a slot.
type Slot struct {
	// Priority is the band that dispatched the request (its effective
	// priority).
	Priority int
	// Cost is the request's [Request.Cost] as the controller counts it:
	// at least 1, at most [MaxRequestCost].
	Cost int64
}

// Usage is how one admission used its slot, as a [MeteredGate] hears it
// when the slot comes back.
type Usage struct {
	Slot
	// Unused is true when the slot comes back without the request having
	// run: its caller panicked out of the enqueue that dispatched it. Held
	// and FirstToken are then 0.
	Unused bool
	// Held is how long the admission was held, from dispatch to
	// [Admission.Done], on the controller's clock.
	Held time.Duration
	// FirstToken is the time from dispatch to the first token of the
	// response, as the caller reported it through [Admission.FirstToken];
	// 0 when it did not. For LLM traffic it is the latency that tracks a
	// model server's saturation: the total time grows with the output.
	FirstToken time.Duration
	// Heard is true when a [FirstTokenGate] was already told FirstToken
	// through its FirstToken method, while the admission ran.
	Heard bool
}

// MeteredGate is a [Gate] that weighs requests by cost and hears how each
// admission ended. For such a gate the controller, with its lock held:
//   - calls TryAcquire as for any gate, and right after each TryAcquire
//     that returns true, Took with the request that took the slot (its cost
//     is known only then: the band's fairness policy picks the request once
//     the gate has granted a slot, so refused offers move none of its
//     state);
//   - calls Returned, never Release, when the admission ends.
//
// Release is then called by nobody but the gate's own composers: a
// combinator that took a slot from one gate and was refused by the next
// hands the first one back with Release, before any Took. A gate that
// counts cost therefore decides on what is in flight, not on the cost of
// the request it is offered, as llm-d-router's concurrency detector does:
// it admits while under its budget, and the last request admitted may
// overshoot it by at most its own cost.
type MeteredGate interface {
	Gate
	// Took tells the gate which request took the slot the last TryAcquire
	// granted.
	Took(s Slot)
	// Returned gives back the slot of an admission that ended, with how
	// it was used.
	Returned(u Usage)
}

// FirstTokenGate is a [MeteredGate] that hears each first token as the
// caller reports it ([Admission.FirstToken]), while the request still runs,
// rather than only when its admission ends, which for a long response is
// seconds later: a gate that learns from time to first token reacts that
// much sooner. The controller calls FirstToken with its lock held, once per
// admission at most and never after Returned, then runs dispatch, since the
// gate may admit more; Returned then carries [Usage.Heard]. Each reported
// first token costs a lock acquisition, which is why this is an interface of
// its own.
type FirstTokenGate interface {
	MeteredGate
	FirstToken(s Slot, d time.Duration)
}

// BoundGate is a [Gate] that must know the controller it serves. [New]
// calls Bind once, before any other method, and fails with the error Bind
// returns (a gate whose counts are guarded by one controller's lock refuses
// a second controller, say). A gate whose state changes for reasons the
// controller cannot see — fresh metrics, a limit that grows — keeps c and
// calls c.Nudge when it may admit more, never while holding a lock its
// TryAcquire takes (TryAcquire runs under the controller's lock, and Nudge
// takes it).
type BoundGate interface {
	Gate
	Bind(c *FlowController) error
}

// EndpointGate is a [Gate] that can tell there is nothing to send requests
// to: no model server at all. While NoEndpoints reports true and the gate
// refuses, a waiting request is dropped with [OutcomeRejectedNoEndpoints]
// once it has waited [Config.NoEndpointsTTL] with no endpoints, counted
// from when it was queued or when the pool emptied, whichever is later;
// its own TTL still applies. The gate calls [FlowController.Nudge] when
// endpoints come back (see [BoundGate]). NoEndpoints is called with the
// controller's lock held.
type EndpointGate interface {
	Gate
	NoEndpoints() bool
}

// SaturationDetector is a [Gate] that reports how full it is, in
// llm-d-router's terms: its saturation, a fraction from 0 (idle) to 1
// (full). A usage-limit policy compares it with each band's ceiling, so
// that a band may start a request only while the saturation is below its
// ceiling. A gate composed around it calls Saturation from its own
// TryAcquire, so with the controller's lock held: it must be fast, must not
// block and must not allocate. A value that is not a number in [0, 1] is read as 1, so that a
// gate gone wrong fails closed. For [MaxInFlight] it is the requests in
// flight ÷ the limit (1 for a limit of 0).
type SaturationDetector interface {
	Gate
	Saturation() float64
}

// MaxInFlight returns a gate that lets at most n requests, of any band, be
// in flight (dispatched and not yet Done) at once. MaxInFlight(0) admits
// nothing. A negative n is a configuration error: [New] refuses the gate,
// naming it.
//
// The gate belongs to the one controller it is configured in and, as a
// [BoundGate], refuses to be bound to a second controller. As that
// controller's own gate its count is atomic, so that the controller can
// admit a request and end an admission without taking its lock while
// nothing waits (see [FlowController.EnqueueAndWait]); composed inside
// another gate, it is a plain count guarded by the controller's lock.
// It is a [SaturationDetector]: its saturation is the requests in flight ÷
// n. (The returned gate's String names it and its limit, "MaxInFlight(n)",
// as New's errors do.)
func MaxInFlight(n int) Gate {
	return &maxInFlight{slots: slots{limit: int64(n)}}
}

type maxInFlight struct {
	slots
	owner atomic.Pointer[FlowController] // claimed once, by Bind
}

// Bind claims g for c: a negative limit, or a gate another controller has
// claimed, is an error that New reports as a configuration error.
func (g *maxInFlight) Bind(c *FlowController) error {
	if g.limit < 0 {
		return errors.New("negative limit")
	}
	if !g.owner.CompareAndSwap(nil, c) {
		return errors.New("already used by another controller")
	}
	return nil
}

func (g *maxInFlight) String() string { return fmt.Sprintf("MaxInFlight(%d)", g.limit) }

func (g *maxInFlight) TryAcquire(int) bool { return g.take() }

func (g *maxInFlight) Release(int) {
	if g.give() < 0 {
		panic("flowcontrol: MaxInFlight gate released more slots than it granted")
	}
}

// Saturation returns the requests in flight ÷ the limit; 1 for a limit of
// 0, which admits nothing.
func (g *maxInFlight) Saturation() float64 {
	if g.limit <= 0 {
		return 1
	}
	return float64(g.taken()) / float64(g.limit)
}

// openGate is the gate of a controller configured without one: it admits
// everything, and counts what it admitted, so that the controller can ask
// it without its lock.
type openGate struct{ slots }

func newOpenGate() *openGate { return &openGate{slots{limit: math.MaxInt64}} }

func (g *openGate) TryAcquire(int) bool { return g.take() }
func (g *openGate) Release(int)         { g.give() }

// slots is a count of slots taken, up to a limit. The count is plain,
// guarded by the controller's lock, for a gate composed inside another;
// for the controller's own gate it is atomic, so that the controller may
// take and give back slots without its lock (see FlowController.startFast):
// counter switches it, in New, before the gate is shared.
type slots struct {
	n        int64
	limit    int64
	lockFree bool // set by counter
}

// take takes a slot if one is free.
func (s *slots) take() bool {
	if !s.lockFree {
		if s.n >= s.limit {
			return false
		}
		s.n++
		return true
	}
	for {
		n := atomic.LoadInt64(&s.n)
		if n >= s.limit {
			return false
		}
		if atomic.CompareAndSwapInt64(&s.n, n, n+1) {
			return true
		}
	}
}

// give gives a slot back and returns the slots still taken.
func (s *slots) give() int64 {
	if !s.lockFree {
		s.n--
		return s.n
	}
	return atomic.AddInt64(&s.n, -1)
}

// taken returns the slots taken: with the controller's lock held, or
// without it once counter was called.
func (s *slots) taken() int64 { return atomic.LoadInt64(&s.n) }

// slotCounted is a gate that counts with slots and decides on nothing
// else, so that the controller may take and give back its slots without
// its lock.
type slotCounted interface {
	Gate
	counter() *slots
}

// counter makes the count atomic and returns it; New calls it for the
// controller's own gate.
func (s *slots) counter() *slots {
	s.lockFree = true
	return s
}
