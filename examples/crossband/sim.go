package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// The scenario: a batch backlog of long generations beside
// bursty interactive chat, on 4 servers of 16 slots behind a gate of 64.
const (
	servers, slotsPerServer = 4, 16
	maxInFlight             = servers * slotsPerServer
	base                    = 50 * time.Millisecond
	perPromptToken          = 50 * time.Microsecond
	perOutputToken          = 20 * time.Millisecond
	simDuration             = 5 * time.Minute

	chatBand, batchBand = 10, -1
	chatPrompt          = 500
	chatOutput          = 150
	chatSLO             = time.Second
	quietRate, busyRate = 3, 12 // chat requests per second
	quietFor, busyFor   = 20 * time.Second, 10 * time.Second

	// batchThink is each batch client's mean think time (exponential)
	// before each request. Without one the 120 clients would start at the
	// same instant and, their generations all 20.1 s long, end in lockstep
	// waves that free the whole pool at once every 20.1 s: an artefact
	// that no real backlog shows. With it they drift apart within a few
	// cycles.
	batchClients = 120
	batchThink   = 2 * time.Second
	batchPrompt  = 1000
	batchOutput  = 1000

	// scrapeInterval is how often the router reads the servers' metrics
	// in the runs with gate.Saturation, examples/gates' interval.
	scrapeInterval = 100 * time.Millisecond
)

// batchRetry is the batch clients' dispatcher: an evicted request is sent
// again after the Retry-After its 429 carries (up to a minute, as the
// OpenAI SDKs honour it), or after a backoff without one, until it is
// served. Nothing else drops a batch request in this scenario (no band
// has a capacity or a TTL), so without revocations it never retries.
var batchRetry = sim.Retry{MaxAttempts: 1000, Backoff: time.Second, MaxBackoff: 8 * time.Second, MaxRetryAfter: time.Minute}

// Traffic is the load on the pool: how chat's phases run and what batch's
// clients send.
type Traffic struct {
	Name string
	// RandomPhases draws each chat phase's length from an exponential
	// distribution of mean quietFor or busyFor (sim.Tenant.RandomPhases).
	RandomPhases bool
	// BatchThink is each batch client's mean think time (0: none), and
	// BatchOutput its requests' output lengths.
	BatchThink  time.Duration
	BatchOutput sim.Tokens
}

// FixedBursts is the main table's traffic (chat in fixed phases of 20 s
// at 3 req/s and 10 s at 12 req/s; batch outputs of 1,000 tokens, 2 s of
// think time), and Bursts the previous round's: chat in random bursts (phases of 3 and 12 req/s, exponential lengths of
// mean 20 s and 10 s), batch clients with no think time and log-normal
// outputs of mean 1,000 tokens (σ 1: a median of 607 tokens, one in ten
// above 2,200).
var (
	FixedBursts = Traffic{Name: "fixed bursts, 1,000-token batch outputs, 2 s think time", BatchThink: batchThink, BatchOutput: sim.Tokens{Mean: batchOutput}}
	Bursts      = Traffic{Name: "random bursts, log-normal batch outputs, no think time", RandomPhases: true,
		BatchOutput: sim.Tokens{Mean: batchOutput, Sigma: burstsOutputSigma}}
)

// burstsOutputSigma is the shape of Bursts' batch outputs.
const burstsOutputSigma = 1

// Variant is one row of the table: how the gate in front of the pool treats
// the two bands.
type Variant struct {
	Name string
	// Policy, if set, puts gate.Ceiling with it over the setup's gate
	// (MaxInFlight(64)); otherwise that gate is alone: strict priority.
	Policy func() (gate.UsageLimitPolicy, error)
	// ChatAlone runs the chat tenant without the batch clients: the bound
	// every other row is measured against.
	ChatAlone bool
	// Ceiling marks the rows with a ceiling policy.
	Ceiling bool
	// Eviction, if set, turns on the controller's in-flight eviction
	// with these knobs: chat, when the gate refuses it, revokes running
	// batch requests.
	Eviction *flowcontrol.Eviction
	// ChatGuarantee and BatchGuarantee are the bands' guaranteed shares
	// of the gate (BandConfig.Guarantee): chat, short of its share,
	// revokes batch requests beyond batch's own share until it has it.
	ChatGuarantee, BatchGuarantee float64
	// HandOff runs the servers as vLLM with --scheduling-policy priority
	// (sim.Priority, each with its own queue) and hands each request's
	// band to its server as its priority (−band: chat −10 runs before
	// batch 1); a chat request that finds a server's slots taken preempts
	// a batch request there, which keeps its decoded tokens and recomputes
	// its prefill when it runs again.
	HandOff bool
	// MaxInFlight, if positive, replaces the setup's MaxInFlight(64):
	// a hand-off needs the router to send chat beyond the slots.
	MaxInFlight int
	// Saturation puts the row behind gate.Saturation, as Setup.Saturation
	// puts a whole setup.
	Saturation bool
	// PriorityScheduling tells gate.Saturation that the servers schedule
	// by the priority handed to them
	// (gate.SaturationConfig.PriorityScheduling): chat passes batch's
	// queued work while fewer chat requests than the servers' slots are
	// in flight.
	PriorityScheduling bool
	// PrioritySlots replaces MaxInFlight with gate.PriorityMaxInFlight of
	// the same limit: chat passes the slots while batch runs in some.
	PrioritySlots bool
}

// saturation reports whether v runs behind gate.Saturation.
func (v Variant) saturation(setup Setup) bool { return setup.Saturation || v.Saturation }

// Reclaims reports whether v makes running batch requests give way at
// the router: eviction, or a guarantee taken back.
func (v Variant) Reclaims() bool { return v.Eviction != nil || v.ChatGuarantee > 0 }

// Setup is the router in front of the pool: the gate, and how many
// replicas share the pool.
type Setup struct {
	Name string
	// Saturation replaces MaxInFlight(64) with gate.Saturation (llm-d's
	// defaults but QueueDepthThreshold) over the servers' metrics,
	// scraped every scrapeInterval;
	// admitted requests then wait in the queue of the server they are
	// sent to (sim.PoolConfig.ServerQueues), whose depth the gate reads.
	Saturation bool
	// QueueDepthThreshold is the saturation gate's; 0 means llm-d's
	// default, 5.
	QueueDepthThreshold int
	// Replicas routers share the pool, each with its own controller and
	// MaxInFlight(64 / Replicas); attempts go to them in turn. 0 means 1.
	Replicas int
	// Rows are the variants it runs, strict priority first.
	Rows []Variant
	// Traffic is the load; nil means FixedBursts.
	Traffic *Traffic
}

// traffic returns setup's load.
func (setup Setup) traffic() Traffic {
	if setup.Traffic == nil {
		return FixedBursts
	}
	return *setup.Traffic
}

func static(threshold float64) func() (gate.UsageLimitPolicy, error) {
	return func() (gate.UsageLimitPolicy, error) { return gate.StaticUsageLimit(threshold) }
}

func holdback(minCeiling float64) func() (gate.UsageLimitPolicy, error) {
	return func() (gate.UsageLimitPolicy, error) {
		return gate.PriorityHoldback(gate.PriorityHoldbackConfig{MinCeiling: minCeiling})
	}
}

// The knobs of the rows that make running batch requests give way.
var (
	// llmdEviction is llm-d-router's eviction as it ships: at most 2
	// revocations per decision, 500 ms of grace after each confirmation.
	llmdEviction = flowcontrol.Eviction{MaxPerDecision: 2, Grace: 500 * time.Millisecond}
	// tunedEviction is the eviction this scenario calls for. Grace is
	// the chat SLO's slack, less a margin: a chat request that finds the
	// pool full waits at most one grace for the next decision, and the
	// first token comes a 75 ms prefill after that, within the 1 s SLO,
	// while slots that free meanwhile serve it without a revocation.
	// MaxPerDecision then must cover the chat requests that can queue in
	// one grace: at a burst's 12 req/s, 9.6 on average, more than 16 in
	// about 2% of graces (Poisson).
	tunedEviction = flowcontrol.Eviction{MaxPerDecision: 16, Grace: 800 * time.Millisecond}
)

// Guarantees. Alone, chat's share must cover a burst's need (12 req/s ×
// 3.075 s of service ≈ 37 of the 64 slots) and its Poisson swings: 0.7
// (45 slots) is the least of 0.5, 0.6, 0.65, 0.7 and 0.75 that meets the
// SLO on every seed. Beside eviction a chat share changes nothing, since
// eviction takes from the sheddable band whatever chat waits for; what
// lending adds there is batch's share, the floor eviction may not take:
// 0.2, what is left beside chat's burst and two of its standard
// deviations (37 + 2×√37 ≈ 49 slots, a share of 0.8).
const (
	lendingChat                 = 0.7
	evictionChat, evictionBatch = 0.8, 0.2
)

// Variants are the rows of the table. With two bands, priority-holdback
// gives chat the ceiling 1 and batch MinCeiling, so its rows are the
// issue's "batch ≤ x% of slots"; static-usage-limit gives both bands the
// same ceiling, as llm-d's policy does. The last rows make running batch
// requests give way: lending (chat's guaranteed share, taken back by
// revocation; paced as Eviction's zero value paces it, with no grace
// behind MaxInFlight), eviction with Sluice's defaults (those of
// llm-d-router but the grace, which is the gate's lag: none for
// MaxInFlight), with llm-d-router's and tuned, and both together.
var Variants = []Variant{
	{Name: "strict priority"},
	{Name: "chat alone (the bound)", ChatAlone: true},
	{Name: "static-usage-limit 0.75", Policy: static(0.75), Ceiling: true},
	{Name: "static-usage-limit 0.5", Policy: static(0.5), Ceiling: true},
	{Name: "priority-holdback min 0.75", Policy: holdback(0.75), Ceiling: true},
	{Name: "priority-holdback min 0.5", Policy: holdback(0.5), Ceiling: true},
	{Name: "priority-holdback min 0.25", Policy: holdback(0.25), Ceiling: true},
	{Name: "soft-reflective-ceiling", Policy: func() (gate.UsageLimitPolicy, error) { return gate.SoftReflectiveCeiling(), nil }, Ceiling: true},
	{Name: "lending, chat guarantee 0.7", ChatGuarantee: lendingChat},
	{Name: "eviction, Sluice defaults (2, no grace)", Eviction: &flowcontrol.Eviction{}},
	{Name: "eviction, llm-d defaults (2, 500ms)", Eviction: &llmdEviction},
	{Name: "eviction, tuned (16, 800ms)", Eviction: &tunedEviction},
	{Name: "lending 0.8/0.2 + eviction (16, 800ms)", ChatGuarantee: evictionChat, BatchGuarantee: evictionBatch, Eviction: &tunedEviction},
}

// row returns the row of Variants named name.
func row(name string) Variant {
	for _, v := range Variants {
		if v.Name == name {
			return v
		}
	}
	panic("crossband: no row " + name)
}

// MainSetup is the table's router: one, with MaxInFlight(64).
var MainSetup = Setup{Name: "one router, MaxInFlight(64)"}

// Setups are the other routers the scenario runs behind, each with a few
// rows: a saturation gate over scraped metrics, with llm-d's defaults
// (and a band ceiling on the servers' declared slots) and with a
// queue-depth threshold of 1, and two replicas. Behind a
// saturation gate, Sluice's default eviction has the grace of the gate's
// lag (gate.LagGate: its staleness threshold, 200ms), and lending
// alone shows a guarantee behind a gate whose view lags, paced the same.
var Setups = []Setup{
	{Name: "one router, gate.Saturation (llm-d defaults), metrics scraped every 100ms", Saturation: true,
		Rows: []Variant{row("strict priority"), scrapeGraceEviction, row("eviction, tuned (16, 800ms)"),
			row("lending 0.8/0.2 + eviction (16, 800ms)"), row("lending, chat guarantee 0.7"), row("priority-holdback min 0.5")}},
	{Name: "one router, gate.Saturation with QueueDepthThreshold 1, metrics scraped every 100ms", Saturation: true, QueueDepthThreshold: 1,
		Rows: []Variant{row("strict priority"), scrapeGraceEviction, row("eviction, tuned (16, 800ms)"),
			row("lending 0.8/0.2 + eviction (16, 800ms)")}},
	{Name: "two router replicas, MaxInFlight(32) each", Replicas: 2,
		Rows: []Variant{row("strict priority"), row("eviction, llm-d defaults (2, 500ms)"), row("eviction, tuned (16, 800ms)"),
			row("lending 0.8/0.2 + eviction (16, 800ms)")}},
}

// BurstsSetup is the previous round's traffic (Bursts) beside FixedBursts,
// measured in tokens: strict priority and Sluice's default eviction
// behind MaxInFlight(64), and the servers' own priority scheduling with
// the band handed to them, behind the same gate (which never sends a
// server more than its slots), behind a router that lets chat through
// beyond the slots (MaxInFlight(128), batch held below 72 in flight by
// priority-holdback: the 64 slots and 2 waiting per server), behind
// gate.PriorityMaxInFlight(64), and behind gate.Saturation: without a
// ceiling, with batch held below 0.95 of the servers' slots, and told the
// servers schedule by priority (PriorityScheduling).
var BurstsSetup = Setup{Name: "one router; " + Bursts.Name, Traffic: &Bursts, Rows: []Variant{
	row("strict priority"),
	{Name: "eviction, Sluice defaults (the zero value)", Eviction: &flowcontrol.Eviction{}},
	{Name: "vLLM priority + hand-off, MaxInFlight(64)", HandOff: true},
	{Name: "vLLM priority + hand-off, MaxInFlight(128), batch below 72", HandOff: true, MaxInFlight: 2 * maxInFlight,
		Policy: holdback(handOffBatchCeiling), Ceiling: true},
	{Name: "vLLM priority + hand-off, PriorityMaxInFlight(64)", HandOff: true, PrioritySlots: true},
	{Name: "vLLM priority + hand-off, gate.Saturation (llm-d defaults)", HandOff: true, Saturation: true},
	{Name: "vLLM priority + hand-off, gate.Saturation, batch below 0.95 of the slots", HandOff: true, Saturation: true,
		Policy: holdback(handOffSlotCeiling), Ceiling: true},
	{Name: "vLLM priority + hand-off, gate.Saturation with PriorityScheduling", HandOff: true, Saturation: true,
		PriorityScheduling: true},
}}

// handOffSlotCeiling is batch's ceiling behind gate.Saturation in the
// hand-off row that has one: a share of the servers' declared slots,
// running or queued (gate.SaturationConfig.SlotsPerEndpoint), so that
// batch leaves about 3 of the 64 free for a chat burst's first requests,
// and the servers preempt batch for the rest.
const handOffSlotCeiling = 0.95

// handOffBatchCeiling is batch's ceiling in the hand-off row, over
// MaxInFlight(128): batch starts only while fewer than 72 requests of
// either band are in flight.
const handOffBatchCeiling = 72.0 / (2 * maxInFlight)

// scrapeGraceEviction is Sluice's default eviction behind a saturation
// gate: its grace, 0, is the gate's lag there, the 200ms staleness
// threshold past which it reads no metrics.
var scrapeGraceEviction = Variant{Name: "eviction, Sluice defaults (2, grace = the gate's lag, 200ms)", Eviction: &flowcontrol.Eviction{}}

// Tenants' indices in the scenario.
const (
	chatTenant = iota
	batchTenant
)

// config is the scenario of v behind setup for seed. With Saturation the
// gates are made by the simulation and appended to *gates, for the
// scraper to feed.
func (v Variant) config(setup Setup, seed uint64, gates *[]*gate.SaturationGate) (sim.Config, error) {
	replicas := max(setup.Replicas, 1)
	ceiling := func(g gate.Gate) (gate.Gate, error) {
		if v.Policy == nil {
			return g, nil
		}
		p, err := v.Policy()
		if err != nil {
			return nil, fmt.Errorf("crossband: %s: %w", v.Name, err)
		}
		return gate.Ceiling(g, p), nil
	}
	satConfig := func(clock flowcontrol.Clock, replica int) gate.SaturationConfig {
		// The servers' slots are declared, so that a ceiling is a share of
		// them rather than of the KV cache, which these servers leave at 0.
		return gate.SaturationConfig{Replicas: replicas, Replica: replica, Clock: clock, QueueDepthThreshold: setup.QueueDepthThreshold,
			SlotsPerEndpoint: slotsPerServer, PriorityScheduling: v.PriorityScheduling}
	}
	// What can fail is tried once here, so that making each replica's
	// gate, in sim.New, cannot.
	if _, err := ceiling(gate.MaxInFlight(maxInFlight)); err != nil {
		return sim.Config{}, err
	}
	if _, err := gate.Saturation(satConfig(nil, 0)); v.saturation(setup) && err != nil {
		return sim.Config{}, fmt.Errorf("crossband: %s: %w", setup.Name, err)
	}
	limit := maxInFlight
	if v.MaxInFlight > 0 {
		limit = v.MaxInFlight
	}
	makeGate := func(p *sim.Pool, replica int) gate.Gate {
		var g gate.Gate = gate.MaxInFlight(limit / replicas)
		if v.PrioritySlots {
			g = gate.PriorityMaxInFlight(limit / replicas)
		}
		if v.saturation(setup) {
			sg, err := gate.Saturation(satConfig(p.Clock(), replica))
			if err != nil {
				panic(err) // tried above
			}
			*gates = append(*gates, sg)
			g = sg
		}
		g, err := ceiling(g)
		if err != nil {
			panic(err) // tried above
		}
		return g
	}
	eviction := v.Eviction
	traffic := setup.traffic()
	pool := sim.PoolConfig{Servers: servers, Slots: slotsPerServer, Base: base,
		PerPromptToken: perPromptToken, PerOutputToken: perOutputToken, ServerQueues: v.saturation(setup)}
	if v.HandOff {
		pool.ServerQueues, pool.Scheduler, pool.PriorityOf = true, sim.Priority, func(band int) int { return -band }
	}
	clients := batchClients
	if v.ChatAlone {
		clients = 0
	}
	cfg := sim.Config{
		Seed:     seed,
		Duration: simDuration,
		Replicas: replicas,
		Controller: flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{
				{Priority: chatBand, Guarantee: v.ChatGuarantee},
				{Priority: batchBand, Guarantee: v.BatchGuarantee},
			},
			FallbackPriority: batchBand,
			Eviction:         eviction,
		},
		ReplicaGate: makeGate,
		Pool:        pool,
		Tenants: []sim.Tenant{
			chatTenant: {Name: "chat", Priority: chatBand, SLO: chatSLO,
				PromptTokens: sim.Tokens{Mean: chatPrompt}, OutputTokens: sim.Tokens{Mean: chatOutput},
				Phases:       []sim.Phase{{Rate: quietRate, For: quietFor}, {Rate: busyRate, For: busyFor}},
				RandomPhases: traffic.RandomPhases},
			batchTenant: {Name: "batch", Priority: batchBand, Clients: clients, Think: traffic.BatchThink,
				PromptTokens: sim.Tokens{Mean: batchPrompt}, OutputTokens: traffic.BatchOutput,
				Retry: batchRetry},
		},
	}
	return cfg, nil
}

// Run is what one variant did on one seed.
type Run struct {
	// SLOMet is the share of chat requests whose first token came within
	// the SLO; P95, P99 and MaxTTFT are percentiles of the chat TTFTs.
	SLOMet            float64
	P95, P99, MaxTTFT time.Duration
	// BatchPerSecond is the batch requests completed within the
	// simulated minutes, per second of them.
	BatchPerSecond float64
	// WastedTokens counts the output tokens the batch requests had
	// decoded when a revocation aborted them, and Revocations the batch
	// attempts revoked after their admission. Retries counts the batch
	// attempts sent again after one, GaveUp the batch requests that
	// ended unserved (none: the dispatcher retries until served).
	WastedTokens, Revocations, Retries, GaveUp int
	// MostRevoked is the most revocations one batch request went
	// through.
	MostRevoked int
	// ChatRevoked counts the chat attempts revoked: none, since no band
	// is above chat's.
	ChatRevoked int
	// InFlight is what the controllers hold at the end: 0, since every
	// slot returns once.
	InFlight int
	// BatchTokens sums the output tokens of the batch requests completed
	// within the simulated minutes (those BatchPerSecond counts): batch's
	// goodput in tokens. Preemptions counts the requests the servers
	// preempted (with a hand-off), and Recomputed the prefill tokens they
	// computed again when those ran after it.
	BatchTokens, Preemptions, Recomputed int
	// records and spans, kept for the detail view: each batch
	// attempt's run, from its dispatch to its end or its revocation.
	records []*sim.Record
	spans   []span
}

// span is one batch attempt's time in a slot.
type span struct {
	from, to time.Duration
	revoked  bool
}

// Simulate runs v behind setup on seed.
func Simulate(setup Setup, v Variant, seed uint64) (Run, error) {
	var gates []*gate.SaturationGate
	cfg, err := v.config(setup, seed, &gates)
	if err != nil {
		return Run{}, err
	}
	// The batch attempts' runs: from each dispatch to the attempt's
	// revocation, or to the request's end.
	var spans []span
	started := map[*sim.Record]time.Duration{}
	cfg.Observe = func(s *sim.Sim, ev flowcontrol.Event) {
		r, ok := ev.Tag.(*sim.Record)
		if !ok || r.Tenant != batchTenant {
			return
		}
		switch now := s.Clock().Elapsed(); ev.Outcome {
		case flowcontrol.OutcomeDispatched:
			started[r] = now
		case flowcontrol.OutcomeEvicted, flowcontrol.OutcomeEvictedPriority:
			spans = append(spans, span{started[r], now, true})
			delete(started, r)
		}
	}
	s, err := sim.New(cfg)
	if err != nil {
		return Run{}, err
	}
	if v.saturation(setup) {
		scrape(s, gates)
	}
	recs := s.Run()
	for _, r := range recs {
		if from, ok := started[r]; ok && r.Served {
			spans = append(spans, span{from, r.End, false})
		}
	}
	chat := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == chatTenant })
	batch := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == batchTenant })
	var ttfts []time.Duration
	completed, mostRevoked, batchTokens := 0, 0, 0
	for _, r := range recs {
		switch ttft, served := r.TTFT(); {
		case r.Tenant == chatTenant && served:
			ttfts = append(ttfts, ttft)
		case r.Tenant == batchTenant && served && r.End <= simDuration:
			completed++
			batchTokens += r.OutputTokens
		}
		if r.Tenant == batchTenant {
			mostRevoked = max(mostRevoked, r.Aborts)
		}
	}
	slices.Sort(ttfts)
	inFlight := 0
	for _, fc := range s.Controllers() {
		inFlight += fc.InFlight()
	}
	return Run{
		SLOMet:         chat.SLOShare(),
		P95:            sim.Percentile(ttfts, 95),
		P99:            sim.Percentile(ttfts, 99),
		MaxTTFT:        sim.Percentile(ttfts, 100),
		BatchPerSecond: float64(completed) / simDuration.Seconds(),
		WastedTokens:   batch.WastedTokens,
		Revocations:    batch.Aborts,
		MostRevoked:    mostRevoked,
		Retries:        batch.Retries,
		GaveUp:         batch.GaveUp + (len(recs) - chat.Requests - batch.Requests),
		ChatRevoked:    chat.Aborts,
		InFlight:       inFlight,
		BatchTokens:    batchTokens,
		Preemptions:    chat.Preemptions + batch.Preemptions,
		Recomputed:     chat.RecomputedTokens + batch.RecomputedTokens,
		records:        recs,
		spans:          spans,
	}, nil
}

// scrape reads every server's metrics into the saturation gates every
// scrapeInterval, all at the same instant, as examples/gates does, until
// the arrivals have stopped and every request has ended.
func scrape(s *sim.Sim, gates []*gate.SaturationGate) {
	clock := s.Clock()
	s.Scrape(scrapeInterval, simDuration, func(i int, m sim.ServerMetrics) {
		for _, g := range gates {
			g.Update(fmt.Sprint("vllm-", i), gate.Metrics{Waiting: m.Waiting, Running: m.Running, KVCache: m.KVCache, ReadAt: clock.Now()})
		}
	})
}

// Comparison holds every variant's runs behind one setup:
// Runs[variant][seed index].
type Comparison struct {
	Setup    Setup
	Variants []Variant
	Seeds    []uint64
	Runs     [][]Run
}

// Compare runs every variant behind setup on every seed, spread over the
// CPUs.
func Compare(setup Setup, variants []Variant, seeds []uint64) (*Comparison, error) {
	c := &Comparison{Setup: setup, Variants: variants, Seeds: seeds, Runs: make([][]Run, len(variants))}
	for v := range variants {
		c.Runs[v] = make([]Run, len(seeds))
	}
	err := sim.Parallel(len(variants)*len(seeds), func(j int) error {
		v, i := j/len(seeds), j%len(seeds)
		var err error
		c.Runs[v][i], err = Simulate(setup, variants[v], seeds[i])
		c.Runs[v][i].records, c.Runs[v][i].spans = nil, nil // the table needs the figures only
		return err
	})
	return c, err
}

// TokenShare returns, seed by seed, variant v's batch output tokens as a
// share of strict priority's (row 0).
func (c *Comparison) TokenShare(v int) sim.Spread {
	values := make([]float64, len(c.Seeds))
	for i := range c.Seeds {
		values[i] = float64(c.Runs[v][i].BatchTokens) / float64(c.Runs[0][i].BatchTokens)
	}
	return sim.SpreadOf(values)
}

// MeetsTokenGoal reports whether variant v reaches the goal in tokens on
// every seed: chat within its SLO for GoalSLO of its requests, batch
// keeping GoalBatch of strict priority's output tokens.
func (c *Comparison) MeetsTokenGoal(v int) bool {
	return c.Spread(v, func(r Run) float64 { return r.SLOMet }).Min >= GoalSLO && c.TokenShare(v).Min >= GoalBatch
}

// Spread returns one figure of variant v over the seeds.
func (c *Comparison) Spread(v int, of func(Run) float64) sim.Spread {
	values := make([]float64, len(c.Runs[v]))
	for i, r := range c.Runs[v] {
		values[i] = of(r)
	}
	return sim.SpreadOf(values)
}
