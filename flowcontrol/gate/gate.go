package gate

import "time"

// Gate decides whether one more request may start. A flow controller asks
// its gate for the head of the highest waiting band only (with guarantees,
// of the highest band short of its guarantee); a refusal stops dispatch
// until the next event (a slot given back, an arrival, an expiry or
// cancellation, or the gate's own nudge: see [Controller]).
//
// A gate's methods are not safe for concurrent use unless the gate says
// so: the controller calls them with its lock held, and a router that uses
// a gate without a controller serializes them with [Serial]. They must be
// fast, must not block, must not panic and must not call back into their
// caller.
//
// The life of a slot: TryAcquire grants it; the request it was granted for
// runs; Release gives it back, once. A gate that weighs requests by cost,
// or learns from how they ran, is a [MeteredGate] and hears more.
type Gate interface {
	// TryAcquire reports whether one more request of band priority may
	// start now, and if so takes a slot for it.
	TryAcquire(priority int) bool
	// Release gives back a slot TryAcquire granted: the request it was
	// granted for has ended, and there is nothing more to tell. On every
	// gate it means that one thing; a [MeteredGate] also offers Returned,
	// which gives the slot back with its [Usage] instead.
	Release(priority int)
}

// A gate may also implement optional interfaces, which a controller
// discovers once, when it is created:
//   - [MeteredGate], to learn the cost of the request each slot carries and
//     how each admission used it (its time to first token, its hold time) —
//     a token budget, or a gate that learns its limit from latency;
//   - [FirstTokenGate], to hear each first token while the request runs;
//   - [BoundGate], to learn the [Controller] it serves — to nudge it when
//     its own state changes, or to refuse a second one;
//   - [EndpointGate], to say that there is nothing to send requests to, so
//     that they end rejected-no-endpoints instead of waiting out their TTL;
//   - [SaturationDetector], to say how full it is: a band ceiling
//     ([Ceiling]) refuses a band once the saturation reaches the band's
//     ceiling, and eviction and guarantees count a running admission's
//     footprint in it;
//   - [CeilingGate], to tell eviction how far the saturation stands above
//     a refused band's ceiling;
//   - [LagGate], to say how long a slot given back may go unseen;
//   - [CountGate], to say that it decides on nothing but a count, so that
//     a controller may take and give back its slots without a lock.

// Slot is what a [MeteredGate] learns about the request that took a slot.
type Slot struct {
	// Priority is the band that dispatched the request (its effective
	// priority).
	Priority int
	// Cost is the request's cost (estimated tokens) as the controller
	// counts it: at least 1, at most flowcontrol.MaxRequestCost. In a
	// [Usage], it is the cost Took was told; a Usage that is Unused with
	// Cost 0 hands back a slot that no Took claimed.
	Cost int64
}

// Usage is how one admission used its slot, as a [MeteredGate] hears it
// when the slot comes back.
type Usage struct {
	Slot
	// Unused is true when the slot comes back without a request having run
	// on it: a composing gate refused after this one granted, or the caller
	// panicked out of the enqueue that dispatched it. Held and FirstToken
	// are then 0.
	Unused bool
	// Held is how long the admission was held, from dispatch to its end,
	// on the controller's clock.
	Held time.Duration
	// FirstToken is the time from dispatch to the first token of the
	// response, as the caller reported it; 0 when it did not. For LLM
	// traffic it is the latency that tracks a model server's saturation:
	// the total time grows with the output.
	FirstToken time.Duration
	// Heard is true when a [FirstTokenGate] was already told FirstToken
	// through its FirstToken method, while the admission ran.
	Heard bool
}

// MeteredGate is a [Gate] that weighs requests by cost and hears how each
// slot was used. Its slot's life has one more step, and one more way back:
//   - TryAcquire grants the slot, as for any gate;
//   - Took names the request that took it, with its cost: the cost is
//     known only then, since a band's fairness policy picks the request
//     once the gate has granted a slot, so refused offers move none of its
//     state;
//   - Returned gives the slot back with its [Usage]: how long it was held,
//     its first token, the cost Took counted — or Unused, when no request
//     ran on it (with Cost 0 when no Took claimed it).
//
// A controller calls Took after each granted TryAcquire and Returned, never
// Release, when the admission ends; a composing gate that must hand back a
// slot this gate granted before the next gate refused calls Returned with
// Unused set and Cost 0. Release keeps its one meaning — the request ended,
// nothing more to tell — for a caller that knows only [Gate]: it must not
// have called Took.
//
// A gate that counts cost decides on what is in flight, not on the cost of
// the request it is offered, as llm-d-router's concurrency detector does:
// it admits while under its budget, and the last request admitted may
// overshoot it by at most its own cost.
type MeteredGate interface {
	Gate
	// Took tells the gate which request took the slot the last TryAcquire
	// granted.
	Took(s Slot)
	// Returned gives back a slot with how it was used.
	Returned(u Usage)
}

// FirstTokenGate is a [MeteredGate] that hears each first token as the
// caller reports it, while the request still runs, rather than only when
// its admission ends, which for a long response is seconds later: a gate
// that learns from time to first token reacts that much sooner. FirstToken
// is called once per slot at most, after Took and never after Returned;
// Returned then carries [Usage.Heard]. A controller runs dispatch after it,
// since the gate may admit more: each reported first token costs a lock
// acquisition, which is why this is an interface of its own.
type FirstTokenGate interface {
	MeteredGate
	FirstToken(s Slot, d time.Duration)
}

// Controller is what a [BoundGate] may ask of what it serves: a
// flowcontrol.FlowController, or a [Serial].
type Controller interface {
	// Nudge tells the controller that the gate may admit more than when it
	// last refused. It takes the controller's lock: a gate never calls it
	// from its own methods, nor while holding a lock its TryAcquire takes.
	Nudge()
	// Priorities returns the priorities of the controller's bands, highest
	// first; nil when it has none. The slice is shared and must not be
	// modified.
	Priorities() []int
}

// BoundGate is a [Gate] that must know the [Controller] it serves. Bind is
// called once, before any other method, and the controller fails to start
// with the error it returns (a gate whose state is guarded by one
// controller's lock refuses a second controller, say). A gate whose state
// changes for reasons the controller cannot see — fresh metrics, a limit
// that grows — keeps c and calls c.Nudge when it may admit more.
type BoundGate interface {
	Gate
	Bind(c Controller) error
}

// EndpointGate is a [Gate] that can tell there is nothing to send requests
// to: no model server at all. While NoEndpoints reports true and the gate
// refuses, a controller drops a waiting request with rejected-no-endpoints
// once it has waited its no-endpoints TTL (flowcontrol.Config.NoEndpointsTTL).
// The gate nudges its [Controller] when endpoints come back (see
// [BoundGate]). NoEndpoints is called with the controller's lock held.
type EndpointGate interface {
	Gate
	NoEndpoints() bool
}

// SaturationDetector is a [Gate] that reports how full it is: its
// saturation, the share of its capacity in use, a fraction from 0 (idle)
// to 1 (full). A usage-limit policy compares it with each band's ceiling,
// so that a band may start a request only while the saturation is below
// its ceiling, and flowcontrol counts a running request's footprint in it
// for guarantees and in-flight eviction. A gate composed around it calls Saturation from its own
// TryAcquire, so it must be fast, must not block and must not allocate. A
// value that is not a number in [0, 1] is read as 1, so that a gate gone
// wrong fails closed. For [MaxInFlight] it is the requests in flight ÷ the
// limit (1 for a limit of 0); for [SaturationGate], the share of the model
// servers' slots or KV cache in use ([SaturationGate.Saturation]).
type SaturationDetector interface {
	Gate
	Saturation() float64
}

// CeilingGate is a [SaturationDetector] that holds bands back below a
// ceiling on its saturation ([Ceiling]): BandCeiling returns the ceiling of
// band priority, a fraction in [0, 1], at the current saturation. Eviction
// reads it to size a decision: a band refused at saturation s with ceiling
// c needs (s − c) freed before its head can start, beside one footprint
// per waiting request. It must be fast, must not block and must not
// allocate.
type CeilingGate interface {
	SaturationDetector
	BandCeiling(priority int) float64
}

// PreemptingGate is a [Gate] in front of model servers that preempt a
// lower band for a higher one themselves — vLLM run with
// --scheduling-policy priority, each request's band handed to it
// (flowhttp.PriorityHandoff) — when ServersPreempt reports true. Such a
// gate lets a higher band past the lower bands' work while any of it runs,
// and refuses the higher band only where revoking lower work would not
// start it on a slot: its own band and those above fill the servers'
// slots, or nothing lower is in flight. A controller's in-flight eviction
// (flowcontrol.Eviction) therefore revokes nothing for a higher band
// behind it: the servers' preemption keeps what the lower band decoded,
// where a revocation throws it away. [PriorityMaxInFlight] is one; so are
// a [SaturationGate] with PriorityScheduling, a fleet view's gate with
// fleet.Config.PriorityScheduling, and an [All] of such gates and
// [EndpointsGate]s; a [Ceiling] is not, since a revocation lowers the
// saturation its ceilings compare. ServersPreempt is read once, when the
// controller is created.
type PreemptingGate interface {
	Gate
	ServersPreempt() bool
}

// LagGate is a [Gate] whose view of the model servers lags: a slot given
// back is seen only some time later, as a gate reading scraped metrics sees
// it at its next scrape. flowcontrol.Eviction.Grace defaults to its Lag,
// the longest such delay, so that eviction does not size a decision on a
// reading that has not yet seen the last one. Lag is read once, when the
// controller is created.
type LagGate interface {
	Gate
	Lag() time.Duration
}
