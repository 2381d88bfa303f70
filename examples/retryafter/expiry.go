package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
)

// ExpiryScenario is Scenario with a batch TTL of 3 s: the batch band's
// queue outgrows what drains in 3 s late in each 16 req/s stretch and in
// every burst, so its requests expire (rejected-ttl-expired) as well as
// being refused for capacity.
func ExpiryScenario(seed uint64) sim.Config {
	cfg := Scenario(seed)
	cfg.Controller.Bands[1].TTL = expiryTTL
	return cfg
}

const expiryTTL = 3 * time.Second

// DeepExpiryScenario is an operator's sustained overload: the batch band
// holds up to 300 requests with a 10 s TTL, and batch arrives at 20 req/s
// for the whole run, more than the pool leaves it beside the chat band, so
// its queue stays deeper than it drains in 10 s.
func DeepExpiryScenario(seed uint64) sim.Config {
	cfg := Scenario(seed)
	cfg.Controller.Bands[1].TTL = deepTTL
	cfg.Controller.Bands[1].RequestCapacity = capacity.Bounded(deepBatchCap)
	cfg.Controller.RequestCapacity = capacity.Bounded(chatCap + deepBatchCap)
	cfg.Tenants[1].Phases = []sim.Phase{{Rate: 20}}
	return cfg
}

const (
	deepTTL      = 10 * time.Second
	deepBatchCap = 300
)

// ExpiryDesigns returns the candidate Retry-After values of an expiry, in
// the order printed. Every design answers capacity rejections as the
// controller does — (d) with the in-flight prior — and differs only in
// what it sends with rejected-ttl-expired.
func ExpiryDesigns() []Design {
	capacity := func(c *client, now time.Time, _ *scope, tripped []*scope) time.Duration {
		return spread(now, tripped, func(sc *scope, now time.Time) (float64, bool) {
			return rateOrPrior(c, sc, now, inFlightPrior(flowcontrol.PriorServiceTime))
		})
	}
	rate := func(c *client, band *scope, now time.Time) float64 {
		r, _ := rateOrPrior(c, band, now, inFlightPrior(flowcontrol.PriorServiceTime))
		return r
	}
	return []Design{
		{Name: "expired: none", Definition: "no Retry-After with rejected-ttl-expired: clients use their backoff (the controller before)",
			choose: capacity},
		{Name: "expired: spread", Definition: "the band's next promise, as a capacity rejection of the band gets: one drain interval after the last",
			choose: capacity,
			expired: func(c *client, now time.Time, band *scope) time.Duration {
				return spread(now, []*scope{band}, func(sc *scope, now time.Time) (float64, bool) {
					return rateOrPrior(c, sc, now, inFlightPrior(flowcontrol.PriorServiceTime))
				})
			}},
		{Name: "expired: queue ÷ rate", Definition: "the band's queue at the expiry ÷ its drain rate: when what waits now has left; at least 1 s, capped 30 s",
			choose: capacity,
			expired: func(c *client, now time.Time, band *scope) time.Duration {
				r := rate(c, band, now)
				if r <= 0 {
					return maxRetryAfter
				}
				d := time.Duration(float64(band.queued) / r * float64(time.Second))
				return min(max(d, time.Second), maxRetryAfter)
			}},
		{Name: "expired: behind the queue", Definition: "the band's next promise, but no sooner than its queue ÷ its drain rate less the TTL waited: when what waits now has drained enough to serve it in time",
			choose: capacity,
			expired: func(c *client, now time.Time, band *scope) time.Duration {
				r, ok := rateOrPrior(c, band, now, inFlightPrior(flowcontrol.PriorServiceTime))
				if !ok {
					return 0
				}
				interval := maxRetryAfter
				if r > 0 {
					interval = time.Duration(float64(time.Second) / r)
				}
				at := now
				if behind := float64(band.queued)/max(r, 1e-9) - band.ttl.Seconds(); behind > 0 {
					at = now.Add(time.Duration(min(behind, maxRetryAfter.Seconds()) * float64(time.Second)))
				}
				if band.promised.After(at) {
					at = band.promised
				}
				if at = at.Add(interval); at.After(now.Add(maxRetryAfter)) {
					at = now.Add(maxRetryAfter)
				}
				band.promised = at
				return at.Sub(now)
			}},
		{Name: "expired: one interval", Definition: "one drain interval of the band (1/rate), not spread: at least 1 s, capped 30 s",
			choose: capacity,
			expired: func(c *client, now time.Time, band *scope) time.Duration {
				r := rate(c, band, now)
				if r <= 0 {
					return maxRetryAfter
				}
				return min(max(time.Duration(float64(time.Second)/r), time.Second), maxRetryAfter)
			}},
		{Name: "controller", Definition: "the controller's own RejectionError.RetryAfter"},
	}
}

// printExpiryHeader describes the expiry scenario and the designs.
func printExpiryHeader(out io.Writer, designs []Design) {
	fmt.Fprintln(out, "Expiries: Scenario with a batch TTL of 3 s")
	fmt.Fprintln(out)
	for _, d := range designs {
		fmt.Fprintf(out, "  %-24s %s\n", d.Name, d.Definition)
	}
	fmt.Fprintln(out)
}
