package gate

import (
	"errors"
	"fmt"
	"time"
)

// UsageLimitPolicy gives each band a ceiling on the gate's saturation: a
// band may start a request only while the saturation is below its ceiling.
// It is llm-d-router's usage-limit policy, asked for one band at a time:
// [StaticUsageLimit], [PriorityHoldback] and [SoftReflectiveCeiling] are
// llm-d's three, under its type names and parameters. [Ceiling] applies
// one to a gate.
//
// A ceiling is a fraction of the gate's capacity: 0 holds the band back
// whatever the saturation, 1 lets it start until the gate itself refuses,
// and a value between reserves the rest for the bands above it. What the
// capacity is depends on the gate ([SaturationDetector]): the slots of a
// [MaxInFlight] limit, the requests or tokens of a [Concurrency] budget,
// the model servers' declared slots or their KV cache behind the
// saturation gate ([SaturationGate.Saturation]) — never the depth of
// their queues. A policy's ceilings must not grow as
// the priority falls (a lower band's ceiling is at most a higher band's
// at the same saturation), as llm-d requires of its policies, so that a
// band refused by its ceiling never has a band below it that its own
// ceiling would let start.
type UsageLimitPolicy interface {
	// TypeName is the policy's llm-d-router plugin type, such as
	// "priority-holdback-policy".
	TypeName() string
	// Ceiling returns the ceiling of band priorities[rank] at saturation
	// s, a number in [0, 1]. priorities lists the controller's
	// provisioned bands, highest first ([github.com/sluicegate/sluice/flowcontrol.FlowController.Priorities]);
	// it is shared and must not be modified. Ceiling is called with the
	// controller's lock held, from [Ceiling]'s TryAcquire, each time a
	// band's head is offered: it must be fast, must not block and must not
	// allocate (but for state it grows when bands are added).
	Ceiling(s float64, rank int, priorities []int) float64
}

// policyBinder is a policy with state of its own, guarded by the lock of
// the one controller its Ceiling serves, which Bind claims for it.
type policyBinder interface {
	bind(c Controller) error
}

// Ceiling returns inner with a ceiling for each band, which policy sets:
// the gate refuses a request of band p, before asking inner, while inner's
// saturation ([SaturationDetector]) is at or above p's ceiling,
// and otherwise asks inner; a ceiling of 1 (or more) refuses nothing
// itself and leaves the decision to inner. With [MaxInFlight](10) and a
// ceiling of 0.5 for band 0, band 0 starts a request only while fewer than
// 5 are in flight, of any band, and a band whose ceiling is 1 still fills
// all 10 slots. Behind the saturation gate with
// [SaturationConfig.SlotsPerEndpoint] 16 and four model servers, the same
// ceiling starts band 0 only while fewer than 32 of the servers' 64 slots
// are running or queued; without SlotsPerEndpoint, only while their KV
// caches are less than half full on average.
//
// Strict priority is unchanged. The controller offers the head of the
// highest waiting band only, so a band's ceiling is asked only when no
// band above it has a request waiting, and a refusal, like any gate's,
// stops dispatch until the next event: a low band held back by its ceiling
// never stops a higher one, whose requests are offered first at the next
// enqueue or Done. Since a policy's ceilings do not grow as the priority
// falls, nothing below a band its ceiling refuses could start either.
// llm-d-router asks the policy for every band in each dispatch cycle and
// stops at the first band gated, waiting or not; with such ceilings that
// is the same rule.
//
// The ranks are those of the controller's provisioned bands, read from
// [github.com/sluicegate/sluice/flowcontrol.FlowController.Priorities] at each offer, so a band
// provisioned at run time is ranked among the others from its first
// request. (Used before any controller binds it, or for a priority the
// controller has no band for, the gate ranks the priority as a lone band.)
//
// The gate keeps inner's optional interfaces as [All] does: it is a
// [MeteredGate], forwarding Took and Returned to inner when
// inner is metered and giving inner its slot back with Release otherwise;
// a [BoundGate], which binds inner and refuses a second
// controller; a [EndpointGate] reporting inner's NoEndpoints;
// a [SaturationDetector] reporting inner's saturation, so
// that ceilings nest; a [CeilingGate], whose BandCeiling
// tells in-flight eviction how far the saturation stands above a band's
// ceiling; a [LagGate] with inner's lag; and a
// [FirstTokenGate] when inner is one. A saturation that is not a number in [0, 1] reads as 1, and a
// ceiling that is not a number (NaN) refuses, so a gate or a policy gone
// wrong fails closed.
//
// Ceiling panics if inner or policy is nil, or if inner is not a
// [SaturationDetector]: every gate of this package and
// [MaxInFlight] are.
func Ceiling(inner Gate, policy UsageLimitPolicy) Gate {
	if inner == nil {
		panic("gate: Ceiling: inner gate is nil")
	}
	if policy == nil {
		panic("gate: Ceiling: policy is nil")
	}
	d, ok := inner.(SaturationDetector)
	if !ok {
		panic(fmt.Sprintf("gate: Ceiling: inner gate %s reports no saturation: it is not a SaturationDetector", nameOf(inner)))
	}
	g := &ceilingGate{allGate: newAll([]Gate{inner}), detector: d, policy: policy}
	if len(g.firstTokens) > 0 {
		return ceilingFirstToken{g}
	}
	return g
}

// ceilingGate is a Ceiling. Its allGate holds inner as its one child, which
// gives it inner's slots, costs, endpoints and saturation.
type ceilingGate struct {
	*allGate
	detector SaturationDetector // inner
	policy   UsageLimitPolicy
	fc       binding // claimed by Bind
	lone     [1]int  // the band list of a priority ranked alone; guarded by the controller's lock
}

// ServersPreempt reports false, whatever inner reports: a ceiling refuses
// a band on the pool's saturation, which a revocation lowers (see
// [PreemptingGate]).
func (g *ceilingGate) ServersPreempt() bool { return false }

// ceilingFirstToken is a Ceiling whose inner gate is a FirstTokenGate.
type ceilingFirstToken struct{ *ceilingGate }

// FirstToken tells inner.
func (g ceilingFirstToken) FirstToken(s Slot, d time.Duration) {
	g.firstTokens[0].FirstToken(s, d)
}

// TryAcquire refuses while inner's saturation is at or above the band's
// ceiling, and otherwise asks inner.
func (g *ceilingGate) TryAcquire(priority int) bool {
	return g.allows(priority) && g.children[0].tryAcquire(priority)
}

// allows reports whether inner's saturation is below the ceiling of band
// priority, or the ceiling is the whole of inner's capacity (1 or more),
// in which case inner alone decides — unless inner's saturation is not a
// number in [0, 1], which fails closed.
func (g *ceilingGate) allows(priority int) bool {
	s, valid := g.children[0].read()
	c := g.ceiling(s, priority)
	if c >= 1 {
		return valid
	}
	return s < c // false for a NaN ceiling
}

// BandCeiling returns the ceiling of band priority at inner's saturation
// now, for in-flight eviction to size its decisions
// ([CeilingGate]); 0 for a ceiling that is not a number.
func (g *ceilingGate) BandCeiling(priority int) float64 {
	c := g.ceiling(g.children[0].load(), priority)
	if !(c >= 0) {
		return 0
	}
	return min(c, 1)
}

// ceiling returns the policy's ceiling of band priority at saturation s.
func (g *ceilingGate) ceiling(s float64, priority int) float64 {
	var priorities []int
	if fc := g.fc.controller(); fc != nil {
		priorities = fc.Priorities()
	}
	rank, found := rankOf(priorities, priority)
	if !found {
		g.lone[0] = priority
		priorities, rank = g.lone[:], 0
	}
	return g.policy.Ceiling(s, rank, priorities)
}

// rankOf returns the index of p in priorities, which is sorted highest
// first, and whether p is there.
func rankOf(priorities []int, p int) (int, bool) {
	lo, hi := 0, len(priorities)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if priorities[m] > p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(priorities) && priorities[lo] == p
}

// Saturation returns inner's saturation, read as 1 when it is not a number
// in [0, 1].
func (g *ceilingGate) Saturation() float64 { return g.children[0].load() }

// Bind claims the gate, and its policy's state, for c, and binds inner. It
// refuses a second controller.
func (g *ceilingGate) Bind(c Controller) error {
	if !g.fc.claim(c) {
		return errors.New("gate: Ceiling already serves another controller")
	}
	if b, ok := g.policy.(policyBinder); ok {
		if err := b.bind(c); err != nil {
			g.fc.release(c)
			return fmt.Errorf("gate: Ceiling: %s: %w", g.policy.TypeName(), err)
		}
	}
	if b, ok := g.children[0].gate.(BoundGate); ok {
		if err := b.Bind(c); err != nil {
			unbind(g.policy, c)
			g.fc.release(c)
			return fmt.Errorf("gate: Ceiling: %s: %w", nameOf(b), err)
		}
	}
	return nil
}

func (g *ceilingGate) unbind(c Controller) {
	unbind(g.children[0].gate, c)
	unbind(g.policy, c)
	g.fc.release(c)
}

// String names the gate, its inner gate and its policy, as the
// controller's errors do.
func (g *ceilingGate) String() string {
	return fmt.Sprintf("Ceiling(%s, %s)", nameOf(g.children[0].gate), g.policy.TypeName())
}

// nameOf names g: its String, if it has one, or its type.
func nameOf(g Gate) string {
	if s, ok := g.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", g)
}

// checkFraction returns the error for a ceiling parameter outside [lo, hi]
// (open at lo or hi when said), NaN included; nil when v is in range.
func checkFraction(field, llmd string, v, lo, hi float64, openLo, openHi bool) error {
	in := v >= lo && v <= hi && !(openLo && v == lo) && !(openHi && v == hi)
	if in {
		return nil
	}
	l, h := "[", "]"
	if openLo {
		l = "("
	}
	if openHi {
		h = ")"
	}
	return configError(field, llmd, v, fmt.Sprintf("not a fraction in %s%v, %v%s", l, lo, hi, h))
}
