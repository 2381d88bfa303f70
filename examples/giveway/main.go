// Command giveway compares, on the shared simulator, strict priority with
// the zero-value [flowcontrol.Eviction], which revokes for the waiting
// requests, and with Eviction.ByDeadline, which revokes only what their
// deadlines need: chat at priority 10 with a 1 s
// TTFT SLO in bursts beside a closed-loop batch backlog at −1, behind
// MaxInFlight(64) over 4 servers × 16 slots; and the hand-off, with the
// servers scheduling by the band handed to them behind
// gate.PriorityMaxInFlight or gate.Saturation with PriorityScheduling. It
// prints, per scenario and
// row, chat's SLO attainment, batch's output tokens (and their share of
// strict priority's on the same seed), the decoded tokens lost to
// revocation and the revocations, as medians and ranges over the seeds.
//
//	go run ./examples/giveway                 # seeds 1–20
//	go run ./examples/giveway -from 1 -to 3
//
// Its test asserts the comparisons the tables print.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

const (
	servers, slotsPerServer = 4, 16
	duration                = 5 * time.Minute
	chatBand, stdBand       = 10, 0
	batchBand               = -1
	chatSLO, stdSLO         = time.Second, 5 * time.Second
)

// Scenario is one traffic mix.
type Scenario struct {
	Name string
	// BurstRate is chat's rate in a burst (12 req/s in the first), and
	// RandomPhases draws the phases' lengths (mean 20 s quiet, 10 s busy).
	BurstRate    float64
	RandomPhases bool
	// BatchOutput is the batch outputs' log-normal distribution, Think
	// the batch clients' mean think time (0: none).
	BatchOutput sim.Tokens
	Think       time.Duration
	// Standard adds a band 0 at 2 req/s with a 5 s SLO.
	Standard bool
}

// Scenarios are the traffic mixes: random bursts beside a batch backlog
// without think time, crossband's traffic, and variations of the first.
var Scenarios = []Scenario{
	{Name: "random bursts of 3 and 12 req/s, log-normal batch outputs (mean 1,000), no think time",
		BurstRate: 12, RandomPhases: true, BatchOutput: sim.Tokens{Mean: 1000, Sigma: 1}},
	{Name: "crossband's traffic: fixed bursts, 1,000-token batch outputs, 2 s think time",
		BurstRate: 12, BatchOutput: sim.Tokens{Mean: 1000}, Think: 2 * time.Second},
	{Name: "stronger bursts: 20 req/s",
		BurstRate: 20, RandomPhases: true, BatchOutput: sim.Tokens{Mean: 1000, Sigma: 1}},
	{Name: "short batch jobs: log-normal outputs of mean 100",
		BurstRate: 12, RandomPhases: true, BatchOutput: sim.Tokens{Mean: 100, Sigma: 1}},
	{Name: "three bands: standard at 0, 2 req/s, 5 s SLO",
		BurstRate: 12, RandomPhases: true, BatchOutput: sim.Tokens{Mean: 1000, Sigma: 1}, Standard: true},
}

// Row is how the controller treats the bands, and the gate in front of
// the servers.
type Row struct {
	Name      string
	ChatAlone bool
	Eviction  *flowcontrol.Eviction
	// Scrape, if positive, replaces MaxInFlight(64) with gate.Saturation
	// over the servers' metrics read every Scrape (stale after twice
	// that), the servers' 16 slots declared and PriorityScheduling on;
	// the servers then run vLLM's priority scheduler, each with its own
	// queue, and each request's band is handed to them (−band).
	Scrape time.Duration
	// PrioritySlots, without Scrape, replaces MaxInFlight(64) with
	// gate.PriorityMaxInFlight(64), the servers scheduling as with Scrape.
	PrioritySlots bool
}

// handOff reports whether row's servers run vLLM's priority scheduler
// with the band handed to them.
func (row Row) handOff() bool { return row.Scrape > 0 || row.PrioritySlots }

// Rows are the rows of every table.
var Rows = []Row{
	{Name: "strict priority"},
	{Name: "chat alone", ChatAlone: true},
	{Name: "Eviction{} (zero value)", Eviction: &flowcontrol.Eviction{}},
	{Name: "Eviction{ByDeadline: true}", Eviction: &flowcontrol.Eviction{ByDeadline: true}},
	{Name: "hand-off, PriorityMaxInFlight(64)", PrioritySlots: true},
	{Name: "hand-off, gate.Saturation + PriorityScheduling, scraped every 100ms", Scrape: 100 * time.Millisecond},
	{Name: "hand-off, gate.Saturation + PriorityScheduling, scraped every 1s", Scrape: time.Second},
}

const (
	chatTenant = iota
	batchTenant
	stdTenant
)

// Run is one row on one seed.
type Run struct {
	ChatSLO, StdSLO float64 // shares met, %
	BatchTokens     int     // output tokens of the batch requests served within the run
	WastedTokens    int     // decoded batch tokens lost to revocation
	Revocations     int
	StdRevoked      int
	ChatRequests    int // chat requests that ended
}

// Simulate runs row on seed in scenario sc.
func Simulate(sc Scenario, row Row, seed uint64) (Run, error) {
	clients := 120
	if row.ChatAlone {
		clients = 0
	}
	bands := []flowcontrol.BandConfig{{Priority: chatBand}, {Priority: batchBand}}
	tenants := []sim.Tenant{
		chatTenant: {Name: "chat", Priority: chatBand, SLO: chatSLO,
			PromptTokens: sim.Tokens{Mean: 500}, OutputTokens: sim.Tokens{Mean: 150},
			Phases:       []sim.Phase{{Rate: 3, For: 20 * time.Second}, {Rate: sc.BurstRate, For: 10 * time.Second}},
			RandomPhases: sc.RandomPhases},
		batchTenant: {Name: "batch", Priority: batchBand, Clients: clients, Think: sc.Think,
			PromptTokens: sim.Tokens{Mean: 1000}, OutputTokens: sc.BatchOutput,
			Retry: sim.Retry{MaxAttempts: 1000, Backoff: time.Second, MaxBackoff: 8 * time.Second, MaxRetryAfter: time.Minute}},
	}
	if sc.Standard {
		bands = append(bands, flowcontrol.BandConfig{Priority: stdBand})
		tenants = append(tenants, sim.Tenant{Name: "standard", Priority: stdBand, SLO: stdSLO,
			PromptTokens: sim.Tokens{Mean: 1000}, OutputTokens: sim.Tokens{Mean: 300, Sigma: 0.5},
			Phases: []sim.Phase{{Rate: 2}}})
		if row.ChatAlone {
			tenants[stdTenant].Phases = []sim.Phase{{Rate: 0}}
		}
	}
	cfg := sim.Config{
		Seed:     seed,
		Duration: duration,
		Controller: flowcontrol.Config{
			Bands:            bands,
			FallbackPriority: batchBand,
			Eviction:         row.Eviction,
		},
		Gate: func(*sim.Pool) gate.Gate { return gate.MaxInFlight(servers * slotsPerServer) },
		Pool: sim.PoolConfig{Servers: servers, Slots: slotsPerServer, Base: 50 * time.Millisecond,
			PerPromptToken: 50 * time.Microsecond, PerOutputToken: 20 * time.Millisecond},
		Tenants: tenants,
	}
	if row.handOff() {
		cfg.Pool.ServerQueues, cfg.Pool.Scheduler = true, sim.Priority
		cfg.Pool.PriorityOf = func(band int) int { return -band }
	}
	if row.PrioritySlots {
		cfg.Gate = func(*sim.Pool) gate.Gate { return gate.PriorityMaxInFlight(servers * slotsPerServer) }
	}
	var sat *gate.SaturationGate
	if row.Scrape > 0 {
		cfg.Gate = func(p *sim.Pool) gate.Gate {
			g, err := gate.Saturation(gate.SaturationConfig{SlotsPerEndpoint: slotsPerServer, PriorityScheduling: true,
				MetricsStalenessThreshold: 2 * row.Scrape, Clock: p.Clock()})
			if err != nil {
				panic(err) // a constant configuration
			}
			sat = g
			return g
		}
	}
	s, err := sim.New(cfg)
	if err != nil {
		return Run{}, err
	}
	if sat != nil {
		clock := s.Clock()
		s.Scrape(row.Scrape, duration, func(i int, m sim.ServerMetrics) {
			sat.Update(fmt.Sprint("vllm-", i), gate.Metrics{Waiting: m.Waiting, Running: m.Running, KVCache: m.KVCache, ReadAt: clock.Now()})
		})
	}
	recs := s.Run()
	var run Run
	chat := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == chatTenant })
	std := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == stdTenant })
	batch := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == batchTenant })
	run.ChatSLO = 100 * chat.SLOShare()
	run.StdSLO = 100 * std.SLOShare()
	for _, r := range recs {
		if r.Tenant == batchTenant && r.Served && r.End <= duration {
			run.BatchTokens += r.OutputTokens
		}
	}
	run.WastedTokens, run.Revocations, run.StdRevoked = batch.WastedTokens, batch.Aborts, std.Aborts
	run.ChatRequests = chat.Requests
	return run, nil
}

// Table is every row of one scenario over the seeds: Runs[row][seed].
type Table struct {
	Scenario Scenario
	Seeds    []uint64
	Runs     [][]Run
}

// Compare runs every row of sc on every seed, spread over the CPUs.
func Compare(sc Scenario, seeds []uint64) (*Table, error) {
	t := &Table{Scenario: sc, Seeds: seeds, Runs: make([][]Run, len(Rows))}
	for i := range Rows {
		t.Runs[i] = make([]Run, len(seeds))
	}
	err := sim.Parallel(len(Rows)*len(seeds), func(j int) error {
		row, i := j/len(seeds), j%len(seeds)
		var err error
		t.Runs[row][i], err = Simulate(sc, Rows[row], seeds[i])
		return err
	})
	return t, err
}

// Spread returns one figure over the seeds: of(i) is its value
// on the i-th seed.
func (t *Table) Spread(of func(i int) float64) sim.Spread {
	values := make([]float64, len(t.Seeds))
	for i := range t.Seeds {
		values[i] = of(i)
	}
	return sim.SpreadOf(values)
}

func show(s sim.Spread, format string) string {
	return fmt.Sprintf(format+" ["+format+"–"+format+"]", s.Median, s.Min, s.Max)
}

// Print writes t as a markdown table.
func (t *Table) Print() {
	fmt.Printf("### %s\n\nseeds %d–%d, median [min–max]\n\n", t.Scenario.Name, t.Seeds[0], t.Seeds[len(t.Seeds)-1])
	fmt.Println("| row | chat SLO met % | seeds ≥ 99% where chat alone is | standard SLO met % | batch output tokens | batch % of strict | decoded tokens lost | revocations | standard revoked |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for r, row := range Rows {
		runs := t.Runs[r]
		of := func(f func(Run) float64) sim.Spread {
			return t.Spread(func(i int) float64 { return f(runs[i]) })
		}
		share := t.Spread(func(i int) float64 {
			return 100 * float64(runs[i].BatchTokens) / float64(max(t.Runs[0][i].BatchTokens, 1))
		})
		std := "—"
		if t.Scenario.Standard {
			std = show(of(func(r Run) float64 { return r.StdSLO }), "%.1f")
		}
		met, can := 0, 0
		for i := range t.Seeds {
			if t.Runs[1][i].ChatSLO >= 99 { // Rows[1] is chat alone
				can++
				if runs[i].ChatSLO >= 99 {
					met++
				}
			}
		}
		fmt.Printf("| %s | %s | %d of %d | %s | %s | %s | %s | %s | %s |\n", row.Name,
			show(of(func(r Run) float64 { return r.ChatSLO }), "%.1f"), met, can, std,
			show(of(func(r Run) float64 { return float64(r.BatchTokens) }), "%.0f"),
			show(share, "%.1f"),
			show(of(func(r Run) float64 { return float64(r.WastedTokens) }), "%.0f"),
			show(of(func(r Run) float64 { return float64(r.Revocations) }), "%.0f"),
			show(of(func(r Run) float64 { return float64(r.StdRevoked) }), "%.0f"))
	}
	fmt.Println()
}

func main() {
	seeds := sim.SeedRangeFlags("giveway")
	only := flag.Int("scenario", -1, "run only this scenario (an index from 0)")
	flag.Parse()
	for i, sc := range Scenarios {
		if *only >= 0 && i != *only {
			continue
		}
		t, err := Compare(sc, seeds())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		t.Print()
	}
}
