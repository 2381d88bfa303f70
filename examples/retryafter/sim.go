package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
)

// The scenario's bands and capacities.
const (
	chatBand, batchBand   = 10, 0
	chatCap, batchCap     = 32, 64
	globalCap             = 80
	idleThreshold         = 30 * time.Second // an idle stretch this long precedes a "first Retry-After after idle"
	defaultSeeds          = 20
	defaultDurationPeriod = 5 * time.Minute
)

// Scenario returns the workload every design is measured on: 16 slots
// (four servers of four) behind two bands and a global capacity; a chat
// tenant at a steady 12 req/s in band 10, and a batch tenant in band 0 that
// cycles every 100 s through 40 s at 16 req/s (together 1.06× the pool),
// 45 s idle, a 5 s burst at 120 req/s and 10 s at 16 req/s. Every client
// retries like the OpenAI SDKs — the Retry-After of a capacity rejection if
// there is one (up to 60 s), otherwise a backoff of 0.5 s doubling to 8 s —
// up to 6 attempts, and gives up when the next attempt would start more than
// 2 minutes after the first.
func Scenario(seed uint64) sim.Config {
	retry := sim.Retry{MaxAttempts: 6, GiveUpAfter: 2 * time.Minute,
		Backoff: 500 * time.Millisecond, MaxBackoff: 8 * time.Second, MaxRetryAfter: time.Minute}
	return sim.Config{
		Seed:     seed,
		Duration: defaultDurationPeriod,
		Controller: flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{
				{Priority: chatBand, RequestCapacity: capacity.Bounded(chatCap), TTL: 15 * time.Second},
				{Priority: batchBand, RequestCapacity: capacity.Bounded(batchCap), TTL: 30 * time.Second},
			},
			RequestCapacity: capacity.Bounded(globalCap),
			// One flow per band: the comparison is about Retry-After, not
			// about which flow a full band displaces.
			NoDisplacement: true,
		},
		Pool: sim.PoolConfig{Servers: 4, Slots: 4, Base: 20 * time.Millisecond,
			PerPromptToken: 100 * time.Microsecond, PerOutputToken: 5 * time.Millisecond},
		Tenants: []sim.Tenant{
			{Name: "chat", Priority: chatBand,
				PromptTokens: sim.Tokens{Mean: 600, Sigma: 0.5}, OutputTokens: sim.Tokens{Mean: 60, Sigma: 0.6},
				Phases: []sim.Phase{{Rate: 12}}, Retry: retry},
			{Name: "batch", Priority: batchBand,
				PromptTokens: sim.Tokens{Mean: 1500, Sigma: 0.4}, OutputTokens: sim.Tokens{Mean: 120, Sigma: 0.5},
				Phases: []sim.Phase{
					{Rate: 16, For: 40 * time.Second},
					{Rate: 0, For: 45 * time.Second},
					{Rate: 120, For: 5 * time.Second},
					{Rate: 16, For: 10 * time.Second},
				},
				Retry: retry},
		},
	}
}

// Design is one way of choosing the Retry-After of a refusal.
type Design struct {
	Name string
	// Definition says exactly what it sends.
	Definition string
	// choose returns the Retry-After for a rejection at now, given the
	// scopes that refused it (the band, the global capacity, or both); 0
	// means none. Nil for the controller's own.
	choose func(c *client, now time.Time, band *scope, tripped []*scope) time.Duration
	// expired, if set, returns the Retry-After of a rejected-ttl-expired
	// from band at now; nil sends none.
	expired func(c *client, now time.Time, band *scope) time.Duration
	// retryAfterMs: the value is sent in milliseconds as well (the
	// OpenAI SDKs read retry-after-ms before Retry-After), so the client
	// waits exactly that long rather than the whole seconds.
	retryAfterMs bool
}

// Designs returns the designs compared, in the order printed.
func Designs() []Design {
	return []Design{
		{Name: "none", Definition: "no Retry-After: clients use their backoff",
			choose: func(*client, time.Time, *scope, []*scope) time.Duration { return 0 }},
		{Name: "(a) queue ÷ rate", Definition: "the band's queue ÷ its dispatch rate (wall-clock EWMA), rounded up, clamped to [1 s, 30 s]; global rejections too",
			choose: queueOverRate},
		{Name: "(b) 1/rate, llm-d #2487", Definition: "1/rate of the scope that tripped (the longer if both), wall-clock EWMA, rounded up, capped 30 s, omitted under 1 s",
			choose: inverseRate},
		{Name: "(c) spread", Definition: "per tripped scope, promise max(last promise, now) + 1/rate (wall-clock EWMA), capped now + 30 s; send the latest, rounded up",
			choose: func(_ *client, now time.Time, _ *scope, tripped []*scope) time.Duration {
				return spread(now, tripped, (*scope).wallRate)
			}},
		{Name: "(d) spread, busy rate", Definition: "(c) with the rate measured over busy time only: dispatches from the queue per second the queue had waiters",
			choose: func(_ *client, now time.Time, _ *scope, tripped []*scope) time.Duration {
				return spread(now, tripped, (*scope).busyRate)
			}},
		{Name: "(e) (d) in ms", Definition: "(d) sent to the millisecond (retry-after-ms), not rounded up to whole seconds",
			retryAfterMs: true,
			choose: func(_ *client, now time.Time, _ *scope, tripped []*scope) time.Duration {
				return spreadExact(now, tripped, (*scope).busyRate)
			}},
		{Name: "controller", Definition: "the controller's own RejectionError.RetryAfter"},
	}
}

// scope is a capacity that can refuse a request — one band's, or the
// global one — with what a client-side policy can observe of it.
type scope struct {
	queued, capacity int64
	wall             wallMeter
	// busy is the controller's own meter, fed from what the client sees:
	// the queue's length at each poll, and dispatches that had queued.
	busy     flowcontrol.DrainMeter
	promised time.Time
	// For the "first after idle" column: when the queue last emptied, and
	// whether the current busy stretch followed an idle one of at least
	// idleThreshold and has not refused anything yet.
	idleSince time.Time
	afterIdle bool
	// ttl is the band's queue-wait TTL; for the global scope, the longest
	// band's.
	ttl time.Duration
}

func (sc *scope) wallRate(now time.Time) (float64, bool) { return sc.wall.rate(now) }
func (sc *scope) busyRate(now time.Time) (float64, bool) { return sc.busy.Rate(now) }

// full reports whether one more request would exceed the scope.
func (sc *scope) full() bool { return sc.queued >= sc.capacity }

// setQueued records the scope's queue length at now.
func (sc *scope) setQueued(now time.Time, n int64) {
	switch busy, wasBusy := n > 0, sc.queued > 0; {
	case busy && !wasBusy:
		sc.afterIdle = !sc.idleSince.IsZero() && now.Sub(sc.idleSince) >= idleThreshold
		sc.busy.Busy(now)
	case !busy && wasBusy:
		sc.idleSince = now
		sc.busy.Idle(now)
	}
	sc.queued = n
}

func queueOverRate(_ *client, now time.Time, band *scope, _ []*scope) time.Duration {
	r, ok := band.wall.rate(now)
	if !ok {
		return 0
	}
	if r <= 0 {
		return maxRetryAfter
	}
	d := time.Duration(float64(band.queued) / r * float64(time.Second))
	return min(max(ceilSeconds(d), time.Second), maxRetryAfter)
}

func inverseRate(_ *client, now time.Time, _ *scope, tripped []*scope) time.Duration {
	var longest time.Duration
	for _, sc := range tripped {
		r, ok := sc.wall.rate(now)
		switch {
		case !ok:
		case r <= 0:
			longest = maxRetryAfter
		default:
			longest = max(longest, time.Duration(float64(time.Second)/r))
		}
	}
	if longest < time.Second {
		return 0
	}
	return min(ceilSeconds(longest), maxRetryAfter)
}

func spread(now time.Time, tripped []*scope, rate func(*scope, time.Time) (float64, bool)) time.Duration {
	return ceilSeconds(spreadExact(now, tripped, rate))
}

// spreadExact promises each rejection, in each scope that refused it, one
// drain interval after the previous promise and no sooner than one from
// now, and returns the latest promise as a wait from now.
func spreadExact(now time.Time, tripped []*scope, rate func(*scope, time.Time) (float64, bool)) time.Duration {
	var wait time.Duration
	for _, sc := range tripped {
		r, ok := rate(sc, now)
		if !ok {
			continue
		}
		interval := maxRetryAfter
		if r > 0 {
			interval = time.Duration(float64(time.Second) / r)
		}
		at := now
		if sc.promised.After(at) {
			at = sc.promised
		}
		at = at.Add(interval)
		if limit := now.Add(maxRetryAfter); at.After(limit) {
			at = limit
		}
		sc.promised = at
		wait = max(wait, at.Sub(now))
	}
	return wait
}

// client is the client-side observer of one run: it follows the
// controller's queues through Observe and Submitted, and answers each
// capacity rejection with its design's Retry-After.
type client struct {
	design  Design
	bands   map[int]*scope
	order   []int // band priorities, for a deterministic walk
	global  scope
	running int // requests the servers run, at the last poll

	sent []time.Duration // every Retry-After sent with a capacity rejection (0: none)
	// expiredSent: every Retry-After sent with rejected-ttl-expired.
	expiredSent []time.Duration
	afterIdle   []time.Duration // the first of each busy stretch after idle
}

func newClient(d Design, cfg *sim.Config) *client {
	c := &client{design: d, bands: map[int]*scope{}}
	c.global.capacity, _ = cfg.Controller.RequestCapacity.Value()
	for _, b := range cfg.Controller.Bands {
		n, _ := b.RequestCapacity.Value()
		c.bands[b.Priority] = &scope{capacity: n, ttl: b.TTL}
		c.order = append(c.order, b.Priority)
		c.global.ttl = max(c.global.ttl, b.TTL)
	}
	return c
}

// poll reads every band's queue length.
func (c *client) poll(s *sim.Sim) {
	now := s.Clock().Now()
	c.running = s.Pool().Running()
	var total int64
	for _, p := range c.order {
		snap, err := s.Controller().CapacitySnapshot(p)
		if err != nil {
			panic(err)
		}
		c.bands[p].setQueued(now, snap.QueuedRequests)
		total += snap.QueuedRequests
	}
	c.global.setQueued(now, total)
}

func (c *client) observe(s *sim.Sim, ev flowcontrol.Event) {
	if ev.Outcome == flowcontrol.OutcomeDispatched {
		now := s.Clock().Now()
		b := c.bands[ev.Effective.Priority]
		b.wall.dispatched(now)
		c.global.wall.dispatched(now)
		if ev.QueueTime > 0 {
			b.busy.Dispatched(now)
			c.global.busy.Dispatched(now)
		}
	}
	c.poll(s)
}

func (c *client) retryAfter(s *sim.Sim, rej *flowcontrol.RejectionError) time.Duration {
	now := s.Clock().Now()
	band := c.bands[rej.Effective.Priority]
	if rej.Outcome == flowcontrol.OutcomeRejectedTTLExpired {
		var ra time.Duration
		switch {
		case c.design.choose == nil:
			ra = rej.RetryAfter
		case c.design.expired != nil:
			ra = ceilSeconds(c.design.expired(c, now, band))
		}
		c.expiredSent = append(c.expiredSent, ra)
		return ra
	}
	if rej.Outcome != flowcontrol.OutcomeRejectedSaturated { // displacements included
		return 0 // no design here sends one with another outcome
	}
	var tripped []*scope
	if band.full() {
		tripped = append(tripped, band)
	}
	if c.global.full() {
		tripped = append(tripped, &c.global)
	}
	if len(tripped) == 0 {
		tripped = append(tripped, band) // another limit (bytes): project from the band
	}
	var ra time.Duration
	if c.design.choose == nil {
		ra = rej.RetryAfter
	} else {
		ra = c.design.choose(c, now, band, tripped)
		if !c.design.retryAfterMs {
			ra = ceilSeconds(ra)
		}
	}
	c.sent = append(c.sent, ra)
	for _, sc := range tripped {
		if sc.afterIdle {
			sc.afterIdle = false
			c.afterIdle = append(c.afterIdle, ra)
		}
	}
	return ra
}

// Result is what one design achieved on one seed.
type Result struct {
	Design string
	sim.Summary
	// Goodput is served requests per second, from the start until the
	// last one was served.
	Goodput float64
	// P50, P95, P99 are end-to-end latencies of served requests, retries
	// included.
	P50, P95, P99 time.Duration
	// RetryAfters are the values sent, in order (0: none); AfterIdle the
	// first sent in each busy stretch that followed an idle one.
	RetryAfters, AfterIdle []time.Duration
	// ExpiredRetryAfters are the values sent with rejected-ttl-expired.
	ExpiredRetryAfters []time.Duration
}

// Run plays Scenario of seed once per design.
func Run(seed uint64, designs []Design) ([]Result, error) {
	return RunScenario(Scenario, seed, designs)
}

// RunScenario plays scenario of seed once per design.
func RunScenario(scenario func(seed uint64) sim.Config, seed uint64, designs []Design) ([]Result, error) {
	var out []Result
	for _, d := range designs {
		cfg := scenario(seed)
		c := newClient(d, &cfg)
		cfg.Observe = c.observe
		cfg.Submitted = func(s *sim.Sim, _ *sim.Record) { c.poll(s) }
		cfg.RetryAfter = c.retryAfter
		recs, err := sim.Run(cfg)
		if err != nil {
			return nil, err
		}
		sum := sim.Summarize(recs, nil)
		var last time.Duration
		for _, r := range recs {
			if r.Served {
				last = max(last, r.End)
			}
		}
		out = append(out, Result{
			Design: d.Name, Summary: sum,
			Goodput: float64(sum.Served) / last.Seconds(),
			P50:     sim.Percentile(sum.Latency, 50), P95: sim.Percentile(sum.Latency, 95), P99: sim.Percentile(sum.Latency, 99),
			RetryAfters: c.sent, AfterIdle: c.afterIdle, ExpiredRetryAfters: c.expiredSent,
		})
	}
	return out, nil
}

// Aggregate is one design over many seeds: its wasted retries, goodput,
// p95 latency (seconds) and give-ups.
type Aggregate struct {
	Design                        string
	Wasted, Goodput, P95, GiveUps sim.Spread
	wasted, goodput, p95, giveUps []float64
}

// Compare runs Scenario over seeds 1..n and aggregates each design.
func Compare(n int, designs []Design) ([]Aggregate, error) {
	return CompareScenario(Scenario, n, designs)
}

// CompareScenario runs scenario over seeds 1..n and aggregates each design.
func CompareScenario(scenario func(seed uint64) sim.Config, n int, designs []Design) ([]Aggregate, error) {
	perSeed, err := sim.OverSeeds(sim.SeedRange(1, uint64(n)), func(seed uint64) ([]Result, error) {
		return RunScenario(scenario, seed, designs)
	})
	if err != nil {
		return nil, err
	}
	aggs := make([]Aggregate, len(designs))
	for i, d := range designs {
		aggs[i].Design = d.Name
	}
	for _, results := range perSeed {
		for i, r := range results {
			a := &aggs[i]
			a.wasted = append(a.wasted, float64(r.WastedRetries))
			a.goodput = append(a.goodput, r.Goodput)
			a.p95 = append(a.p95, r.P95.Seconds())
			a.giveUps = append(a.giveUps, float64(r.GaveUp))
		}
	}
	for i := range aggs {
		a := &aggs[i]
		a.Wasted, a.Goodput, a.P95, a.GiveUps = sim.SpreadOf(a.wasted), sim.SpreadOf(a.goodput), sim.SpreadOf(a.p95), sim.SpreadOf(a.giveUps)
	}
	return aggs, nil
}

// PrintAggregates writes the many-seed table.
func PrintAggregates(out io.Writer, aggs []Aggregate) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "design\twasted retries\tgoodput req/s\tp95 latency s\tgive-ups\t")
	for _, a := range aggs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", a.Design,
			fmtSpread(a.Wasted, "%.0f"), fmtSpread(a.Goodput, "%.2f"), fmtSpread(a.P95, "%.1f"), fmtSpread(a.GiveUps, "%.0f"))
	}
	tw.Flush()
}

func fmtSpread(s sim.Spread, f string) string {
	return fmt.Sprintf(f+" / "+f+" / "+f, s.Min, s.Median, s.Max)
}

// PrintDetail writes the one-seed table.
func PrintDetail(out io.Writer, results []Result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "design\trequests\tattempts\tcapacity rejections\texpired\tretries\twasted retries\tgoodput req/s\tp50 s\tp95 s\tp99 s\tgive-ups\tRetry-After sent\tmean s\tfirst after idle s\t")
	for _, r := range results {
		var n int
		var sum time.Duration
		for _, ra := range r.RetryAfters {
			if ra > 0 {
				n++
				sum += ra
			}
		}
		mean := "-"
		if n > 0 {
			mean = fmt.Sprintf("%.1f", (sum / time.Duration(n)).Seconds())
		}
		var idle []string
		for _, ra := range r.AfterIdle {
			idle = append(idle, strconv.FormatFloat(ra.Seconds(), 'g', 3, 64))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.1f\t%.1f\t%.1f\t%d\t%d of %d\t%s\t%s\t\n",
			r.Design, r.Requests, r.Attempts, r.CapacityRejections(), r.Drops[flowcontrol.OutcomeRejectedTTLExpired],
			r.Retries, r.WastedRetries, r.Goodput, r.P50.Seconds(), r.P95.Seconds(), r.P99.Seconds(), r.GaveUp,
			n, len(r.RetryAfters), mean, strings.Join(idle, " "))
	}
	tw.Flush()
}

// printHeader describes the scenario and the designs.
func printHeader(out io.Writer, designs []Design) {
	fmt.Fprintln(out, "16 slots (4 servers × 4); band 10 capacity 32, band 0 capacity 64, global capacity 80")
	fmt.Fprintln(out, "chat: 12 req/s in band 10; batch in band 0, every 100 s: 40 s at 16 req/s, 45 s idle, 5 s at 120 req/s, 10 s at 16 req/s")
	fmt.Fprintln(out, "clients: honour Retry-After up to 60 s, else backoff 0.5 s doubling to 8 s; 6 attempts; give up after 2 min")
	fmt.Fprintln(out, "5 minutes of arrivals, run until every request has ended")
	fmt.Fprintln(out)
	for _, d := range designs {
		fmt.Fprintf(out, "  %-24s %s\n", d.Name, d.Definition)
	}
	fmt.Fprintln(out)
}
