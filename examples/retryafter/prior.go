package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sluicegate/sluice/examples/internal/sim"
)

// BurstScenario is Scenario from a cold start: the batch tenant opens with
// its burst — 2 s at 300 req/s, then 16 req/s — beside the steady chat
// tenant, for 20 s of arrivals. The batch band fills within its first
// second of busy time, so its first refusals come before any drain rate is
// measured: what they are told is the prior's.
func BurstScenario(seed uint64) sim.Config {
	cfg := Scenario(seed)
	cfg.Duration = burstDuration
	cfg.Tenants[1].Phases = []sim.Phase{{Rate: 300, For: 2 * time.Second}, {Rate: 16}}
	return cfg
}

const burstDuration = 20 * time.Second

// rateOrPrior returns sc's busy-time drain rate at now, or before one is
// measured prior's.
func rateOrPrior(c *client, sc *scope, now time.Time, prior func(*client, *scope) float64) (float64, bool) {
	if r, ok := sc.busyRate(now); ok {
		return r, true
	}
	return prior(c, sc), true
}

// inFlightPrior is the prior the controller ships: the requests in flight
// (at least one) per flowcontrol.PriorServiceTime.
func inFlightPrior(service time.Duration) func(*client, *scope) float64 {
	return func(c *client, _ *scope) float64 { return float64(max(c.running, 1)) / service.Seconds() }
}

// PriorDesigns returns the candidate priors, in the order printed: what
// (d) — the measured rule the controller ships — sends to a refusal while
// the scope that refused it has no measured drain rate yet.
func PriorDesigns() []Design {
	spreadWith := func(prior func(c *client, sc *scope) float64) func(*client, time.Time, *scope, []*scope) time.Duration {
		return func(c *client, now time.Time, _ *scope, tripped []*scope) time.Duration {
			return spread(now, tripped, func(sc *scope, now time.Time) (float64, bool) {
				return rateOrPrior(c, sc, now, prior)
			})
		}
	}
	constant := func(d time.Duration) func(*client, time.Time, *scope, []*scope) time.Duration {
		return func(_ *client, now time.Time, _ *scope, tripped []*scope) time.Duration {
			if ra := spread(now, tripped, (*scope).busyRate); ra > 0 {
				return ra
			}
			return d
		}
	}
	return []Design{
		{Name: "(d), no prior", Definition: "(d), and no Retry-After before a drain rate is measured: the controller before",
			choose: func(_ *client, now time.Time, _ *scope, tripped []*scope) time.Duration {
				return spread(now, tripped, (*scope).busyRate)
			}},
		{Name: "(p1) 1 s", Definition: "(d), and 1 s to every refusal before a drain rate is measured",
			choose: constant(time.Second)},
		{Name: "(p2) 5 s", Definition: "(d), and 5 s to every refusal before a drain rate is measured",
			choose: constant(5 * time.Second)},
		{Name: "(p3) capacity ÷ TTL", Definition: "(d), spread at the scope's capacity ÷ its TTL (the least rate a full queue empties at) until a rate is measured",
			choose: spreadWith(func(_ *client, sc *scope) float64 {
				return float64(sc.capacity) / sc.ttl.Seconds()
			})},
		{Name: "(p4) in-flight ÷ 1 s", Definition: "(d), spread at the requests in flight (at least 1) ÷ a 1 s service time until a rate is measured",
			choose: spreadWith(inFlightPrior(time.Second))},
		{Name: "(p5) in-flight ÷ 0.5 s", Definition: "(p4) with a 0.5 s service time",
			choose: spreadWith(inFlightPrior(500 * time.Millisecond))},
		{Name: "(p6) in-flight ÷ 2 s", Definition: "(p4) with a 2 s service time",
			choose: spreadWith(inFlightPrior(2 * time.Second))},
		{Name: "controller", Definition: "the controller's own RejectionError.RetryAfter"},
	}
}

// printPriorHeader describes the cold-start scenario and the priors.
func printPriorHeader(out io.Writer, designs []Design) {
	fmt.Fprintln(out, "The prior: a cold start, the same bands, pool and clients; chat 12 req/s; batch 2 s at 300 req/s, then 16 req/s; 20 s of arrivals")
	fmt.Fprintln(out)
	for _, d := range designs {
		fmt.Fprintf(out, "  %-24s %s\n", d.Name, d.Definition)
	}
	fmt.Fprintln(out)
}
