package main

import (
	"fmt"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Setup is the router in front of the pool: one controller, or replicas
// that share a fleet view, or replicas that share nothing.
type Setup struct {
	Name string
	// Replicas routers, each with its own controller; requests (and each
	// retry) go to them in turn. 1: one controller with the whole budget.
	Replicas int
	// Synced replicas share one fleet.View over a store; unsynced ones
	// each take the static share, MaxInFlight(C/R) and capacity Q/R.
	Synced bool
}

// Setups are the routers every scenario runs behind.
var Setups = []Setup{
	{Name: "one controller", Replicas: 1},
	// The same controller behind a view of a fleet of one: how far two
	// runs of one controller's budget differ, seed by seed, for nothing
	// but the view's rounding and timing — the comparisons' noise.
	{Name: "1 replica, synced", Replicas: 1, Synced: true},
	{Name: "2 replicas, synced", Replicas: 2, Synced: true},
	{Name: "4 replicas, synced", Replicas: 4, Synced: true},
	{Name: "2 replicas, unsynced", Replicas: 2},
	{Name: "4 replicas, unsynced", Replicas: 4},
}

// Sync is the fleet view's setting: each replica's round, the store's
// delay, from a publish to when reads see it, and the overdraft
// (fleet.Config.Overdraft).
type Sync struct {
	Period, Delay time.Duration
	Overdraft     int64
}

// DefaultSync is a 100 ms period over a store 5 ms away, with the
// simulator's default overdraft.
var DefaultSync = Sync{Period: 100 * time.Millisecond, Delay: 5 * time.Millisecond, Overdraft: sim.DefaultOverdraft}

// router sets cfg up behind setup: budget in flight for the whole fleet,
// and the bands' fleet-wide request capacities; with handOff, gates for
// servers that schedule by priority. It returns the Fleet to start once
// the Sim is made (nil for one controller or unsynced).
func router(cfg *sim.Config, setup Setup, sync Sync, budget int64, capacities map[int]int64, handOff bool) *sim.Fleet {
	cfg.Replicas = setup.Replicas
	if setup.Synced {
		overdraft := sync.Overdraft
		if overdraft == 0 {
			overdraft = -1 // none: 0 is the Fleet's default
		}
		f := &sim.Fleet{Budget: budget, Capacities: capacities, Period: sync.Period, Delay: sync.Delay, Overdraft: overdraft,
			PriorityScheduling: handOff}
		f.Configure(cfg)
		return f
	}
	cfg.ReplicaGate = sim.Unsynced(budget, setup.Replicas)
	if handOff {
		share := int(budget) / setup.Replicas
		cfg.ReplicaGate = func(*sim.Pool, int) gate.Gate { return gate.PriorityMaxInFlight(share) }
	}
	for i, bc := range cfg.Controller.Bands {
		if q, ok := capacities[bc.Priority]; ok {
			cfg.Controller.Bands[i].RequestCapacity = sim.StaticCapacity(q, setup.Replicas)
		}
	}
	return nil
}

// run builds and runs cfg, starting f's rounds.
func run(cfg sim.Config, f *sim.Fleet) (*sim.Sim, error) {
	s, err := sim.New(cfg)
	if err != nil {
		return nil, err
	}
	if f != nil {
		if err := f.Start(s); err != nil {
			return nil, err
		}
	}
	s.Run()
	return s, nil
}

// The cross-band scenario, examples/crossband's: bursty chat beside a
// batch backlog of long generations, on 4 servers of 16 slots.
const (
	servers, slotsPerServer = 4, 16
	budget                  = servers * slotsPerServer
	chatBand, batchBand     = 10, -1
	simDuration             = 5 * time.Minute
	chatSLO                 = time.Second
	batchClients            = 120
	batchOutputSigma        = 1.0
	sampleEvery             = 100 * time.Millisecond
)

// Admission is how a controller treats the two bands: strict priority
// alone, or with in-flight eviction; or the servers' own priority
// scheduling with the band handed to them.
type Admission struct {
	Name     string
	Eviction *flowcontrol.Eviction
	// HandOff runs the servers' priority scheduler (vLLM's, each server
	// with its own queue), each request's band handed to them (−band),
	// and gates that let a higher band past the budget while a lower one
	// runs: gate.PriorityMaxInFlight for one controller and unsynced
	// replicas, fleet.Config.PriorityScheduling for synced ones.
	HandOff bool
}

// Admissions are the rows of the cross-band table: strict priority,
// examples/crossband's tuned eviction (16 a decision, 800 ms grace), and
// the hand-off.
var Admissions = []Admission{
	{Name: "strict priority"},
	{Name: "eviction (16, 800ms)", Eviction: &flowcontrol.Eviction{MaxPerDecision: 16, Grace: 800 * time.Millisecond}},
	{Name: "vLLM priority + hand-off", HandOff: true},
}

// CrossBand is what one run of the cross-band scenario gave.
type CrossBand struct {
	// SLOMet is the share of chat requests whose first token came within
	// the SLO, in percent; BatchPerSecond the batch requests completed
	// within the five minutes, per second.
	SLOMet, BatchPerSecond float64
	// Revocations counts the batch attempts revoked; InFlight is what the
	// controllers hold at the end (0).
	Revocations, InFlight int
	// WastedTokens is the output tokens the revoked attempts had decoded,
	// all lost.
	WastedTokens int
	// Busy is the pool's slots running a request, on average over the
	// five minutes, in percent; Queued the pool's own queue (requests
	// admitted beyond its slots) on average.
	Busy, Queued float64
}

// RunCrossBand runs the cross-band scenario with admission a behind setup.
func RunCrossBand(setup Setup, a Admission, sync Sync, seed uint64) (CrossBand, error) {
	cfg := sim.Config{
		Seed:     seed,
		Duration: simDuration,
		Controller: flowcontrol.Config{
			Bands:            []flowcontrol.BandConfig{{Priority: chatBand}, {Priority: batchBand}},
			FallbackPriority: batchBand,
			Eviction:         a.Eviction,
		},
		Pool: sim.PoolConfig{Servers: servers, Slots: slotsPerServer, Base: 50 * time.Millisecond,
			PerPromptToken: 50 * time.Microsecond, PerOutputToken: 20 * time.Millisecond},
		Tenants: []sim.Tenant{
			{Name: "chat", Priority: chatBand, SLO: chatSLO,
				PromptTokens: sim.Tokens{Mean: 500}, OutputTokens: sim.Tokens{Mean: 150},
				Phases: []sim.Phase{{Rate: 3, For: 20 * time.Second}, {Rate: 12, For: 10 * time.Second}}},
			{Name: "batch", Priority: batchBand, Clients: batchClients, Think: 2 * time.Second,
				PromptTokens: sim.Tokens{Mean: 1000}, OutputTokens: sim.Tokens{Mean: 1000, Sigma: batchOutputSigma},
				Retry: sim.Retry{MaxAttempts: 1000, Backoff: time.Second, MaxBackoff: 8 * time.Second, MaxRetryAfter: time.Minute}},
		},
	}
	if a.HandOff {
		cfg.Pool.ServerQueues, cfg.Pool.Scheduler = true, sim.Priority
		cfg.Pool.PriorityOf = func(band int) int { return -band }
	}
	f := router(&cfg, setup, sync, budget, nil, a.HandOff)
	s, err := sim.New(cfg)
	if err != nil {
		return CrossBand{}, fmt.Errorf("fleet: %s, %s, seed %d: %w", setup.Name, a.Name, seed, err)
	}
	if f != nil {
		if err := f.Start(s); err != nil {
			return CrossBand{}, err
		}
	}
	var busy, queued, samples int
	var sample func()
	sample = func() {
		busy += s.Pool().Busy()
		queued += s.Pool().Queued()
		samples++
		if s.Clock().Elapsed() < simDuration {
			s.Clock().After(sampleEvery, sample)
		}
	}
	s.Clock().At(0, sample)
	s.Run()
	recs := s.Records()
	chat := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == 0 })
	batch := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == 1 })
	completed := 0
	for _, r := range recs {
		if r.Tenant == 1 && r.Served && r.End <= simDuration {
			completed++
		}
	}
	out := CrossBand{
		SLOMet:         100 * chat.SLOShare(),
		BatchPerSecond: float64(completed) / simDuration.Seconds(),
		Revocations:    batch.Aborts,
		WastedTokens:   batch.WastedTokens,
		Busy:           100 * float64(busy) / float64(samples*budget),
		Queued:         float64(queued) / float64(samples),
	}
	for _, fc := range s.Controllers() {
		out.InFlight += fc.InFlight()
	}
	return out, nil
}

// The fairness scenario, examples/fairness's with one light tenant: one
// band of 64 places and a 10 s TTL in front of 4 × 8 slots at 1.5×
// overload; a heavy tenant with 4,000-token prompts sends the rest of the
// overload beside a light one of 2 requests/s with 300-token prompts;
// deficit round robin over prompt tokens with fair admission.
const (
	fairServers, fairSlots = 4, 8
	fairBudget             = fairServers * fairSlots
	fairCapacity           = 64
	fairTTL                = 10 * time.Second
	fairDuration           = 2 * time.Minute
	fairOverload           = 1.5
	fairPerPrompt          = 100 * time.Microsecond
	fairPerOutput          = 5 * time.Millisecond
	lightRate              = 2
)

// heavyRate is the heavy tenant's rate: the offered work, 1.5 × the
// pool's slots, less the light tenant's, in its requests.
func heavyRate() float64 {
	service := func(prompt, output float64) float64 {
		return (prompt*float64(fairPerPrompt) + output*float64(fairPerOutput)) / float64(time.Second)
	}
	return (fairOverload*fairBudget - lightRate*service(300, 100)) / service(4000, 200)
}

// Fairness is what one run of the fairness scenario gave: each tenant's
// share of its requests served, in percent.
type Fairness struct {
	Light, Heavy float64
	InFlight     int
}

// RunFairness runs the fairness scenario behind setup.
func RunFairness(setup Setup, sync Sync, seed uint64) (Fairness, error) {
	cfg := sim.Config{
		Seed:     seed,
		Duration: fairDuration,
		Controller: flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(fairCapacity), TTL: fairTTL,
				Fairness: flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{})}},
		},
		Pool: sim.PoolConfig{Servers: fairServers, Slots: fairSlots, PerPromptToken: fairPerPrompt, PerOutputToken: fairPerOutput},
		Cost: func(r *sim.Record) int64 { return int64(r.PromptTokens) },
		Tenants: []sim.Tenant{
			{Name: "heavy", PromptTokens: sim.Tokens{Mean: 4000, Sigma: 0.5}, OutputTokens: sim.Tokens{Mean: 200, Sigma: 0.5},
				Phases: []sim.Phase{{Rate: heavyRate()}}},
			{Name: "light", PromptTokens: sim.Tokens{Mean: 300, Sigma: 0.5}, OutputTokens: sim.Tokens{Mean: 100, Sigma: 0.5},
				Phases: []sim.Phase{{Rate: lightRate}}},
		},
	}
	f := router(&cfg, setup, sync, fairBudget, map[int]int64{0: fairCapacity}, false)
	s, err := run(cfg, f)
	if err != nil {
		return Fairness{}, fmt.Errorf("fleet: %s, fairness, seed %d: %w", setup.Name, seed, err)
	}
	recs := s.Records()
	heavy := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == 0 })
	light := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == 1 })
	out := Fairness{Light: 100 * float64(light.Served) / float64(max(light.Requests, 1)),
		Heavy: 100 * float64(heavy.Served) / float64(max(heavy.Requests, 1))}
	for _, fc := range s.Controllers() {
		out.InFlight += fc.InFlight()
	}
	return out, nil
}
