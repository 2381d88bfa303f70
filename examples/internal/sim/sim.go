// Package sim is the discrete-event simulator of Sluice's examples: the real
// [flowcontrol.FlowController] on a virtual [Clock], in front of a pool of
// simulated model servers, fed by simulated tenants.
//
// A scenario is a [Config]: the controller's configuration, the pool (slots,
// a service time that grows with prompt and output tokens, failures) and the
// tenants (open-loop Poisson arrivals in phases, or closed-loop clients;
// prompt and output sizes; SLOs; retries that honour Retry-After). [Run]
// plays it and returns one [Record] per request, from which [Summarize]
// computes every table: latency percentiles, SLO met, goodput, drops by
// reason, retries and wasted retries. A scenario whose clients follow their
// own logic (an AIMD dispatcher, say) builds a [Sim] with [New] and drives
// it with [Sim.NewRecord], [Sim.Send] and [Sim.Clock].
//
// Every request goes through [flowcontrol.FlowController.Submit] and
// [flowcontrol.Admission.Done] on the virtual clock, so the order, the
// capacities, the TTLs, Retry-After and the gate are the library's own.
// Everything runs on one goroutine, time moves only from event to event, and
// every random draw comes from a PCG generator seeded by [Config.Seed], one
// stream per purpose: the same configuration gives the same records, and
// the same bytes out, on every run and machine.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// Config is a scenario.
type Config struct {
	// Seed seeds every random draw.
	Seed uint64
	// Duration is how long tenants start new requests. Retries and requests
	// already sent go on after it.
	Duration time.Duration
	// Horizon, if positive, stops the run at that virtual time; requests
	// not finished by then have Record.Done false. With Horizon 0 the run
	// goes on until nothing is left to do.
	Horizon time.Duration

	// Controller configures the controller. Clock must be nil: the
	// simulation sets its own. Gate nil means the pool's gate
	// ([Pool.Gate]). An Observer is called as configured, before Observe.
	// Each attempt's Request.Tag is its *Record. With Eviction or a band's
	// Guarantee, the controller may revoke an admission: the pool then
	// aborts that attempt at once, at the revocation's issue ([Pool.Abort];
	// a Revocations hook is called as configured, before), and its client
	// gets the eviction ([Response.Rejection]), as a server stops a
	// request whose admission the router revoked.
	Controller flowcontrol.Config
	// Gate, if set, makes the gate from the pool instead; it overrides
	// Controller.Gate. A new gate is needed for every run.
	Gate func(*Pool) gate.Gate
	// Replicas is the number of routers in front of the pool, each with
	// its own controller configured by Controller (0 means 1). Attempts
	// go to the replicas in turn. With more than one, ReplicaGate or Gate
	// makes each replica's gate; Controller.Gate alone is refused.
	Replicas int
	// ReplicaGate, if set, makes the gate of each replica, given its index
	// from 0; it overrides Gate and Controller.Gate.
	ReplicaGate func(p *Pool, replica int) gate.Gate

	Pool    PoolConfig
	Tenants []Tenant

	// Observe, if set, sees every outcome the controller reports.
	Observe func(*Sim, flowcontrol.Event)
	// Submitted, if set, is called after each attempt's Submit returns,
	// when the controller has queued it or decided it. With Observe it
	// sees every change of every queue: a queue grows only on a Submit and
	// shrinks only with an outcome.
	Submitted func(*Sim, *Record)
	// Cost, if set, gives each attempt's flowcontrol.Request.Cost (its
	// estimated tokens, say); nil leaves it 0, which counts as 1.
	Cost func(*Record) int64
	// RetryAfter, if set, is the Retry-After a client receives with a
	// drop that may carry one ([RetryAfterOutcome]), in place of the
	// controller's RetryAfter; 0 means none. It is called as the rejection is decided, so it may read the
	// controller's state (the scenario's client-side Retry-After policies).
	RetryAfter func(*Sim, *flowcontrol.RejectionError) time.Duration
}

// Record is one request's life, from its first attempt to its end: served,
// or given up after its last attempt.
type Record struct {
	// Tenant is the index of the tenant in Config.Tenants.
	Tenant int
	// PromptTokens and OutputTokens are its sizes.
	PromptTokens, OutputTokens int
	// SLO is its tenant's time-to-first-token objective; 0 means none.
	SLO time.Duration
	// Arrival is the virtual time its first attempt reached the router.
	Arrival time.Duration
	// Done is set when it ended, at End: served, or not retried again.
	Done bool
	End  time.Duration
	// Served is set when an attempt completed; FirstToken is when its first
	// token came, QueueTime how long that attempt waited in its band.
	Served     bool
	FirstToken time.Duration
	QueueTime  time.Duration
	// Attempts counts the attempts sent. Wasted counts the retries (all
	// attempts but the first) that were not served either.
	Attempts, Wasted int
	// Drops counts the attempts the controller dropped, per outcome
	// (indexed by flowcontrol.Outcome; OutcomeDispatched stays 0), those
	// it revoked after their admission (evicted, evicted-priority)
	// included, and Failures those that failed on a server. Displaced
	// counts the drops displaced from their queue by a fairer flow
	// (flowcontrol.ErrDisplaced), which Drops counts as
	// rejected-saturated.
	Drops     [NumOutcomes]int
	Failures  int
	Displaced int
	// GaveUp is set when it ended unserved.
	GaveUp bool
	// Aborts counts the attempts aborted after their admission
	// ([Pool.Abort]); WastedTokens the output tokens those had decoded,
	// and WastedPrefill the time their prefills ran, all lost.
	Aborts        int
	WastedTokens  int
	WastedPrefill time.Duration
	// Preemptions counts the times a server preempted its attempts by
	// recompute (PoolConfig.KVCacheTokens, Scheduler), and
	// RecomputedTokens the tokens their prefills computed again when they
	// ran after it: each resumed run's prompt and the output tokens the
	// attempt kept.
	Preemptions      int
	RecomputedTokens int
	// held is, while the pool holds an attempt of it, that attempt's
	// place in the pool's list plus one (for Pool.Abort); 0 otherwise. An
	// index, not a pointer, so that a record prints the same on every run.
	held int
}

// NumOutcomes bounds the flowcontrol outcomes a Record counts: the length
// of Record.Drops. It leaves room for outcomes the controller may add; a
// test fails when it no longer does.
const NumOutcomes = 10

// Latency returns the end-to-end latency: from the first attempt to the
// end of the last.
func (r *Record) Latency() time.Duration { return r.End - r.Arrival }

// TTFT returns the time from the first attempt to the first token, and
// false if the request was not served.
func (r *Record) TTFT() (time.Duration, bool) { return r.FirstToken - r.Arrival, r.Served }

// Response is what the client of one attempt receives.
type Response struct {
	// Served: the attempt completed. QueueTime is its wait in its band,
	// Effective the priority of that band.
	Served    bool
	QueueTime time.Duration
	Effective int
	// Rejection is the controller's error when it dropped the attempt:
	// at the door or in its queue, or, with Aborted, by revoking its
	// admission (its Outcome evicted or evicted-priority, from
	// [flowcontrol.Admission.Err]).
	Rejection *flowcontrol.RejectionError
	// RetryAfter comes with a drop that may carry one
	// ([RetryAfterOutcome]): Config.RetryAfter's, or the controller's; 0
	// means none.
	RetryAfter time.Duration
	// Failed: the server failed while running the attempt.
	Failed bool
	// Aborted: the attempt was admitted, then aborted before it
	// completed ([Pool.Abort]); Rejection is set too when its admission
	// had been revoked.
	Aborted bool
}

// Sim is one run of a scenario.
type Sim struct {
	cfg     Config
	clock   *Clock
	fc      *flowcontrol.FlowController // fcs[0]
	fcs     []*flowcontrol.FlowController
	sent    int // attempts sent, which pick the replica in turn
	pool    *Pool
	headers []http.Header // per tenant, read-only
	tokens  []*rand.Rand  // per tenant: request sizes
	retries []*rand.Rand  // per tenant: backoff jitter
	records []*Record
	slab    []Record
}

// Random streams: every purpose draws from its own, so that changing what
// one consumes (a retry policy, say) leaves the others' draws unchanged.
const (
	streamArrivals = iota
	streamTokens
	streamRetries
	streamThink
	streamsPerTenant
)

// rng returns the generator of stream for tenant.
func (cfg *Config) rng(tenant, stream int) *rand.Rand {
	return rand.New(rand.NewPCG(cfg.Seed, uint64(tenant*streamsPerTenant+stream)))
}

// epoch is the virtual time 0 of every run.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// New builds a run of cfg, with its tenants' first arrivals scheduled. Run
// it with [Sim.Run].
func New(cfg Config) (*Sim, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sim{cfg: cfg, clock: NewClock(epoch)}
	s.pool = newPool(cfg.Pool, s.clock)
	for replica := range max(cfg.Replicas, 1) {
		fcfg := cfg.Controller
		fcfg.Clock = s.clock
		switch {
		case cfg.ReplicaGate != nil:
			fcfg.Gate = cfg.ReplicaGate(s.pool, replica)
		case cfg.Gate != nil:
			fcfg.Gate = cfg.Gate(s.pool)
		case fcfg.Gate == nil:
			fcfg.Gate = s.pool.Gate()
		}
		if _, ok := fcfg.Gate.(gate.MeteredGate); ok {
			s.pool.firstToken = true
		}
		// A revocation is issued on the simulation's one goroutine, in the
		// event that took it: the victim stops at that instant, and its
		// Done, from within the hook, confirms it.
		revocations := fcfg.Revocations
		fcfg.Revocations = func(rv flowcontrol.Revocation) {
			if revocations != nil {
				revocations(rv)
			}
			if r, ok := rv.Tag.(*Record); ok && rv.Step == flowcontrol.RevocationIssued {
				s.pool.Abort(r)
			}
		}
		if cfg.Observe != nil {
			user := fcfg.Observer
			fcfg.Observer = func(ev flowcontrol.Event) {
				if user != nil {
					user(ev)
				}
				cfg.Observe(s, ev)
			}
		}
		fc, err := flowcontrol.New(fcfg)
		if err != nil {
			return nil, err
		}
		s.fcs = append(s.fcs, fc)
	}
	s.fc = s.fcs[0]
	s.pool.revoked = s.rejection
	s.pool.nudge = func() {
		for _, fc := range s.fcs {
			fc.Nudge()
		}
	}

	for i, t := range cfg.Tenants {
		h := http.Header{}
		if t.SLO > 0 {
			h.Set(ordering.SLOTTFTHeader, strconv.FormatInt(t.SLO.Milliseconds(), 10))
		}
		s.headers = append(s.headers, h)
		s.tokens = append(s.tokens, cfg.rng(i, streamTokens))
		s.retries = append(s.retries, cfg.rng(i, streamRetries))
		switch {
		case len(t.Phases) > 0:
			o := &openLoop{s: s, tenant: i, rng: cfg.rng(i, streamArrivals)}
			o.startPhase(0)
			o.next(0)
		case t.Clients > 0:
			rng := cfg.rng(i, streamThink)
			for range t.Clients {
				(&closedLoop{s: s, tenant: i, rng: rng}).thinkThenSend()
			}
		}
	}
	return s, nil
}

func (cfg *Config) validate() error {
	switch {
	case cfg.Duration <= 0:
		return fmt.Errorf("sim: Duration %v is not positive", cfg.Duration)
	case cfg.Horizon < 0:
		return fmt.Errorf("sim: Horizon %v is negative", cfg.Horizon)
	case cfg.Controller.Clock != nil:
		return errors.New("sim: Controller.Clock is set; the simulation brings its own")
	case cfg.Replicas < 0:
		return fmt.Errorf("sim: Replicas %d is negative", cfg.Replicas)
	case cfg.Replicas > 1 && cfg.Controller.Gate != nil && cfg.Gate == nil && cfg.ReplicaGate == nil:
		return fmt.Errorf("sim: Replicas %d share Controller.Gate; set Gate or ReplicaGate to make one per replica", cfg.Replicas)
	}
	if err := cfg.Pool.validate(); err != nil {
		return err
	}
	for i, t := range cfg.Tenants {
		if err := t.validate(i); err != nil {
			return err
		}
	}
	return nil
}

// Run plays the scenario to its end and returns every request's record, in
// the order the requests were created.
func Run(cfg Config) ([]*Record, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return s.Run(), nil
}

// Run plays the simulation until nothing is left to do or the Horizon, and
// returns the records.
func (s *Sim) Run() []*Record {
	limit := time.Duration(math.MaxInt64)
	if s.cfg.Horizon > 0 {
		limit = s.cfg.Horizon
	}
	s.clock.Run(limit)
	return s.records
}

// Clock returns the simulation's clock, on which a scenario schedules its
// own events.
func (s *Sim) Clock() *Clock { return s.clock }

// Controller returns the controller under simulation, for snapshots: the
// first replica's.
func (s *Sim) Controller() *flowcontrol.FlowController { return s.fc }

// Controllers returns every replica's controller, in replica order.
func (s *Sim) Controllers() []*flowcontrol.FlowController { return s.fcs }

// Pool returns the simulated model servers.
func (s *Sim) Pool() *Pool { return s.pool }

// Config returns the scenario.
func (s *Sim) Config() *Config { return &s.cfg }

// Records returns the records of every request created so far.
func (s *Sim) Records() []*Record { return s.records }

// recordSlab is how many Records one allocation provides.
const recordSlab = 256

// NewRecord creates a request of tenant, with sizes drawn from its
// distributions. It is sent with [Sim.Send] or [Sim.Request].
func (s *Sim) NewRecord(tenant int) *Record {
	t := &s.cfg.Tenants[tenant]
	return s.newRecord(tenant, t.PromptTokens, t.OutputTokens)
}

// newRecord creates a request of tenant with sizes drawn from prompt and
// output.
func (s *Sim) newRecord(tenant int, prompt, output Tokens) *Record {
	if len(s.slab) == 0 {
		s.slab = make([]Record, recordSlab)
	}
	r := &s.slab[0]
	s.slab = s.slab[1:]
	t := &s.cfg.Tenants[tenant]
	*r = Record{
		Tenant:       tenant,
		SLO:          t.SLO,
		PromptTokens: max(prompt.draw(s.tokens[tenant]), 0),
		OutputTokens: max(output.draw(s.tokens[tenant]), 0),
	}
	s.records = append(s.records, r)
	return r
}

// bytesPerToken converts prompt tokens to the request's ByteSize.
const bytesPerToken = 4

// Send sends one attempt of r to the controller now. respond is called
// once, with the attempt's response: when the controller drops it, or when
// its server completes or fails it. A completed attempt's response is
// written while it still holds its slot and its admission, so respond may
// sample the band as a gateway stamping response headers would. Send
// records the attempt in r but does not end r: the caller decides whether
// to retry, and calls [Sim.End].
func (s *Sim) Send(r *Record, respond func(Response)) {
	now := s.clock.Elapsed()
	if r.Attempts == 0 {
		r.Arrival = now
	}
	r.Attempts++
	t := &s.cfg.Tenants[r.Tenant]
	req := flowcontrol.Request{
		Key:      flowcontrol.FlowKey{ID: t.Name, Priority: t.Priority},
		ByteSize: int64(r.PromptTokens) * bytesPerToken,
		Header:   s.headers[r.Tenant],
		TTL:      t.TTL,
		Tag:      r,
	}
	if s.cfg.Cost != nil {
		req.Cost = s.cfg.Cost(r)
	}
	fc := s.fcs[s.sent%len(s.fcs)]
	s.sent++
	fc.Submit(context.Background(), req, func(a *flowcontrol.Admission, err error) {
		if err == nil {
			s.pool.take(&job{rec: r, adm: a, respond: respond})
			return
		}
		respond(s.rejection(r, err))
	})
	if s.cfg.Submitted != nil {
		s.cfg.Submitted(s, r)
	}
}

// rejection counts the drop of an attempt of r by err, a
// *flowcontrol.RejectionError — at the door, in its queue, or by revoking
// its admission — and returns the response its client gets.
func (s *Sim) rejection(r *Record, err error) Response {
	var rej *flowcontrol.RejectionError
	if !errors.As(err, &rej) {
		panic(fmt.Sprintf("sim: an attempt was dropped with %T %v, not a RejectionError", err, err))
	}
	r.Drops[rej.Outcome]++
	if errors.Is(rej, flowcontrol.ErrDisplaced) {
		r.Displaced++
	}
	resp := Response{Rejection: rej, Effective: rej.Effective.Priority}
	if RetryAfterOutcome(rej.Outcome) {
		resp.RetryAfter = rej.RetryAfter
		if s.cfg.RetryAfter != nil {
			resp.RetryAfter = s.cfg.RetryAfter(s, rej)
		}
	}
	return resp
}

// RetryAfterOutcome reports whether a drop with outcome o may come with a
// Retry-After: a capacity rejection (a displacement included), an
// expiry, an empty pool or an eviction, the drops after which the client
// may come back. A client honours the value whatever the outcome, as the
// OpenAI SDKs do.
func RetryAfterOutcome(o flowcontrol.Outcome) bool {
	switch o {
	case flowcontrol.OutcomeRejectedSaturated, flowcontrol.OutcomeRejectedTTLExpired, flowcontrol.OutcomeRejectedNoEndpoints,
		flowcontrol.OutcomeEvicted, flowcontrol.OutcomeEvictedPriority:
		return true
	}
	return false
}

// End ends r now: served if its last attempt was, given up otherwise.
func (s *Sim) End(r *Record) {
	r.Done, r.End, r.GaveUp = true, s.clock.Elapsed(), !r.Served
}

// Request sends r and retries it by its tenant's Retry policy until it is
// served or given up, then ends it and calls then (if not nil).
func (s *Sim) Request(r *Record, then func(*Record)) {
	s.Send(r, func(resp Response) {
		if r.Attempts > 1 && !resp.Served {
			r.Wasted++
		}
		retry := s.cfg.Tenants[r.Tenant].Retry
		if resp.Served || r.Attempts >= retry.MaxAttempts {
			s.End(r)
			if then != nil {
				then(r)
			}
			return
		}
		d := retry.delay(r.Attempts-1, resp.RetryAfter, s.retries[r.Tenant])
		now := s.clock.Elapsed()
		if retry.GiveUpAfter > 0 && now+d-r.Arrival > retry.GiveUpAfter {
			s.End(r)
			if then != nil {
				then(r)
			}
			return
		}
		s.clock.After(d, func() { s.Request(r, then) })
	})
}
