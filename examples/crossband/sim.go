package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// The scenario, issue 22's: a batch backlog of long generations beside
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
)

// Variant is one row of the table: how the gate in front of the pool treats
// the two bands.
type Variant struct {
	Name string
	// Policy, if set, puts gate.Ceiling with it over MaxInFlight(64);
	// otherwise the gate is MaxInFlight(64) alone: strict priority.
	Policy func() (gate.UsageLimitPolicy, error)
	// ChatAlone runs the chat tenant without the batch clients: the bound
	// every other row is measured against.
	ChatAlone bool
	// Ceiling marks the rows of the frontier: those with a ceiling policy.
	Ceiling bool
}

func static(threshold float64) func() (gate.UsageLimitPolicy, error) {
	return func() (gate.UsageLimitPolicy, error) { return gate.StaticUsageLimit(threshold) }
}

func holdback(minCeiling float64) func() (gate.UsageLimitPolicy, error) {
	return func() (gate.UsageLimitPolicy, error) {
		return gate.PriorityHoldback(gate.PriorityHoldbackConfig{MinCeiling: minCeiling})
	}
}

// Variants are the rows available while in-flight eviction and lending
// are not built. With two bands, priority-holdback gives chat the ceiling
// 1 and batch MinCeiling, so its rows are the issue's "batch ≤ x% of
// slots"; static-usage-limit gives both bands the same ceiling, as llm-d's
// policy does.
var Variants = []Variant{
	{Name: "strict priority"},
	{Name: "chat alone (the bound)", ChatAlone: true},
	{Name: "static-usage-limit 0.75", Policy: static(0.75), Ceiling: true},
	{Name: "static-usage-limit 0.5", Policy: static(0.5), Ceiling: true},
	{Name: "priority-holdback min 0.75", Policy: holdback(0.75), Ceiling: true},
	{Name: "priority-holdback min 0.5", Policy: holdback(0.5), Ceiling: true},
	{Name: "priority-holdback min 0.25", Policy: holdback(0.25), Ceiling: true},
	{Name: "soft-reflective-ceiling", Policy: func() (gate.UsageLimitPolicy, error) { return gate.SoftReflectiveCeiling(), nil }, Ceiling: true},
}

// Tenants' indices in the scenario.
const (
	chatTenant = iota
	batchTenant
)

// config is the scenario of v for seed.
func (v Variant) config(seed uint64) (sim.Config, error) {
	g := flowcontrol.MaxInFlight(maxInFlight)
	if v.Policy != nil {
		p, err := v.Policy()
		if err != nil {
			return sim.Config{}, fmt.Errorf("crossband: %s: %w", v.Name, err)
		}
		g = gate.Ceiling(g, p)
	}
	clients := batchClients
	if v.ChatAlone {
		clients = 0
	}
	return sim.Config{
		Seed:     seed,
		Duration: simDuration,
		Controller: flowcontrol.Config{
			Bands:            []flowcontrol.BandConfig{{Priority: chatBand}, {Priority: batchBand}},
			FallbackPriority: batchBand,
			Gate:             g,
		},
		Pool: sim.PoolConfig{Servers: servers, Slots: slotsPerServer, Base: base,
			PerPromptToken: perPromptToken, PerOutputToken: perOutputToken},
		Tenants: []sim.Tenant{
			chatTenant: {Name: "chat", Priority: chatBand, SLO: chatSLO,
				PromptTokens: sim.Tokens{Mean: chatPrompt}, OutputTokens: sim.Tokens{Mean: chatOutput},
				Phases: []sim.Phase{{Rate: quietRate, For: quietFor}, {Rate: busyRate, For: busyFor}}},
			batchTenant: {Name: "batch", Priority: batchBand, Clients: clients, Think: batchThink,
				PromptTokens: sim.Tokens{Mean: batchPrompt}, OutputTokens: sim.Tokens{Mean: batchOutput}},
		},
	}, nil
}

// Run is what one variant did on one seed.
type Run struct {
	// SLOMet is the share of chat requests whose first token came within
	// the SLO; P95 and P99 are percentiles of the chat TTFTs.
	SLOMet   float64
	P95, P99 time.Duration
	// BatchPerSecond is the batch requests completed within the
	// simulated minutes, per second of them.
	BatchPerSecond float64
	// WastedTokens counts the output tokens the batch requests had
	// decoded when an abort lost them, and Revocations the batch attempts
	// aborted after their admission: none in these rows, which revoke
	// nothing.
	WastedTokens, Revocations int
	// records, kept for the detail view.
	records []*sim.Record
}

// Simulate runs v on seed.
func Simulate(v Variant, seed uint64) (Run, error) {
	cfg, err := v.config(seed)
	if err != nil {
		return Run{}, err
	}
	recs, err := sim.Run(cfg)
	if err != nil {
		return Run{}, err
	}
	chat := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == chatTenant })
	batch := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == batchTenant })
	var ttfts []time.Duration
	completed := 0
	for _, r := range recs {
		switch ttft, served := r.TTFT(); {
		case r.Tenant == chatTenant && served:
			ttfts = append(ttfts, ttft)
		case r.Tenant == batchTenant && served && r.End <= simDuration:
			completed++
		}
	}
	slices.Sort(ttfts)
	return Run{
		SLOMet:         chat.SLOShare(),
		P95:            sim.Percentile(ttfts, 95),
		P99:            sim.Percentile(ttfts, 99),
		BatchPerSecond: float64(completed) / simDuration.Seconds(),
		WastedTokens:   batch.WastedTokens,
		Revocations:    batch.Aborts,
		records:        recs,
	}, nil
}

// Comparison holds every variant's runs: Runs[variant][seed index].
type Comparison struct {
	Variants []Variant
	Seeds    []uint64
	Runs     [][]Run
}

// Compare runs every variant on every seed, spread over the CPUs.
func Compare(variants []Variant, seeds []uint64) (*Comparison, error) {
	c := &Comparison{Variants: variants, Seeds: seeds, Runs: make([][]Run, len(variants))}
	for v := range variants {
		c.Runs[v] = make([]Run, len(seeds))
	}
	err := sim.Parallel(len(variants)*len(seeds), func(j int) error {
		v, i := j/len(seeds), j%len(seeds)
		var err error
		c.Runs[v][i], err = Simulate(variants[v], seeds[i])
		c.Runs[v][i].records = nil // the table needs the figures only
		return err
	})
	return c, err
}

// Spread returns one figure of variant v over the seeds.
func (c *Comparison) Spread(v int, of func(Run) float64) sim.Spread {
	values := make([]float64, len(c.Runs[v]))
	for i, r := range c.Runs[v] {
		values[i] = of(r)
	}
	return sim.SpreadOf(values)
}
