package flowcontrol

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// FlowKey identifies a flow and the priority it asks for. Higher priorities
// are more important; negative priorities name sheddable traffic.
type FlowKey struct {
	// ID names the flow (a tenant, a fairness id); the controller carries
	// it through unchanged.
	ID string
	// Priority selects the band: the requested one in a Request, the band
	// that handled the request in an admission's effective key.
	Priority int
}

// Request is one request asking to be admitted.
type Request struct {
	// Key is the requested flow key; Key.Priority selects the band.
	Key FlowKey
	// ByteSize is the request's size, counted against byte capacities while
	// it waits. A negative size (such as net/http's unknown ContentLength,
	// -1) counts as 0, and a size above [MaxRequestBytes] counts as
	// MaxRequestBytes: the size an ordering policy reads in the request's
	// item, and every byte count, is that value.
	ByteSize int64
	// ReceivedTime is when the gateway received the request, read by the
	// slo-deadline policy. Zero means the time EnqueueAndWait was called.
	ReceivedTime time.Time
	// Header holds the request headers that ordering policies read, such
	// as x-llm-d-slo-ttft-ms. The controller does not modify it.
	Header http.Header
	// TTL is the request's own queue-wait TTL; zero or negative means none.
	TTL time.Duration
	// Cost is what the request costs to serve, in the unit the
	// configuration's cost capacities and the fairness policy count — an
	// estimate of its tokens, typically. Zero or negative counts as 1, so
	// a configuration that sets no cost counts requests; above
	// [MaxRequestCost] counts as MaxRequestCost. The cost the controller's
	// counters, the fairness policy ([Flow.HeadCost], [Scheduler.Served])
	// and a [gate.MeteredGate] ([gate.Slot.Cost]) see is that value.
	Cost int64
	// Tag is the caller's own value for the request, such as the labels
	// its metrics are counted under. The controller never reads it: it
	// hands it unchanged to [Config.Observer] and [Config.Waiting] as
	// [Event.Tag], and holds it only while the request is in its hands.
	Tag any
}

// The largest cost and byte size a request counts as; see [Request.Cost]
// and [Request.ByteSize]. Both are client-supplied numbers (a max_tokens, a
// Content-Length), and the controller sums them: a band's bytes, the
// controller's cost. Clamped to 2^40 — about 10^12 tokens, a terabyte,
// more than any model's context or any body a router buffers — a sum cannot
// overflow before about 2^23 such requests wait at once, and one request's
// claim cannot fill a counter and lock out everyone else. A request that
// would take a total past the range of int64 all the same is refused as
// [OutcomeRejectedSaturated]; no count ever wraps.
const (
	// MaxRequestCost is the largest cost a request counts as: 2^40.
	MaxRequestCost int64 = 1 << 40
	// MaxRequestBytes is the largest byte size a request counts as: 2^40.
	MaxRequestBytes int64 = 1 << 40
)

// BandConfig configures one priority band.
type BandConfig struct {
	// Priority identifies the band; higher is more important.
	Priority int
	// RequestCapacity bounds the number of requests waiting in the band;
	// the zero Limit is unbounded.
	RequestCapacity capacity.Limit
	// ByteCapacity bounds the sum of ByteSize over the requests waiting in
	// the band; the zero Limit is unbounded.
	ByteCapacity capacity.Limit
	// CostCapacity bounds the sum of Cost over the requests waiting in the
	// band (their estimated tokens); the zero Limit is unbounded.
	CostCapacity capacity.Limit
	// FlowRequestCapacity bounds the requests any one flow may have
	// waiting in the band; the zero Limit is unbounded. A request over it
	// is rejected, never displaces others.
	FlowRequestCapacity capacity.Limit
	// TTL is the band's queue-wait TTL; 0 means none.
	TTL time.Duration
	// Policy orders each flow's queue in the band; nil means FCFS. Code
	// builds one (ordering.FCFS(), a policy of its own); a configuration
	// file names one and gets its value from ordering.PolicyByName.
	Policy ordering.Policy
	// Queue selects the queue implementation; "" means
	// ordering.DefaultQueueKind of the policy.
	Queue ordering.QueueKind
	// Guarantee is the band's guaranteed share of the gate's capacity, a
	// fraction in [0, 1]; 0, the default, guarantees nothing. The
	// guarantees of all bands add up to at most 1. While the band uses
	// less than its guarantee, its head is offered before those of the
	// bands above it that use at least theirs, and when the gate refuses
	// it, admissions of bands below it beyond their own guarantees are
	// revoked ([OutcomeEvicted]) until it has its guarantee: idle, the
	// share is lent to any band; wanted, it comes back in rounds, paced
	// as [Eviction] says. Each revocation decision is sized from the
	// band's requests waiting then, at most MaxPerDecision (M, 2 by
	// default), and the next decision waits until those revocations are
	// confirmed (C, the time the holders take to stop and call Done, at
	// most Timeout) and Grace has passed. A burst that finds G admissions
	// of its share lent out gets them back within 1 + ⌈(G−1)/M⌉ rounds of
	// C + Grace — its first arrival's decision revokes for that arrival
	// alone — or ⌈G/M⌉ rounds when the burst is queued before its first
	// refusal: with G = 4 and the defaults, 3 rounds. A band below it
	// lends it back so; a band above it, as its requests end, since a
	// higher band is never revoked for a lower one. Usage is counted in
	// admissions at the mean footprint: the gate's saturation
	// ([gate.SaturationDetector]) ÷ the requests in flight, so with
	// [gate.MaxInFlight](n) a guarantee g is g×n admissions; a gate that
	// reports no saturation counts each band's share of the requests in
	// flight. A controller whose bands have no guarantee at [New] takes
	// none later from ProvisionBand.
	//
	// New refuses a guarantee with no Gate: nothing is refused without
	// one, so the guarantee would never be short.
	Guarantee float64
	// Fairness picks which flow's head the band offers next; nil means
	// [GlobalStrict], the order of one queue for the whole band. As with
	// Policy, code builds the value and a file names it: see
	// [FairnessByName].
	Fairness Fairness
}

// Config configures a [FlowController].
type Config struct {
	// Bands lists the bands provisioned at start; at least one, with
	// distinct priorities. More can be added with ProvisionBand.
	Bands []BandConfig
	// FallbackPriority is the band that takes requests whose own band is
	// not provisioned; it must be one of Bands. It is 0 unless set. With
	// NeverPromote it is unused and must be left 0.
	FallbackPriority int
	// NeverPromote changes the fallback: a request whose band is not
	// provisioned goes to the nearest provisioned band at or below its
	// priority, and is rejected for capacity if there is none, so
	// sheddable traffic is never promoted.
	NeverPromote bool
	// RequestCapacity bounds the number of requests waiting in all bands
	// together; the zero Limit is unbounded.
	RequestCapacity capacity.Limit
	// ByteCapacity bounds the bytes waiting in all bands together; the
	// zero Limit is unbounded.
	ByteCapacity capacity.Limit
	// CostCapacity bounds the summed Cost of the requests waiting in all
	// bands together; the zero Limit is unbounded.
	CostCapacity capacity.Limit
	// NoDisplacement turns fair admission off. By default, when a band or
	// the controller is full, a request whose flow holds less than its
	// share of the capacity that refuses it — the capacity divided by the
	// flows holding some of it, its own included — displaces the most
	// recently queued request of the flow holding the most (in the same
	// band, or for a controller-wide capacity in any band at or below its
	// own), which ends with [OutcomeRejectedSaturated] and an error
	// wrapping [ErrDisplaced]. With
	// NoDisplacement such a request is rejected.
	//
	// A request displaces only a flow that holds more than the request's
	// own flow would hold once the request is admitted, so that two flows
	// near their shares never displace each other back and forth. A flow is
	// a (band, ID) pair, also for a controller-wide capacity: one ID queued
	// in two bands counts as two flows there, each with its own share.
	//
	// For example, a band of request capacity 10 holds 9 requests of flow
	// A and 1 of flow B. A request of flow C arrives: there are three
	// flows, C's share is 10/3 = 3 and C holds 0, so A's newest request is
	// displaced and C's is queued. Another of C's arrives and displaces
	// A's next newest (C holds 1 < 3). A request of A arrives: A holds 7,
	// more than its share, and is rejected.
	NoDisplacement bool
	// DefaultTTL is a queue-wait TTL for every request; 0 means none. A
	// request's TTL is the smallest of its band's TTL, DefaultTTL, its own
	// TTL and the time left until its context's deadline.
	DefaultTTL time.Duration
	// NoEndpointsTTL bounds how long a request waits while the gate
	// reports no endpoints at all (see [gate.EndpointGate]): a request that has
	// waited that long with the pool empty — counted from when it was
	// queued or when the pool emptied, whichever is later — ends with
	// [OutcomeRejectedNoEndpoints]. 0 means no bound of its own: the
	// request waits its TTL, and an expiry while the pool is empty is then
	// reported as OutcomeRejectedNoEndpoints too. It never extends a
	// request's TTL (llm-d-router's noEndpointRequestTTL replaces the TTL
	// while the pool is empty, and may lengthen it; Sluice keeps the
	// shorter of the two). It has no effect unless the gate is an
	// EndpointGate.
	NoEndpointsTTL time.Duration
	// Gate decides when a request may start. Nil lets every request start
	// at once (subject to strict priority, which then never holds anything
	// back).
	Gate gate.Gate
	// Clock is the controller's source of time; nil means the real clock.
	// See [Clock] for how a virtual clock and contexts interact.
	Clock Clock
	// Eviction, if set, turns on in-flight eviction: see [Eviction]. It
	// also sets the pacing of the revocations that take back a band's
	// guarantee ([BandConfig.Guarantee]). New refuses eviction that could
	// never act: with no Gate, or — unless a band has a guarantee, whose
	// revocations it paces — with fewer than two bands or none of them
	// below Eviction.Below. The band it takes victims from is one of
	// Bands, not one provisioned later.
	Eviction *Eviction
	// Revocations, if set, is called at each step of each revocation,
	// outside the controller's lock; see [Revocation]. It must not block.
	Revocations func(Revocation)
	// Observer, if set, is called once for every outcome, after the
	// controller's lock is released, on the goroutine of the
	// EnqueueAndWait call that ends with that outcome, just before the
	// call returns. It must not call Close.
	Observer func(Event)
	// Waiting, if set, is called once for each request that has to wait:
	// when its enqueue has put it in its band's queue without an outcome,
	// after the controller's lock is released, on the goroutine of the
	// EnqueueAndWait or Submit call, before that call blocks or returns.
	// Its Event has Queued set and no outcome yet (Outcome is the zero
	// value and means nothing); the Observer hears the outcome later — for
	// a Submit, possibly before Waiting runs, on another goroutine. If it
	// panics, an EnqueueAndWait gives up the wait (its caller gets the
	// panic) and a Submit's request stays queued, its callback called as
	// usual. It must not call Close.
	Waiting func(Event)
}

// bandLimits is the part of a band's configuration that ProvisionBand may
// change. It is immutable once published.
type bandLimits struct {
	band capacities // what waits in the band
	flow capacities // what waits in each of its flows: requests only
	// empty is the room of an empty flow of the band: the largest request
	// that fits it when nothing waits.
	empty room
	ttl   time.Duration
}

func newBandLimits(bc BandConfig) *bandLimits {
	l := &bandLimits{
		band: newCapacities(bc.RequestCapacity, bc.ByteCapacity, bc.CostCapacity),
		flow: newCapacities(bc.FlowRequestCapacity, capacity.Unbounded(), capacity.Unbounded()),
		ttl:  bc.TTL,
	}
	l.empty = l.band.room().within(l.flow.room())
	return l
}

// configError returns the error for a bad configuration value, naming the
// field and the value.
func configError(field string, value any, problem string) error {
	return fmt.Errorf("flowcontrol: %s %v: %s", field, value, problem)
}

// checkLimit rejects a negative bounded limit.
func checkLimit(field string, l capacity.Limit) error {
	if n, ok := l.Value(); ok && n < 0 {
		return configError(field, n, "negative capacity")
	}
	return nil
}

// checkTTL rejects a negative TTL.
func checkTTL(field string, d time.Duration) error {
	if d < 0 {
		return configError(field, d, "negative TTL")
	}
	return nil
}

// firstError returns the first of errs that is not nil: the checks of a
// configuration, in the order its fields are named.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkBand validates a band configuration whose fields are named with the
// prefix name (e.g. "Bands[2]"). It returns the band's policy, nil when
// none is set.
func checkBand(name string, bc BandConfig) (ordering.Policy, error) {
	if err := firstError(
		checkLimit(name+".RequestCapacity", bc.RequestCapacity),
		checkLimit(name+".ByteCapacity", bc.ByteCapacity),
		checkLimit(name+".CostCapacity", bc.CostCapacity),
		checkLimit(name+".FlowRequestCapacity", bc.FlowRequestCapacity),
		checkTTL(name+".TTL", bc.TTL),
		checkGuarantee(name+".Guarantee", bc.Guarantee),
	); err != nil {
		return nil, err
	}
	return bc.Policy, nil
}

// bandOrder resolves the policy and queue kind of a new band, p and kind
// as configured (either may be unset), and checks that the kind can run
// the policy.
func bandOrder(name string, p ordering.Policy, kind ordering.QueueKind) (ordering.Policy, ordering.QueueKind, error) {
	if p == nil {
		p = ordering.FCFS()
	}
	if kind == "" {
		kind = ordering.DefaultQueueKind(p)
	}
	if err := ordering.CheckQueue(kind, p); err != nil {
		return nil, "", fmt.Errorf("flowcontrol: %s.Queue %q with policy %q: %w", name, kind, p.TypeName(), err)
	}
	return p, kind, nil
}

// checkReclaim refuses a configuration whose eviction or guarantees could
// never act, naming the field: a guarantee or eviction with no gate — an
// open gate refuses nothing, and both act only on a refusal — and
// eviction with no band to take victims from, which needs a band below
// Eviction.Below with a band above it to revoke for — unless a band has
// a guarantee, whose revocations Eviction paces whatever Below is. Bands
// provisioned later do not count: the band eviction revokes is
// provisioned at New.
func checkReclaim(cfg Config) error {
	if cfg.Gate == nil {
		for i, bc := range cfg.Bands {
			if bc.Guarantee > 0 {
				return configError(fmt.Sprintf("Bands[%d].Guarantee", i), bc.Guarantee,
					"no Gate: nothing is refused without one, so a guarantee is never short; set Gate to one that counts slots, such as gate.MaxInFlight")
			}
		}
	}
	e := cfg.Eviction
	if e == nil {
		return nil
	}
	if cfg.Gate == nil {
		return configError("Eviction", "set", "no Gate: nothing is refused without one, so nothing is ever revoked; set Gate to one that counts slots, such as gate.MaxInFlight")
	}
	for _, bc := range cfg.Bands {
		if bc.Guarantee > 0 {
			return nil // Eviction paces the guarantees' revocations too
		}
	}
	if len(cfg.Bands) < 2 {
		return configError("Eviction", "set", fmt.Sprintf("one band (priority %d): eviction revokes a band's admissions only for a higher band", cfg.Bands[0].Priority))
	}
	lowest := cfg.Bands[0].Priority
	for _, bc := range cfg.Bands[1:] {
		lowest = min(lowest, bc.Priority)
	}
	if lowest >= e.Below {
		return configError("Eviction.Below", e.Below, fmt.Sprintf("no band is below it (the lowest is %d), so no admission is ever revoked; raise Below above a band's priority, or add a sheddable band", lowest))
	}
	return nil
}
