package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/headroom/window"
)

// SimConfig describes one band of a router, the other tenants that share it
// and the dispatcher under test. All times are virtual.
type SimConfig struct {
	// Seed seeds every random draw; Duration is the simulated time.
	Seed     uint64
	Duration time.Duration

	// The band: Servers requests run at once (the router's gate), each for a
	// log-normal service time of mean MeanService; up to QueueCapacity more
	// wait in the band's FIFO queue. The band is the real FlowController's,
	// on the simulation's virtual clock: an arrival that finds the queue
	// full is rejected as rejected-saturated, with the controller's
	// Retry-After when RetryAfter is set.
	Servers       int
	MeanService   time.Duration
	ServiceSigma  float64
	QueueCapacity int
	RetryAfter    bool

	// Latency is the one-way network delay between dispatcher and router.
	Latency time.Duration

	// Other tenants send open-loop Poisson traffic to the same band and do
	// not retry. Their rate switches between QuietRate and BusyRate
	// (requests/s) at the end of phases of exponential length with mean
	// MeanPhase.
	QuietRate, BusyRate float64
	MeanPhase           time.Duration

	// The dispatcher has an endless backlog (a batch job) and retries a
	// rejected request. Fixed keeps FixedConcurrency in flight; the AIMD
	// dispatchers hold growth above TargetQueueDelay.
	FixedConcurrency int
	TargetQueueDelay time.Duration
}

// DefaultSimConfig is the workload `go run ./examples/dispatcher` simulates:
// a band of 16 slots serving 40 requests/s with a queue of 64, shared with
// tenants whose load swings between 30% and 95% of the band's service rate
// every few seconds, so the room left for the batch dispatcher keeps moving.
func DefaultSimConfig() SimConfig {
	return SimConfig{
		Seed:             1,
		Duration:         300 * time.Second,
		Servers:          16,
		MeanService:      400 * time.Millisecond,
		ServiceSigma:     0.6,
		QueueCapacity:    64,
		RetryAfter:       true,
		Latency:          time.Millisecond,
		QuietRate:        12,
		BusyRate:         38,
		MeanPhase:        5 * time.Second,
		FixedConcurrency: 64,
		TargetQueueDelay: 2 * time.Second,
	}
}

// Dispatcher names one of the three dispatchers the simulation compares.
type Dispatcher int

const (
	// Fixed keeps a fixed number of requests in flight.
	Fixed Dispatcher = iota
	// AIMD sizes its window from rejections, Retry-After and queue delay.
	AIMD
	// AIMDHeadroom is AIMD that also caps its window with the band headroom.
	AIMDHeadroom
)

// String names the dispatcher as the table prints it.
func (d Dispatcher) String() string {
	switch d {
	case Fixed:
		return "fixed concurrency"
	case AIMD:
		return "AIMD without headroom"
	case AIMDHeadroom:
		return "AIMD with headroom"
	}
	return fmt.Sprintf("Dispatcher(%d)", int(d))
}

// Result is what one dispatcher achieved on the simulated workload.
type Result struct {
	Dispatcher Dispatcher
	// Completed requests of the dispatcher, and Goodput = Completed per
	// second of simulated time.
	Completed int
	Goodput   float64
	// Rejections counts the dispatcher's rejected-saturated responses.
	Rejections int
	// MeanQueue and P95Queue are the queue times of its accepted requests.
	MeanQueue, P95Queue time.Duration
	// OthersServed and OthersRejected count the other tenants' requests.
	OthersServed, OthersRejected int
	// Decreases counts the window's multiplicative decreases (none for
	// Fixed, whose window cannot shrink).
	Decreases int
}

// Simulate runs every dispatcher on the same workload (same seed, same other
// tenants, same service times) and returns their results in the order
// Fixed, AIMD, AIMDHeadroom.
func Simulate(cfg SimConfig) ([]Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var results []Result
	for _, d := range []Dispatcher{Fixed, AIMD, AIMDHeadroom} {
		r, err := simulateOne(cfg, d)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

// printSimHeader describes the simulated workload in a few lines.
func printSimHeader(out io.Writer, cfg SimConfig) {
	fmt.Fprintf(out, "one band: %d slots, mean service %v, queue capacity %d, Retry-After %v\n",
		cfg.Servers, cfg.MeanService, cfg.QueueCapacity, cfg.RetryAfter)
	fmt.Fprintf(out, "other tenants: %g or %g req/s in phases of mean %v; latency %v each way\n",
		cfg.QuietRate, cfg.BusyRate, cfg.MeanPhase, cfg.Latency)
	fmt.Fprintf(out, "dispatcher: endless backlog; fixed window %d; AIMD target queue delay %v\n",
		cfg.FixedConcurrency, cfg.TargetQueueDelay)
	fmt.Fprintf(out, "%v simulated, seed %d\n\n", cfg.Duration, cfg.Seed)
}

// maxRate bounds the other tenants' rates. Times are drawn in whole
// microseconds: at much higher rates the gaps between arrivals round to
// zero and the simulated clock stalls (so does it for phases far below a
// millisecond).
const maxRate = 100_000

func (cfg SimConfig) validate() error {
	switch {
	case cfg.Duration <= 0:
		return fmt.Errorf("dispatcher: Duration %v is not positive", cfg.Duration)
	case cfg.Servers < 1:
		return fmt.Errorf("dispatcher: Servers %d is below 1", cfg.Servers)
	case cfg.MeanService <= 0:
		return fmt.Errorf("dispatcher: MeanService %v is not positive", cfg.MeanService)
	case cfg.ServiceSigma < 0:
		return fmt.Errorf("dispatcher: ServiceSigma %v is negative", cfg.ServiceSigma)
	case cfg.QueueCapacity < 0:
		return fmt.Errorf("dispatcher: QueueCapacity %d is negative", cfg.QueueCapacity)
	case cfg.Latency < 0:
		return fmt.Errorf("dispatcher: Latency %v is negative", cfg.Latency)
	case !(cfg.QuietRate >= 0 && cfg.QuietRate <= maxRate && cfg.BusyRate >= 0 && cfg.BusyRate <= maxRate):
		return fmt.Errorf("dispatcher: QuietRate %v and BusyRate %v must be between 0 and %d", cfg.QuietRate, cfg.BusyRate, maxRate)
	case cfg.MeanPhase < time.Millisecond:
		return fmt.Errorf("dispatcher: MeanPhase %v is below 1ms", cfg.MeanPhase)
	case cfg.FixedConcurrency < 1:
		return fmt.Errorf("dispatcher: FixedConcurrency %d is below 1", cfg.FixedConcurrency)
	case cfg.TargetQueueDelay < 0:
		return fmt.Errorf("dispatcher: TargetQueueDelay %v is negative", cfg.TargetQueueDelay)
	}
	return nil
}

// PrintTable writes results as an aligned table.
func PrintTable(out io.Writer, results []Result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "dispatcher\tgoodput req/s\tcompleted\tcapacity rejections\tmean queue ms\tp95 queue ms\tdecreases\tothers served\tothers rejected\t")
	for _, r := range results {
		decreases := "-" // a fixed window never shrinks
		if r.Dispatcher != Fixed {
			decreases = strconv.Itoa(r.Decreases)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t\n",
			r.Dispatcher, r.Goodput, r.Completed, r.Rejections,
			r.MeanQueue.Milliseconds(), r.P95Queue.Milliseconds(), decreases,
			r.OthersServed, r.OthersRejected)
	}
	tw.Flush()
}

// The service model: a request's service time is log-normal with mean
// MeanService, drawn as a count of output tokens at this cost each.
const perOutputToken = time.Millisecond

// The tenants of the scenario, by index.
const (
	othersTenant = iota
	batchTenant
)

// scenario is the simulation of one band: the pool's slots are the band's
// gate, the band's request capacity its queue; the other tenants arrive
// open-loop in quiet and busy phases, and the dispatcher (tenant "batch")
// is driven by a window (see dispatcher).
func (cfg SimConfig) scenario() sim.Config {
	output := sim.Tokens{Mean: float64(cfg.MeanService) / float64(perOutputToken), Sigma: cfg.ServiceSigma}
	sc := sim.Config{
		Seed:     cfg.Seed,
		Duration: cfg.Duration,
		Horizon:  cfg.Duration,
		Controller: flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{
				{Priority: 0, RequestCapacity: capacity.Bounded(int64(cfg.QueueCapacity))},
			},
			// A full band rejects: the table measures what the headroom
			// signal saves a dispatcher in rejections. With fair admission
			// the dispatcher's requests would displace the other tenants'
			// instead; that trade is the fairness simulation's to show.
			NoDisplacement: true,
		},
		Pool: sim.PoolConfig{Servers: 1, Slots: cfg.Servers, PerOutputToken: perOutputToken},
		Tenants: []sim.Tenant{
			othersTenant: {
				Name:         "others",
				OutputTokens: output,
				Phases:       []sim.Phase{{Rate: cfg.QuietRate, For: cfg.MeanPhase}, {Rate: cfg.BusyRate, For: cfg.MeanPhase}},
				RandomPhases: true,
			},
			batchTenant: {Name: "batch", OutputTokens: output},
		},
	}
	if !cfg.RetryAfter {
		sc.RetryAfter = func(*sim.Sim, *flowcontrol.RejectionError) time.Duration { return 0 }
	}
	return sc
}

// simulateOne runs the scenario with dispatcher d.
func simulateOne(cfg SimConfig, d Dispatcher) (Result, error) {
	var wcfg window.Config
	switch d {
	case Fixed:
		n := cfg.FixedConcurrency
		wcfg = window.Config{Initial: n, Min: n, Max: n}
	default:
		wcfg = window.Config{TargetQueueDelay: cfg.TargetQueueDelay}
	}
	win, err := window.New(wcfg)
	if err != nil {
		return Result{}, err
	}
	s, err := sim.New(cfg.scenario())
	if err != nil {
		return Result{}, err
	}
	disp := &dispatcher{s: s, win: win, useHeadroom: d == AIMDHeadroom, latency: cfg.Latency}
	disp.send()
	recs := s.Run()

	res := Result{Dispatcher: d}
	ours := sim.Summarize(recs, func(r *sim.Record) bool { return r.Tenant == batchTenant && r.Served })
	res.Completed = ours.Served
	res.Goodput = float64(res.Completed) / cfg.Duration.Seconds()
	res.MeanQueue = sim.Mean(ours.QueueTimes)
	res.P95Queue = sim.Percentile(ours.QueueTimes, 95)
	// Rejections count at the router, also for requests whose retry had
	// not ended by the end of the run.
	for _, r := range recs {
		switch {
		case r.Tenant == batchTenant:
			res.Rejections += r.Drops[flowcontrol.OutcomeRejectedSaturated]
		case r.Done && r.Served:
			res.OthersServed++
		case r.Done:
			res.OthersRejected += r.Drops[flowcontrol.OutcomeRejectedSaturated]
		}
	}
	if d != Fixed {
		res.Decreases = win.State().Decreases
	}
	return res, nil
}

// dispatcher is the batch dispatcher: an endless backlog, sent as its
// window allows, one network latency away from the router. A rejected job
// is sent again before any new one.
type dispatcher struct {
	s             *sim.Sim
	win           *window.Window
	useHeadroom   bool
	latency       time.Duration
	retry         []*sim.Record
	reopenPending bool
}

// send starts backlog requests while the window allows, and schedules a
// wake-up for the end of a Retry-After closure.
func (d *dispatcher) send() {
	clock := d.s.Clock()
	now := clock.Now()
	for {
		t, ok := d.win.TryAcquire(now)
		if !ok {
			break
		}
		var r *sim.Record
		if len(d.retry) > 0 {
			r = d.retry[0]
			d.retry = d.retry[1:]
		} else {
			r = d.s.NewRecord(batchTenant)
		}
		clock.After(d.latency, func() {
			d.s.Send(r, func(resp sim.Response) { d.respond(r, t, resp) })
		})
	}
	if until := d.win.ClosedUntil(); until.After(now) && !d.reopenPending {
		d.reopenPending = true
		clock.At(until.Sub(clock.Epoch()), func() {
			d.reopenPending = false
			d.send()
		})
	}
}

// respond turns the router's response into the window's feedback, as the
// live dispatcher reads it from the response headers, and hands it to the
// window a latency later. A completed response carries the band's headroom
// sampled as it is written, while the request still holds its slot.
func (d *dispatcher) respond(r *sim.Record, t window.Ticket, resp sim.Response) {
	var fb window.Feedback
	switch {
	case resp.Served:
		fb = window.Feedback{Signal: window.Accepted, QueueDelay: resp.QueueTime, QueueDelayKnown: true}
		if d.useHeadroom {
			if n, ok := headroom.Sample(d.s.Controller(), headroom.Admitted(resp.Effective)); ok {
				fb.Headroom, fb.HeadroomKnown = n, true
			}
		}
	case resp.Rejection != nil && resp.Rejection.Outcome == flowcontrol.OutcomeRejectedSaturated:
		fb = window.Feedback{Signal: window.Saturated, RetryAfter: resp.RetryAfter}
	default:
		fb = window.Feedback{Signal: window.Failed}
	}
	clock := d.s.Clock()
	clock.After(d.latency, func() {
		d.win.Done(clock.Now(), t, fb)
		if resp.Served {
			d.s.End(r)
		} else {
			d.retry = append(d.retry, r)
		}
		d.send()
	})
}
