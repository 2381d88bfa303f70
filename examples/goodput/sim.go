package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/ordering"
)

// Class is a kind of request in the workload.
type Class struct {
	Name string
	// Share is the fraction of arrivals of this class.
	Share float64
	// SLO is the time-to-first-token objective sent in x-llm-d-slo-ttft-ms;
	// 0 means the request carries no SLO.
	SLO time.Duration
	// TTL is the request's own queue-wait limit (its client's timeout); 0
	// means the band's TTL alone applies.
	TTL time.Duration
}

// Config describes the server pool and the workload. All times are virtual.
type Config struct {
	// Seed seeds every random draw.
	Seed uint64
	// Arrivals stop after Duration; the run goes on until every request has
	// been served or has expired.
	Duration time.Duration
	// Servers each serve one request at a time: a prefill (the time to first
	// token) then a decode, both log-normal with the given means (drawn as
	// prompt and output token counts).
	Servers                 int
	MeanPrefill, MeanDecode time.Duration
	// Overload is the Poisson arrival rate as a multiple of the pool's
	// service rate (Servers / mean service time).
	Overload float64
	// BandTTL bounds every request's queue wait; a request's own TTL may be
	// shorter. A request still queued at its TTL expires.
	BandTTL time.Duration
	Classes []Class
}

// DefaultConfig is the workload `go run ./examples/goodput` simulates: eight
// servers at 1.3x overload; a third of the requests interactive (TTFT SLO
// 500 ms, clients that give up after 5 s), a third with a loose 5 s SLO
// (clients that give up after 20 s), a third batch with no SLO.
func DefaultConfig() Config {
	return Config{
		Seed:        1,
		Duration:    10 * time.Minute,
		Servers:     8,
		MeanPrefill: 150 * time.Millisecond,
		MeanDecode:  650 * time.Millisecond,
		Overload:    1.3,
		BandTTL:     60 * time.Second,
		Classes: []Class{
			{Name: "tight", Share: 1.0 / 3, SLO: 500 * time.Millisecond, TTL: 5 * time.Second},
			{Name: "loose", Share: 1.0 / 3, SLO: 5 * time.Second, TTL: 20 * time.Second},
			{Name: "none", Share: 1.0 / 3},
		},
	}
}

// Policies returns the ordering policies the simulation compares.
func Policies() []ordering.Policy {
	return []ordering.Policy{ordering.FCFS(), ordering.EDF(), ordering.SLODeadline()}
}

// Result is what one ordering policy achieved.
type Result struct {
	Policy string
	// Requests is the number of arrivals; WithSLO of them carried an SLO and
	// MetSLO of those got their first token within it.
	Requests, WithSLO, MetSLO int
	// PerClass counts, per class name, arrivals and requests that met their
	// SLO (for a class without an SLO: were served).
	PerClass map[string]ClassResult
	// Goodput is the number of requests that met their SLO, or were served
	// if they had none, per second from the start of the run until the pool
	// finished its last request.
	Goodput float64
	// Expired counts requests that reached their TTL in the queue.
	Expired int
	// NoSLOWorstWait is the longest queue wait of a request without an SLO,
	// served or expired.
	NoSLOWorstWait time.Duration
}

// ClassResult is a class's line of a [Result].
type ClassResult struct {
	Requests, Good int
}

// SLOShare returns MetSLO / WithSLO.
func (r Result) SLOShare() float64 {
	if r.WithSLO == 0 {
		return 0
	}
	return float64(r.MetSLO) / float64(r.WithSLO)
}

// Simulate runs each policy of Policies on the same workload: the same
// seed, so the same arrivals and the same request sizes.
func Simulate(cfg Config) ([]Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var results []Result
	for _, p := range Policies() {
		r, err := run(cfg, p)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

// maxOverload bounds Overload. Arrival times are drawn in whole
// microseconds: at rates far beyond any pool the gaps round to zero and the
// generator's clock stalls.
const maxOverload = 100

func (cfg Config) validate() error {
	switch {
	case cfg.Servers < 1:
		return fmt.Errorf("goodput: Servers %d is below 1", cfg.Servers)
	case cfg.Duration <= 0:
		return fmt.Errorf("goodput: Duration %v is not positive", cfg.Duration)
	case cfg.MeanPrefill <= 0 || cfg.MeanDecode <= 0:
		return fmt.Errorf("goodput: MeanPrefill %v and MeanDecode %v must be positive", cfg.MeanPrefill, cfg.MeanDecode)
	case !(cfg.Overload > 0 && cfg.Overload <= maxOverload):
		return fmt.Errorf("goodput: Overload %v is outside (0, %d]", cfg.Overload, maxOverload)
	case cfg.BandTTL <= 0:
		return fmt.Errorf("goodput: BandTTL %v is not positive", cfg.BandTTL)
	case len(cfg.Classes) == 0:
		return fmt.Errorf("goodput: no Classes")
	}
	var total float64
	for i, c := range cfg.Classes {
		if !(c.Share >= 0) || c.SLO < 0 || c.TTL < 0 {
			return fmt.Errorf("goodput: Classes[%d] (%s): Share %v, SLO %v and TTL %v must not be negative", i, c.Name, c.Share, c.SLO, c.TTL)
		}
		total += c.Share
	}
	if !(total > 0 && total < 1e6) {
		return fmt.Errorf("goodput: Classes: total Share %v is not positive and finite", total)
	}
	return nil
}

// The service model: prefill and decode times are log-normal with the
// configured means, drawn as prompt and output token counts at these costs.
const (
	perPromptToken = 100 * time.Microsecond
	perOutputToken = 5 * time.Millisecond
	sizeSigma      = 0.5
)

// scenario is the simulation of one policy: a pool of single-slot servers
// behind one band ordered by p, and one tenant per class sending Poisson
// arrivals at its share of Overload times the pool's service rate.
func (cfg Config) scenario(p ordering.Policy) sim.Config {
	var total float64
	for _, c := range cfg.Classes {
		total += c.Share
	}
	rate := cfg.Overload * float64(cfg.Servers) / (cfg.MeanPrefill + cfg.MeanDecode).Seconds()
	sc := sim.Config{
		Seed:     cfg.Seed,
		Duration: cfg.Duration,
		Controller: flowcontrol.Config{Bands: []flowcontrol.BandConfig{
			{Priority: 0, TTL: cfg.BandTTL, Policy: p},
		}},
		Pool: sim.PoolConfig{Servers: cfg.Servers, Slots: 1, PerPromptToken: perPromptToken, PerOutputToken: perOutputToken},
	}
	for _, c := range cfg.Classes {
		sc.Tenants = append(sc.Tenants, sim.Tenant{
			Name:         c.Name,
			SLO:          c.SLO,
			TTL:          c.TTL,
			PromptTokens: sim.Tokens{Mean: float64(cfg.MeanPrefill) / float64(perPromptToken), Sigma: sizeSigma},
			OutputTokens: sim.Tokens{Mean: float64(cfg.MeanDecode) / float64(perOutputToken), Sigma: sizeSigma},
			Phases:       []sim.Phase{{Rate: rate * c.Share / total}},
		})
	}
	return sc
}

// run simulates the pool with its band ordered by p.
func run(cfg Config, p ordering.Policy) (Result, error) {
	recs, err := sim.Run(cfg.scenario(p))
	if err != nil {
		return Result{}, err
	}
	res := Result{Policy: p.TypeName(), Requests: len(recs), PerClass: map[string]ClassResult{}}
	all := sim.Summarize(recs, nil)
	res.WithSLO, res.MetSLO = all.WithSLO, all.MetSLO
	res.Expired = all.Drops[flowcontrol.OutcomeRejectedTTLExpired]
	var lastDone time.Duration
	for _, r := range recs {
		if r.Served {
			lastDone = max(lastDone, r.End)
		}
		if r.SLO == 0 {
			wait := r.QueueTime
			if !r.Served {
				wait = r.Latency() // queued until it expired
			}
			res.NoSLOWorstWait = max(res.NoSLOWorstWait, wait)
		}
	}
	if lastDone > 0 {
		res.Goodput = all.Goodput(lastDone)
	}
	for i, c := range cfg.Classes {
		cs := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == i })
		res.PerClass[c.Name] = ClassResult{Requests: cs.Requests, Good: cs.Good}
	}
	return res, nil
}

// PrintTable writes results as an aligned table, one row per policy.
func PrintTable(out io.Writer, cfg Config, results []Result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "policy\tSLO met\t")
	for _, c := range cfg.Classes {
		if c.SLO > 0 {
			fmt.Fprintf(tw, "%s met\t", c.Name)
		} else {
			fmt.Fprintf(tw, "%s served\t", c.Name)
		}
	}
	fmt.Fprint(tw, "goodput req/s\texpired\tworst wait, no SLO\t\n")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.1f%%\t", r.Policy, 100*r.SLOShare())
		for _, c := range cfg.Classes {
			cr := r.PerClass[c.Name]
			fmt.Fprintf(tw, "%.1f%%\t", 100*float64(cr.Good)/float64(max(cr.Requests, 1)))
		}
		fmt.Fprintf(tw, "%.2f\t%d\t%.1fs\t\n", r.Goodput, r.Expired, r.NoSLOWorstWait.Seconds())
	}
	tw.Flush()
}
