package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/headroom/window"
)

// The pool and the traffic every scenario shares: 16 slots serving a
// log-normal 400 ms on average (40 req/s), interactive tenants switching
// between a quiet 12 and a busy 38 req/s in phases of mean 5 s, and batch
// dispatchers with an endless backlog, 1 ms from the router.
const (
	slots          = 16
	meanService    = 400 * time.Millisecond
	serviceSigma   = 0.6
	perOutputToken = time.Millisecond
	quietRate      = 12
	busyRate       = 38
	meanPhase      = 5 * time.Second
	latency        = time.Millisecond
	maxWindow      = 256
	// simDuration is the simulated time of one run.
	simDuration = 5 * time.Minute
)

// Scenario is one workload: the bands, and how many batch dispatchers share
// the batch band. Tenant 0 is interactive; tenants 1..Dispatchers are the
// dispatchers, each one flow with its own window.
type Scenario struct {
	Name        string
	Dispatchers int
	// Shared puts the interactive tenants in the batch band (one band of
	// capacity 64, no TTL); otherwise they have band 10 (capacity 64) to
	// themselves and the batch band (-10, capacity BatchCapacity) has the
	// queue-wait TTL BatchTTL.
	Shared        bool
	BatchCapacity int
	BatchTTL      time.Duration
	// Alone silences the interactive tenants: the dispatchers have the
	// pool to themselves.
	Alone bool
}

// Scenarios are the workloads of the comparison.
var Scenarios = []Scenario{
	{Name: "backlog beside interactive tenants (one band)", Dispatchers: 1, Shared: true, BatchCapacity: 64},
	{Name: "batch band with a 2 s TTL below the interactive band", Dispatchers: 1, BatchCapacity: 64, BatchTTL: 2 * time.Second},
	{Name: "2 dispatchers sharing the band", Dispatchers: 2, Shared: true, BatchCapacity: 64},
	{Name: "4 dispatchers sharing the band", Dispatchers: 4, Shared: true, BatchCapacity: 64},
}

const (
	interactiveBand = 10
	batchBand       = -10
)

func (sc Scenario) config(seed uint64) sim.Config {
	output := sim.Tokens{Mean: float64(meanService / perOutputToken), Sigma: serviceSigma}
	bands := []flowcontrol.BandConfig{{Priority: batchBand, RequestCapacity: capacity.Bounded(int64(sc.BatchCapacity)), TTL: sc.BatchTTL}}
	interactive, quiet, busy := batchBand, float64(quietRate), float64(busyRate)
	if sc.Alone {
		quiet, busy = 0, 0
	}
	if !sc.Shared {
		bands = append(bands, flowcontrol.BandConfig{Priority: interactiveBand, RequestCapacity: capacity.Bounded(64)})
		interactive = interactiveBand
	}
	tenants := []sim.Tenant{{
		Name: "interactive", Priority: interactive, OutputTokens: output,
		Phases:       []sim.Phase{{Rate: quiet, For: meanPhase}, {Rate: busy, For: meanPhase}},
		RandomPhases: true,
	}}
	for i := range sc.Dispatchers {
		tenants = append(tenants, sim.Tenant{Name: "batch-" + strconv.Itoa(i+1), Priority: batchBand, OutputTokens: output, TTL: sc.BatchTTL})
	}
	return sim.Config{
		Seed:     seed,
		Duration: simDuration,
		Horizon:  simDuration,
		Controller: flowcontrol.Config{
			Bands: bands,
			// A full band refuses: the comparison counts the refusals a
			// window earns. Displacement would turn some into evictions of
			// the other flows, which is the fairness simulation's subject.
			NoDisplacement:   true,
			FallbackPriority: batchBand,
		},
		Pool:    sim.PoolConfig{Servers: 1, Slots: slots, PerOutputToken: perOutputToken},
		Tenants: tenants,
	}
}

// gate is what a dispatcher asks before sending and tells after each
// response: Sluice's window, or the llm-d-async-style gate.
type gate interface {
	acquire(now time.Time) (window.Ticket, bool)
	done(now time.Time, t window.Ticket, fb window.Feedback)
	// closed returns the end of the latest Retry-After closure: a refused
	// request is sent again no sooner.
	closed() time.Time
}

type sluiceGate struct{ w *window.Window }

func (g sluiceGate) acquire(now time.Time) (window.Ticket, bool) { return g.w.TryAcquire(now) }
func (g sluiceGate) done(now time.Time, t window.Ticket, fb window.Feedback) {
	g.w.Done(now, t, fb)
}
func (g sluiceGate) closed() time.Time { return g.w.ClosedUntil() }

// Variant is one dispatcher design: a gate, and the signals passed to it.
type Variant struct {
	Name string
	// Async selects the llm-d-async-style gate with queue-delay target
	// AsyncTarget (0: none); otherwise Sluice's window with Window.
	Async       bool
	AsyncTarget time.Duration
	Window      window.Config
	// The signals removed from every response before the gate sees it.
	NoHeadroom, NoQueueDelay, NoRetryAfter bool
}

// Variants are the designs compared, the first two being the pair the test
// asserts on.
var Variants = []Variant{
	{Name: "sluice window", Window: window.Config{Max: maxWindow}},
	{Name: "llm-d-async-style gate", Async: true},
	{Name: "llm-d-async-style, headroom ignored", Async: true, NoHeadroom: true},
	{Name: "llm-d-async-style, queue target 500ms", Async: true, AsyncTarget: 500 * time.Millisecond},
	{Name: "window: neither signal", Window: window.Config{Max: maxWindow}, NoHeadroom: true, NoQueueDelay: true},
	{Name: "window: headroom, all of it", Window: window.Config{Max: maxWindow, Share: 1}, NoQueueDelay: true},
	{Name: "window: headroom, half (default)", Window: window.Config{Max: maxWindow}, NoQueueDelay: true},
	{Name: "window: queue delay 1s only", Window: window.Config{Max: maxWindow, TargetQueueDelay: time.Second}, NoHeadroom: true},
	{Name: "window: half headroom + queue delay 1s", Window: window.Config{Max: maxWindow, TargetQueueDelay: time.Second}},
	{Name: "window: Retry-After ignored", Window: window.Config{Max: maxWindow}, NoRetryAfter: true},
}

// WindowScenario is the first scenario, under the name of the comparison
// that Windows makes on it.
var WindowScenario = Scenario{
	Name:        "a fixed window against AIMD (queue-delay target 2s), with and without headroom (one band)",
	Dispatchers: 1, Shared: true, BatchCapacity: 64,
}

// Windows measure what the headroom header is worth to the simplest
// dispatchers: one that keeps 64 requests in flight whatever the router
// says, and an AIMD window (Sluice's, with no Max) that halves on a
// capacity refusal, honours Retry-After and holds its growth once requests
// wait 2 s, without the headroom and with it.
var Windows = []Variant{
	{Name: "fixed window 64", Window: window.Config{Initial: 64, Min: 64, Max: 64}, NoHeadroom: true},
	{Name: "AIMD without headroom", Window: window.Config{TargetQueueDelay: 2 * time.Second}, NoHeadroom: true},
	{Name: "AIMD with headroom", Window: window.Config{TargetQueueDelay: 2 * time.Second}},
}

// Run is what one variant achieved on one scenario and seed.
type Run struct {
	// Goodput is the dispatchers' completed requests per second;
	// BandGoodput adds the interactive tenants' served requests: with the
	// band busy, what one gains the other loses.
	Goodput, BandGoodput float64
	// Saturated, Expired and Displaced count the dispatchers' refused
	// attempts by dropped reason.
	Saturated, Expired, Displaced int
	// P95 is the 95th percentile of the dispatchers' served requests'
	// latency, from first attempt to completion (refusals and waits
	// included).
	P95 time.Duration
	// InteractiveServed is the share of the interactive tenants' requests
	// served; InteractiveP95 their 95th percentile latency.
	InteractiveServed float64
	InteractiveP95    time.Duration
}

// Simulate runs variant v on scenario sc with seed.
func Simulate(sc Scenario, v Variant, seed uint64) (Run, error) {
	s, err := sim.New(sc.config(seed))
	if err != nil {
		return Run{}, err
	}
	for i := range sc.Dispatchers {
		var g gate
		if v.Async {
			g = newAsyncGate(maxWindow, v.AsyncTarget)
		} else {
			w, err := window.New(v.Window)
			if err != nil {
				return Run{}, err
			}
			g = sluiceGate{w}
		}
		d := &dispatcher{s: s, tenant: 1 + i, g: g, v: v}
		s.Clock().At(0, d.send)
	}
	recs := s.Run()

	var run Run
	batch := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant > 0 && r.Served })
	run.Goodput = float64(batch.Served) / simDuration.Seconds()
	run.P95 = sim.Percentile(batch.Latency, 95)
	for _, r := range recs {
		if r.Tenant > 0 {
			// Refusals count at the router, also for requests still
			// waiting to be sent again when the run ends.
			run.Saturated += r.Drops[flowcontrol.OutcomeRejectedSaturated] - r.Displaced
			run.Expired += r.Drops[flowcontrol.OutcomeRejectedTTLExpired]
			run.Displaced += r.Displaced
		}
	}
	inter := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == 0 })
	if inter.Requests > 0 {
		run.InteractiveServed = float64(inter.Served) / float64(inter.Requests)
	}
	run.InteractiveP95 = sim.Percentile(inter.Latency, 95)
	run.BandGoodput = float64(batch.Served+inter.Served) / simDuration.Seconds()
	return run, nil
}

// dispatcher is one batch dispatcher: an endless backlog, sent as its gate
// allows, one network latency away from the router. A refused job is sent
// again, before any new one, once its Retry-After has passed.
type dispatcher struct {
	s      *sim.Sim
	tenant int
	g      gate
	v      Variant
	retry  []pending
	waking bool // a wake-up at the end of a closure is scheduled
}

type pending struct {
	r  *sim.Record
	at time.Time
}

func (d *dispatcher) send() {
	clock := d.s.Clock()
	now := clock.Now()
	for {
		t, ok := d.g.acquire(now)
		if !ok {
			break
		}
		r := d.next(now)
		clock.After(latency, func() {
			d.s.Send(r, func(resp sim.Response) { d.respond(r, t, resp) })
		})
	}
	if until := d.g.closed(); until.After(now) && !d.waking {
		d.waking = true
		clock.At(until.Sub(clock.Epoch()), func() {
			d.waking = false
			d.send()
		})
	}
}

// next returns the first refused job whose Retry-After has passed, or a
// new job from the backlog.
func (d *dispatcher) next(now time.Time) *sim.Record {
	for i, p := range d.retry {
		if !p.at.After(now) {
			d.retry = append(d.retry[:i], d.retry[i+1:]...)
			return p.r
		}
	}
	return d.s.NewRecord(d.tenant)
}

// respond writes the response as a Sluice router would (status, dropped
// reason, Retry-After in whole seconds, headroom sampled while the request
// still holds its slot, queue duration in whole milliseconds), removes the
// signals the variant ignores, and hands what window.Read makes of it to
// the gate a network latency later.
func (d *dispatcher) respond(r *sim.Record, t window.Ticket, resp sim.Response) {
	h := http.Header{}
	status := http.StatusOK
	switch {
	case resp.Served:
		if n, ok := headroom.Sample(d.s.Controller(), headroom.Admitted(resp.Effective)); ok && !d.v.NoHeadroom {
			h.Set(headroom.HeaderName, strconv.FormatInt(n, 10))
		}
		if !d.v.NoQueueDelay {
			h.Set(window.QueueDurationHeader, strconv.FormatInt(resp.QueueTime.Milliseconds(), 10))
		}
	case resp.Rejection != nil:
		status = resp.Rejection.Outcome.HTTPStatus()
		h.Set(window.DroppedReasonHeader, resp.Rejection.Outcome.String())
		if !d.v.NoQueueDelay {
			h.Set(window.QueueDurationHeader, strconv.FormatInt(resp.Rejection.QueueTime.Milliseconds(), 10))
		}
		if resp.RetryAfter > 0 && !d.v.NoRetryAfter {
			h.Set("Retry-After", strconv.FormatInt(int64((resp.RetryAfter+time.Second-1)/time.Second), 10))
		}
	default:
		status = http.StatusBadGateway
	}
	clock := d.s.Clock()
	clock.After(latency, func() {
		now := clock.Now()
		d.g.done(now, t, window.Read(status, h, now))
		if resp.Served {
			d.s.End(r)
		} else {
			d.retry = append(d.retry, pending{r, maxTime(now, d.g.closed())})
		}
		d.send()
	})
}
