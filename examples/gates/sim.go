package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Config is the pool, the workload and the phases in which the pool's real
// capacity changes. All times are virtual.
type Config struct {
	// Seed seeds every random draw.
	Seed uint64
	// Servers each run up to Slots requests while what they hold fits in
	// a paged KV cache of KVCacheTokens (see sim.PoolConfig); a request's
	// prefill takes Base + PerPromptToken per prompt token, its decode
	// PerOutputToken per output token. Requests wait in the queue of the
	// server the router sent them to: the one with the fewest waiting.
	Servers, Slots, KVCacheTokens int
	Base, PerPromptToken          time.Duration
	PerOutputToken                time.Duration
	// Prompt and Output are the request sizes (log-normal); Rate the
	// Poisson arrivals per second, the same in every phase.
	Prompt, Output sim.Tokens
	Rate           float64
	// SLO is the time-to-first-token objective: a request is good when its
	// first token comes within SLO of its arrival. TTL bounds its wait in
	// Sluice's band.
	SLO, TTL time.Duration
	// Target is the adaptive gates' TargetFirstToken: the SLO less the
	// TTL, less a margin.
	Target time.Duration
	// PhaseLength is the length of each of the Phases.
	PhaseLength time.Duration
	// ScrapeInterval is how often the routers read the servers' metrics.
	ScrapeInterval time.Duration
}

// Phases names the phases, in order: prompts double in the second; in the
// third the prompts are back to normal but one of the four servers is
// down; in the fourth it has returned.
var Phases = []string{"steady", "long prompts", "server down", "recovered"}

// DefaultConfig is the scenario `go run ./examples/gates` prints: four
// servers of 32 slots and a 48,000-token KV cache, 30 chat requests a
// second of 1,000 prompt and 250 output tokens (about 1.2 times what the
// pool serves in the first phase), a TTFT SLO of 3s and a queue TTL of 1s.
func DefaultConfig() Config {
	return Config{
		Seed:           1,
		Servers:        4,
		Slots:          32,
		KVCacheTokens:  48_000,
		Base:           20 * time.Millisecond,
		PerPromptToken: 100 * time.Microsecond,
		PerOutputToken: 20 * time.Millisecond,
		Prompt:         sim.Tokens{Mean: 1000, Sigma: 0.5},
		Output:         sim.Tokens{Mean: 250, Sigma: 0.5},
		Rate:           30,
		SLO:            3 * time.Second,
		TTL:            time.Second,
		Target:         1500 * time.Millisecond,
		PhaseLength:    2 * time.Minute,
		ScrapeInterval: 100 * time.Millisecond,
	}
}

// Kind is the gate a Variant runs.
type Kind int

const (
	// Fixed is gate.MaxInFlight(Limit), split evenly across the
	// replicas.
	Fixed Kind = iota
	// Saturation is gate.Saturation, with llm-d's defaults but for
	// KVCacheUtilThreshold when set.
	Saturation
	// Adaptive is gate.Adaptive, starting from InitialLimit.
	Adaptive
	// Gradient is the gradient design gate.Adaptive was chosen over.
	Gradient
)

// Variant is one row of a table.
type Variant struct {
	Name string
	Kind Kind
	// Limit is a Fixed variant's limit for the whole pool; each of n
	// replicas gets Limit/n.
	Limit int
	// KVCacheUtilThreshold is a Saturation variant's; 0 means llm-d's
	// default, 0.8.
	KVCacheUtilThreshold float64
}

// InitialLimit is where the adaptive gates start: the fixed limit that is
// right for the first phase, the one they would replace.
const InitialLimit = 128

// Variants are the rows of the tables: fixed limits too low, right for the
// first phase and too high; the saturation gate with llm-d's defaults and
// with a KV-cache threshold of 0.9; the adaptive gate Sluice ships (AIMD)
// and the gradient it was chosen over.
func Variants() []Variant {
	return []Variant{
		{Name: "MaxInFlight 64 (too low)", Kind: Fixed, Limit: 64},
		{Name: "MaxInFlight 128 (right for steady)", Kind: Fixed, Limit: 128},
		{Name: "MaxInFlight 256 (too high)", Kind: Fixed, Limit: 256},
		{Name: "saturation, llm-d defaults", Kind: Saturation},
		{Name: "saturation, KV threshold 0.9", Kind: Saturation, KVCacheUtilThreshold: 0.9},
		{Name: "adaptive AIMD (gate.Adaptive)", Kind: Adaptive},
		{Name: "adaptive gradient (not shipped)", Kind: Gradient},
	}
}

// ReplicaVariants are the rows of the tables with several routers: the
// fixed limit right for the first phase, split across them, and the
// saturation gates.
func ReplicaVariants() []Variant {
	var vs []Variant
	for _, v := range Variants() {
		if v.Kind == Saturation || (v.Kind == Fixed && v.Limit == InitialLimit) {
			vs = append(vs, v)
		}
	}
	return vs
}

// SweepLimits are the fixed limits searched for each phase's best.
var SweepLimits = []int{64, 80, 88, 96, 104, 112, 128, 144, 160, 256}

// PhaseResult is what a variant achieved in one phase, over the requests
// that arrived in it.
type PhaseResult struct {
	// Arrived counts them; Good those whose first token came within the
	// SLO. Goodput is Good per second of the phase.
	Arrived, Good int
	Goodput       float64
	// P95TTFT is the 95th percentile time to first token of those served.
	P95TTFT time.Duration
	// MaxQueue is the longest waiting queue of any model server during the
	// phase; MeanQueue the mean waiting queue per healthy server, sampled
	// at each scrape.
	MaxQueue  int
	MeanQueue float64
	// Shed counts the requests Sluice dropped (TTL expired in its band, or
	// no endpoints); Failed those that failed with a server going down.
	Shed, Failed int
	// Limit is an adaptive gate's mean limit, summed over the replicas,
	// sampled at each scrape; 0 for the other variants.
	Limit float64
}

// Result is one variant's run.
type Result struct {
	Variant  Variant
	Replicas int
	Phases   []PhaseResult
}

// limiter is an adaptive gate, whose limit the tables report.
type limiter interface {
	gate.MeteredGate
	Limit() int
}

// duration is the length of the run's arrivals.
func (cfg Config) duration() time.Duration { return time.Duration(len(Phases)) * cfg.PhaseLength }

// scenario is the simulation of cfg behind replicas routers, each with the
// gate of v; the gates are appended to *gates as they are made.
func (cfg Config) scenario(v Variant, replicas int, gates *[]gate.Gate) sim.Config {
	phases := make([]sim.Phase, len(Phases))
	for i := range phases {
		phases[i] = sim.Phase{Rate: cfg.Rate, For: cfg.PhaseLength}
	}
	phases[1].PromptTokens = sim.Tokens{Mean: 2 * cfg.Prompt.Mean, Sigma: cfg.Prompt.Sigma}
	return sim.Config{
		Seed:     cfg.Seed,
		Duration: cfg.duration(),
		Horizon:  cfg.duration() + 30*time.Second,
		Replicas: replicas,
		Controller: flowcontrol.Config{
			Bands:          []flowcontrol.BandConfig{{Priority: 0, TTL: cfg.TTL}},
			NoEndpointsTTL: time.Second,
		},
		ReplicaGate: func(p *sim.Pool, replica int) gate.Gate {
			g := cfg.gate(v, p, replica, replicas)
			*gates = append(*gates, g)
			return g
		},
		Pool: sim.PoolConfig{
			Servers: cfg.Servers, Slots: cfg.Slots, KVCacheTokens: cfg.KVCacheTokens, ServerQueues: true,
			Base: cfg.Base, PerPromptToken: cfg.PerPromptToken, PerOutputToken: cfg.PerOutputToken,
			Failures: []sim.Failure{{Server: cfg.Servers - 1, At: 2 * cfg.PhaseLength, For: cfg.PhaseLength}},
		},
		Tenants: []sim.Tenant{{
			Name: "chat", SLO: cfg.SLO, TTL: cfg.TTL,
			PromptTokens: cfg.Prompt, OutputTokens: cfg.Output,
			Phases: phases,
		}},
	}
}

// gate makes the gate of variant v for one of replicas routers.
func (cfg Config) gate(v Variant, p *sim.Pool, replica, replicas int) gate.Gate {
	// The adaptive gates range from one request per server to twice what
	// the servers' slots run.
	lo, hi, initial := cfg.Servers, 2*cfg.Servers*cfg.Slots, InitialLimit
	lo, hi, initial = max(lo/replicas, 1), hi/replicas, initial/replicas
	switch v.Kind {
	case Saturation:
		g, err := gate.Saturation(gate.SaturationConfig{
			KVCacheUtilThreshold: v.KVCacheUtilThreshold,
			Replicas:             replicas, Replica: replica,
			Clock: p.Clock(),
		})
		if err != nil {
			panic(err)
		}
		return g
	case Adaptive:
		g, err := gate.Adaptive(gate.AdaptiveConfig{
			TargetFirstToken: cfg.Target,
			InitialLimit:     initial, MinLimit: lo, MaxLimit: hi,
		})
		if err != nil {
			panic(err)
		}
		return g
	case Gradient:
		return newGradient(initial, lo, hi, cfg.Target/2)
	}
	return gate.MaxInFlight(v.Limit / replicas)
}

// Run simulates variant v behind replicas routers.
func Run(cfg Config, v Variant, replicas int) (Result, error) {
	var gates []gate.Gate
	s, err := sim.New(cfg.scenario(v, replicas, &gates))
	if err != nil {
		return Result{}, err
	}
	pool, clock := s.Pool(), s.Clock()
	n := len(Phases)
	res := Result{Variant: v, Replicas: replicas, Phases: make([]PhaseResult, n)}
	phaseOf := func(t time.Duration) int { return min(int(t/cfg.PhaseLength), n-1) }
	horizon := s.Config().Horizon

	// Every ScrapeInterval each router reads every server's metrics, all
	// at the same instant; a server that is down fails its scrape and
	// leaves the pool. The tables sample the queues and the limits then.
	queueSum, limitSum, samples := make([]float64, n), make([]float64, n), make([]int, n)
	names := make([]string, pool.Servers())
	for i := range names {
		names[i] = fmt.Sprint("vllm-", i)
	}
	var scrape func()
	scrape = func() {
		now := clock.Elapsed()
		healthy, waiting := 0, 0
		for i, name := range names {
			m := pool.Metrics(i)
			if m.Healthy {
				healthy++
				waiting += m.Waiting
			}
			for _, g := range gates {
				sat, ok := g.(*gate.SaturationGate)
				switch {
				case !ok:
				case m.Healthy:
					sat.Update(name, gate.Metrics{Waiting: m.Waiting, Running: m.Running, KVCache: m.KVCache, ReadAt: clock.Now()})
				default:
					sat.Remove(name)
				}
			}
		}
		if now < cfg.duration() {
			ph := phaseOf(now)
			queueSum[ph] += float64(waiting) / float64(max(healthy, 1))
			for _, g := range gates {
				if l, ok := g.(limiter); ok {
					limitSum[ph] += float64(l.Limit())
				}
			}
			samples[ph]++
		}
		if now+cfg.ScrapeInterval <= horizon {
			clock.After(cfg.ScrapeInterval, scrape)
		}
	}
	clock.At(0, scrape)
	for ph := range n {
		clock.At(time.Duration(ph+1)*cfg.PhaseLength, func() {
			res.Phases[ph].MaxQueue = pool.MaxWaiting()
			pool.ResetMaxWaiting()
		})
	}

	recs := s.Run()
	ttfts := make([][]time.Duration, n)
	for _, r := range recs {
		ph := phaseOf(r.Arrival)
		p := &res.Phases[ph]
		p.Arrived++
		if ttft, ok := r.TTFT(); ok {
			ttfts[ph] = append(ttfts[ph], ttft)
			if ttft <= cfg.SLO {
				p.Good++
			}
		}
		for _, k := range r.Drops {
			p.Shed += k
		}
		p.Failed += r.Failures
	}
	for ph := range n {
		p := &res.Phases[ph]
		p.Goodput = float64(p.Good) / cfg.PhaseLength.Seconds()
		slices.Sort(ttfts[ph])
		p.P95TTFT = sim.Percentile(ttfts[ph], 95)
		if samples[ph] > 0 {
			p.MeanQueue = queueSum[ph] / float64(samples[ph])
			p.Limit = limitSum[ph] / float64(samples[ph])
		}
	}
	return res, nil
}

// Comparison is every table of one seed.
type Comparison struct {
	Config Config
	// Best is, per phase, the best goodput of the SweepLimits with one
	// router, and BestLimit the limit that reached it.
	Best      []float64
	BestLimit []int
	// Sweep holds the runs of SweepLimits with one router.
	Sweep []Result
	// Tables holds, per number of routers (1, 2, 4), the runs of its
	// variants.
	Tables map[int][]Result
}

// Replicas lists the numbers of routers the comparison runs.
var Replicas = []int{1, 2, 4}

// Compare runs the sweep and every table of cfg.
func Compare(cfg Config) (*Comparison, error) {
	c := &Comparison{Config: cfg, Best: make([]float64, len(Phases)), BestLimit: make([]int, len(Phases)), Tables: map[int][]Result{}}
	for _, l := range SweepLimits {
		r, err := Run(cfg, Variant{Name: fmt.Sprint("MaxInFlight ", l), Kind: Fixed, Limit: l}, 1)
		if err != nil {
			return nil, err
		}
		c.Sweep = append(c.Sweep, r)
		for ph, p := range r.Phases {
			if p.Goodput > c.Best[ph] {
				c.Best[ph], c.BestLimit[ph] = p.Goodput, l
			}
		}
	}
	for _, n := range Replicas {
		vs := ReplicaVariants()
		if n == 1 {
			vs = Variants()
		}
		for _, v := range vs {
			if i := slices.IndexFunc(c.Sweep, func(r Result) bool { return r.Variant.Kind == Fixed && r.Variant.Limit == v.Limit }); n == 1 && v.Kind == Fixed && i >= 0 {
				r := c.Sweep[i]
				r.Variant = v
				c.Tables[n] = append(c.Tables[n], r) // the same run
				continue
			}
			r, err := Run(cfg, v, n)
			if err != nil {
				return nil, err
			}
			c.Tables[n] = append(c.Tables[n], r)
		}
	}
	return c, nil
}

// Share returns p's goodput as a share of the best fixed limit's in phase ph.
func (c *Comparison) Share(ph int, p PhaseResult) float64 {
	if c.Best[ph] == 0 {
		return 0
	}
	return p.Goodput / c.Best[ph]
}
