package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
)

// Tenant is one flow of the band: a tenant sending Poisson arrivals.
type Tenant struct {
	Name string
	// Rate is its arrival rate in requests per second. The tenant with
	// Rate 0 (there is one) sends whatever the others leave of the
	// overload: it is the heavy tenant.
	Rate float64
	// Prompt and Output are its mean prompt and output tokens (log-normal,
	// shape sizeSigma).
	Prompt, Output float64
	// TTL, if positive, is its clients' own queue-wait limit, when they
	// give up sooner than the band's TTL.
	TTL time.Duration
}

// Config is the scenario: one band in front of a pool of model servers,
// shared by tenants of very different rates and prompt sizes. All times are
// virtual.
type Config struct {
	Seed uint64
	// Arrivals stop after Duration; the run goes on until every request
	// has been served or dropped.
	Duration time.Duration
	// Servers × Slots requests run at once. A request's service time is
	// its prefill (PerPromptToken per prompt token) plus its decode
	// (PerOutputToken per output token).
	Servers, Slots int
	// Overload is the work offered, in server time, as a multiple of what
	// the pool can do.
	Overload float64
	// Capacity bounds the band's waiting requests; TTL is every request's
	// queue-wait limit (its client's timeout).
	Capacity int64
	TTL      time.Duration
	Tenants  []Tenant
}

// The service model.
const (
	perPromptToken = 100 * time.Microsecond
	perOutputToken = 5 * time.Millisecond
	sizeSigma      = 0.5
)

// DefaultConfig is the scenario `go run ./examples/fairness` simulates: 32
// slots at 1.5× overload for two minutes; three light tenants of 2
// requests/s with 300-token prompts, and one heavy tenant sending the rest
// (about 31 requests/s) with 4000-token prompts; a band of 64 places and a
// 10 s TTL.
func DefaultConfig() Config {
	return Config{
		Seed:     1,
		Duration: 2 * time.Minute,
		Servers:  4,
		Slots:    8,
		Overload: 1.5,
		Capacity: 64,
		TTL:      10 * time.Second,
		Tenants: []Tenant{
			{Name: "batch", Prompt: 4000, Output: 200},
			{Name: "chat-a", Rate: 2, Prompt: 300, Output: 100},
			{Name: "chat-b", Rate: 2, Prompt: 300, Output: 100},
			{Name: "chat-c", Rate: 2, Prompt: 300, Output: 100},
		},
	}
}

// Variant is one configuration of the band: a fairness policy, with or
// without fair admission.
type Variant struct {
	Name     string
	Fairness flowcontrol.Fairness
	// FairAdmission lets a request of a flow under its share displace the
	// newest request of the flow holding the most; without it (the
	// controller's NoDisplacement) a full band rejects.
	FairAdmission bool
}

// Variants returns what the simulation compares: global-strict (one queue
// for the band, the default), round-robin and deficit round robin over
// prompt tokens, each without and with fair admission.
func Variants() []Variant {
	var vs []Variant
	for _, p := range []struct {
		name string
		f    flowcontrol.Fairness
	}{
		{"global-strict", flowcontrol.GlobalStrict()},
		{"round-robin", flowcontrol.RoundRobin()},
		{"drr (prompt tokens)", flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{})},
	} {
		for _, fair := range []bool{false, true} {
			vs = append(vs, Variant{Name: p.name, Fairness: p.f, FairAdmission: fair})
		}
	}
	return vs
}

// TenantResult is what one tenant saw under one variant.
type TenantResult struct {
	Requests, Served int
	// Rejected (the band was full), Displaced (displaced from the queue by
	// fair admission: rejected-saturated with flowcontrol.ErrDisplaced;
	// the table's evicted column)
	// and Expired (waited out the TTL) count the requests not served.
	Rejected, Displaced, Expired int
	// P95Queue is the 95th percentile of the served requests' queue time.
	P95Queue time.Duration
	// Tokens is the served requests' prompt and output tokens per second of
	// the arrival period.
	Tokens float64
}

// Success returns the share of its requests that were served.
func (r TenantResult) Success() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Served) / float64(r.Requests)
}

// Result is one variant's results, per tenant in the order of
// Config.Tenants.
type Result struct {
	Variant Variant
	Tenants []TenantResult
}

// Simulate runs every variant on the same arrivals (the same seed, so the
// same requests).
func Simulate(cfg Config, variants []Variant) ([]Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var results []Result
	for _, v := range variants {
		r, err := run(cfg, v)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

func (cfg Config) validate() error {
	heavy := 0
	switch {
	case cfg.Duration <= 0:
		return fmt.Errorf("fairness: Duration %v is not positive", cfg.Duration)
	case cfg.Servers < 1 || cfg.Slots < 1:
		return fmt.Errorf("fairness: Servers %d and Slots %d must be at least 1", cfg.Servers, cfg.Slots)
	case !(cfg.Overload > 0 && cfg.Overload <= 100):
		return fmt.Errorf("fairness: Overload %v is outside (0, 100]", cfg.Overload)
	case cfg.Capacity < 0 || cfg.TTL < 0:
		return fmt.Errorf("fairness: Capacity %d and TTL %v must not be negative", cfg.Capacity, cfg.TTL)
	}
	for i, t := range cfg.Tenants {
		if !(t.Rate >= 0) || !(t.Prompt > 0) || !(t.Output > 0) || t.TTL < 0 {
			return fmt.Errorf("fairness: Tenants[%d] (%s): Rate %v and TTL %v must not be negative, Prompt %v and Output %v must be positive",
				i, t.Name, t.Rate, t.TTL, t.Prompt, t.Output)
		}
		if t.Rate == 0 {
			heavy++
		}
	}
	if heavy != 1 {
		return fmt.Errorf("fairness: Tenants: %d with Rate 0, want exactly one heavy tenant", heavy)
	}
	if cfg.heavyRate() <= 0 {
		return fmt.Errorf("fairness: the light tenants alone offer more than Overload %v", cfg.Overload)
	}
	return nil
}

// serviceTime is the mean server time of a tenant's request.
func (t Tenant) serviceTime() time.Duration {
	return time.Duration(t.Prompt*float64(perPromptToken) + t.Output*float64(perOutputToken))
}

// heavyRate is the heavy tenant's rate: the offered work, Overload × the
// pool's slots, less the light tenants' work, in its requests.
func (cfg Config) heavyRate() float64 {
	work := cfg.Overload * float64(cfg.Servers*cfg.Slots)
	var heavy Tenant
	for _, t := range cfg.Tenants {
		if t.Rate == 0 {
			heavy = t
			continue
		}
		work -= t.Rate * t.serviceTime().Seconds()
	}
	return work / heavy.serviceTime().Seconds()
}

// rate returns tenant t's arrival rate.
func (cfg Config) rate(t Tenant) float64 {
	if t.Rate == 0 {
		return cfg.heavyRate()
	}
	return t.Rate
}

// scenario is the simulation of variant v: the real controller with one
// band, the cost of a request its prompt tokens.
func (cfg Config) scenario(v Variant) sim.Config {
	sc := sim.Config{
		Seed:     cfg.Seed,
		Duration: cfg.Duration,
		Controller: flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{
				Priority:        0,
				RequestCapacity: capacity.Bounded(cfg.Capacity),
				TTL:             cfg.TTL,
				Fairness:        v.Fairness,
			}},
			NoDisplacement: !v.FairAdmission,
		},
		Pool: sim.PoolConfig{Servers: cfg.Servers, Slots: cfg.Slots, PerPromptToken: perPromptToken, PerOutputToken: perOutputToken},
		Cost: func(r *sim.Record) int64 { return int64(r.PromptTokens) },
	}
	for _, t := range cfg.Tenants {
		sc.Tenants = append(sc.Tenants, sim.Tenant{
			Name:         t.Name,
			PromptTokens: sim.Tokens{Mean: t.Prompt, Sigma: sizeSigma},
			OutputTokens: sim.Tokens{Mean: t.Output, Sigma: sizeSigma},
			TTL:          t.TTL,
			Phases:       []sim.Phase{{Rate: cfg.rate(t)}},
		})
	}
	return sc
}

func run(cfg Config, v Variant) (Result, error) {
	recs, err := sim.Run(cfg.scenario(v))
	if err != nil {
		return Result{}, err
	}
	res := Result{Variant: v}
	for i := range cfg.Tenants {
		s := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == i })
		tr := TenantResult{
			Requests:  s.Requests,
			Served:    s.Served,
			Rejected:  s.CapacityRejections(),
			Displaced: s.Displaced,
			Expired:   s.Drops[flowcontrol.OutcomeRejectedTTLExpired],
			P95Queue:  sim.Percentile(s.QueueTimes, 95),
		}
		var tokens int
		for _, r := range recs {
			if r.Tenant == i && r.Served {
				tokens += r.PromptTokens + r.OutputTokens
			}
		}
		tr.Tokens = float64(tokens) / cfg.Duration.Seconds()
		res.Tenants = append(res.Tenants, tr)
	}
	return res, nil
}

// PrintScenario describes the scenario.
func PrintScenario(out io.Writer, cfg Config) {
	fmt.Fprintf(out, "%d servers × %d slots, %.2f× overload for %v; one band: capacity %d, TTL %v; cost = prompt tokens; seed %d\n",
		cfg.Servers, cfg.Slots, cfg.Overload, cfg.Duration, cfg.Capacity, cfg.TTL, cfg.Seed)
	for _, t := range cfg.Tenants {
		ttl := cfg.TTL
		if t.TTL > 0 {
			ttl = min(ttl, t.TTL)
		}
		fmt.Fprintf(out, "  %-8s %5.1f req/s, prompt ~%.0f tokens, output ~%.0f tokens, gives up after %v\n",
			t.Name, cfg.rate(t), t.Prompt, t.Output, ttl)
	}
}

// PrintTable writes results as an aligned table, a row per variant and
// tenant.
func PrintTable(out io.Writer, cfg Config, results []Result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "fairness\tfair admission\ttenant\tsent\tserved\trejected\tevicted\texpired\tp95 queue\tserved tok/s\t\n")
	for _, r := range results {
		for i, t := range r.Tenants {
			name, fair := "", ""
			if i == 0 {
				name, fair = r.Variant.Name, onOff(r.Variant.FairAdmission)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f%%\t%d\t%d\t%d\t%s\t%.0f\t\n", name, fair, cfg.Tenants[i].Name,
				t.Requests, 100*t.Success(), t.Rejected, t.Displaced, t.Expired, millis(t.P95Queue), t.Tokens)
		}
	}
	tw.Flush()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func millis(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// SeedSummary is one variant over seeds: the heavy tenant's success rate,
// and the worst light tenant's in each seed.
type SeedSummary struct {
	Variant      Variant
	Heavy, Light sim.Spread
}

// Seeds runs the variants for seeds 1..n and summarizes each.
func Seeds(cfg Config, variants []Variant, n int) ([]SeedSummary, error) {
	perSeed, err := sim.OverSeeds(sim.SeedRange(1, uint64(n)), func(seed uint64) ([]Result, error) {
		cfg := cfg
		cfg.Seed = seed
		return Simulate(cfg, variants)
	})
	if err != nil {
		return nil, err
	}
	heavy := make([][]float64, len(variants))
	light := make([][]float64, len(variants))
	for _, results := range perSeed {
		for v, r := range results {
			worst := 1.0
			for i, t := range r.Tenants {
				if cfg.Tenants[i].Rate == 0 {
					heavy[v] = append(heavy[v], t.Success())
				} else {
					worst = min(worst, t.Success())
				}
			}
			light[v] = append(light[v], worst)
		}
	}
	var out []SeedSummary
	for v := range variants {
		out = append(out, SeedSummary{Variant: variants[v], Heavy: sim.SpreadOf(heavy[v]), Light: sim.SpreadOf(light[v])})
	}
	return out, nil
}

// PrintSeeds writes the summary over seeds.
func PrintSeeds(out io.Writer, sums []SeedSummary) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "fairness\tfair admission\theavy success\tworst light success\t\n")
	pct := func(s sim.Spread) string {
		return fmt.Sprintf("%.1f / %.1f / %.1f%%", 100*s.Min, 100*s.Median, 100*s.Max)
	}
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", s.Variant.Name, onOff(s.Variant.FairAdmission), pct(s.Heavy), pct(s.Light))
	}
	tw.Flush()
}
