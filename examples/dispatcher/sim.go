package main

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sluicegate/sluice/examples/dispatcher/window"
)

// SimConfig describes one band of a router, the other tenants that share it
// and the dispatcher under test. All times are virtual.
type SimConfig struct {
	// Seed seeds every random draw; Duration is the simulated time.
	Seed     uint64
	Duration time.Duration

	// The band: Servers requests run at once (the router's gate), each for a
	// log-normal service time of mean MeanService; up to QueueCapacity more
	// wait in the band's FIFO queue. An arrival that finds the queue full is
	// rejected as rejected-saturated, with a Retry-After when RetryAfter is
	// set (see retryAfter).
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
	others := otherTraffic(cfg)
	var results []Result
	for _, d := range []Dispatcher{Fixed, AIMD, AIMDHeadroom} {
		r, err := simulateOne(cfg, d, others)
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

// simRequest is one request in the band.
type simRequest struct {
	ours      bool
	job       int // ours: backlog job number
	ticket    window.Ticket
	arrived   time.Duration // at the router
	service   time.Duration
	queueTime time.Duration // from arrival to the start of service
}

type eventKind int

const (
	evOtherArrive eventKind = iota // an other tenant's request reaches the router
	evOurArrive                    // a dispatcher request reaches the router
	evServiceDone                  // a request finishes; the response headers are written
	evOurResponse                  // a response reaches the dispatcher
	evReopen                       // a Retry-After closure ends
)

type event struct {
	at   time.Duration
	seq  uint64 // ties go in scheduling order, so runs are deterministic
	kind eventKind
	req  simRequest
	fb   window.Feedback
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// serviceTimes draws log-normal service times of the configured mean.
type serviceTimes struct {
	rng   *rand.Rand
	mu    float64
	sigma float64
}

func newServiceTimes(cfg SimConfig, stream uint64) serviceTimes {
	sigma := cfg.ServiceSigma
	return serviceTimes{
		rng:   rand.New(rand.NewPCG(cfg.Seed, stream)),
		mu:    math.Log(float64(cfg.MeanService)) - float64(sigma*sigma)/2,
		sigma: sigma,
	}
}

// next draws a service time, rounded to the microsecond. The explicit
// conversion keeps the compiler from fusing the multiply-add, and the
// rounding absorbs the last-bit differences of math.Exp between platforms,
// so a seed prints the same table everywhere.
func (s serviceTimes) next() time.Duration {
	d := time.Duration(math.Exp(s.mu + float64(s.sigma*s.rng.NormFloat64())))
	return d.Round(time.Microsecond)
}

// exponential draws an exponential duration of the given rate (per second),
// rounded to the microsecond.
func exponential(rng *rand.Rand, rate float64) time.Duration {
	return time.Duration(rng.ExpFloat64() / rate * float64(time.Second)).Round(time.Microsecond)
}

// otherTraffic draws the other tenants' requests for the whole run, once, so
// every dispatcher faces the same ones.
func otherTraffic(cfg SimConfig) []simRequest {
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	service := newServiceTimes(cfg, 2)
	var reqs []simRequest
	busy := false
	var t time.Duration
	for t < cfg.Duration {
		end := t + exponential(rng, 1/cfg.MeanPhase.Seconds())
		rate := cfg.QuietRate
		if busy {
			rate = cfg.BusyRate
		}
		if rate > 0 {
			for {
				t += exponential(rng, rate)
				if t >= end || t >= cfg.Duration {
					break
				}
				reqs = append(reqs, simRequest{arrived: t, service: service.next()})
			}
		}
		t = end
		busy = !busy
	}
	return reqs
}

// bandSim is one run: the band, the other tenants, one dispatcher.
type bandSim struct {
	cfg    SimConfig
	epoch  time.Time // virtual time t is epoch.Add(t) for the window
	now    time.Duration
	events eventQueue
	seq    uint64

	// The band.
	queue      []simRequest // FIFO; head at index 0
	busy       int
	recentDone []time.Duration // completion times within rateWindow, for Retry-After
	anyDone    bool

	// The dispatcher.
	win           *window.Window
	useHeadroom   bool
	nextJob       int
	retry         []int // rejected jobs, resent first
	ourService    []time.Duration
	ourDraw       serviceTimes
	reopenPending bool

	res    Result
	queued []time.Duration
}

func simulateOne(cfg SimConfig, d Dispatcher, others []simRequest) (Result, error) {
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
	s := &bandSim{
		cfg:         cfg,
		epoch:       time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		win:         win,
		useHeadroom: d == AIMDHeadroom,
		ourDraw:     newServiceTimes(cfg, 3),
		res:         Result{Dispatcher: d},
	}
	for _, r := range others {
		s.schedule(r.arrived, event{kind: evOtherArrive, req: r})
	}
	s.send()
	for s.events.Len() > 0 {
		e := heap.Pop(&s.events).(event)
		if e.at > cfg.Duration {
			break
		}
		s.now = e.at
		s.handle(e)
	}
	s.res.Goodput = float64(s.res.Completed) / cfg.Duration.Seconds()
	if n := len(s.queued); n > 0 {
		var sum time.Duration
		for _, q := range s.queued {
			sum += q
		}
		s.res.MeanQueue = sum / time.Duration(n)
		slices.Sort(s.queued)
		s.res.P95Queue = s.queued[(n*95+99)/100-1]
	}
	if d != Fixed {
		s.res.Decreases = win.State().Decreases
	}
	return s.res, nil
}

func (s *bandSim) schedule(at time.Duration, e event) {
	e.at = at
	e.seq = s.seq
	s.seq++
	heap.Push(&s.events, e)
}

func (s *bandSim) handle(e event) {
	switch e.kind {
	case evOtherArrive, evOurArrive:
		s.arrive(e.req)
	case evServiceDone:
		s.complete(e.req)
	case evOurResponse:
		s.respond(e.req, e.fb)
	case evReopen:
		s.reopenPending = false
		s.send()
	}
}

// arrive admits r into the band or rejects it for capacity: a request that
// finds a free slot starts at once, one that must wait is rejected if the
// queue already holds QueueCapacity.
func (s *bandSim) arrive(r simRequest) {
	if s.busy >= s.cfg.Servers && len(s.queue) >= s.cfg.QueueCapacity {
		if !r.ours {
			s.res.OthersRejected++
			return
		}
		s.res.Rejections++
		fb := window.Feedback{Signal: window.Saturated}
		if s.cfg.RetryAfter {
			fb.RetryAfter = s.retryAfter()
		}
		s.schedule(s.now+s.cfg.Latency, event{kind: evOurResponse, req: r, fb: fb})
		return
	}
	r.arrived = s.now
	s.queue = append(s.queue, r)
	s.dispatch()
}

// dispatch starts queued requests while a slot is free.
func (s *bandSim) dispatch() {
	for s.busy < s.cfg.Servers && len(s.queue) > 0 {
		r := s.queue[0]
		s.queue = s.queue[1:]
		s.busy++
		r.queueTime = s.now - r.arrived
		s.schedule(s.now+r.service, event{kind: evServiceDone, req: r})
	}
}

// complete ends r's service. Like a gateway that stamps headers as the
// response passes, it samples the band while r still holds its slot, then
// frees the slot.
func (s *bandSim) complete(r simRequest) {
	s.forgetOldCompletions()
	s.recentDone = append(s.recentDone, s.now)
	s.anyDone = true
	if r.ours {
		headroom := max(s.cfg.QueueCapacity-len(s.queue), 0)
		fb := window.Feedback{Signal: window.Accepted, QueueDelay: r.queueTime, QueueDelayKnown: true}
		if s.useHeadroom {
			fb.Headroom, fb.HeadroomKnown = uint64(headroom), true
		}
		s.schedule(s.now+s.cfg.Latency, event{kind: evOurResponse, req: r, fb: fb})
	} else {
		s.res.OthersServed++
	}
	s.busy--
	s.dispatch()
}

// respond hands a response to the dispatcher.
func (s *bandSim) respond(r simRequest, fb window.Feedback) {
	s.win.Done(s.epoch.Add(s.now), r.ticket, fb)
	if fb.Signal == window.Accepted {
		s.res.Completed++
		s.queued = append(s.queued, r.queueTime)
	} else {
		s.retry = append(s.retry, r.job)
	}
	s.send()
}

// send starts backlog requests while the window allows, and schedules a
// wake-up for the end of a Retry-After closure.
func (s *bandSim) send() {
	now := s.epoch.Add(s.now)
	for {
		t, ok := s.win.TryAcquire(now)
		if !ok {
			break
		}
		r := simRequest{ours: true, ticket: t}
		if n := len(s.retry); n > 0 {
			r.job = s.retry[0]
			s.retry = s.retry[1:]
		} else {
			r.job = s.nextJob
			s.nextJob++
			s.ourService = append(s.ourService, s.ourDraw.next())
		}
		r.service = s.ourService[r.job]
		s.schedule(s.now+s.cfg.Latency, event{kind: evOurArrive, req: r})
	}
	if until := s.win.ClosedUntil(); until.After(now) && !s.reopenPending {
		s.reopenPending = true
		s.schedule(until.Sub(s.epoch), event{kind: evReopen})
	}
}

// rateWindow is the span over which the band measures its completion rate.
const rateWindow = 5 * time.Second

// retryAfter models the Retry-After flowcontrol projects on a capacity
// rejection: the time the band needs to work off its queue at its measured
// rate (here, completions over the last rateWindow), in whole seconds rounded
// up, between 1 and 30; none before anything has completed.
func (s *bandSim) retryAfter() time.Duration {
	s.forgetOldCompletions()
	if !s.anyDone {
		return 0
	}
	rate := float64(len(s.recentDone)) / rateWindow.Seconds()
	if rate == 0 {
		return 30 * time.Second
	}
	secs := math.Ceil(float64(len(s.queue)) / rate)
	return time.Duration(min(max(secs, 1), 30)) * time.Second
}

func (s *bandSim) forgetOldCompletions() {
	i := 0
	for i < len(s.recentDone) && s.recentDone[i] <= s.now-rateWindow {
		i++
	}
	s.recentDone = s.recentDone[i:]
}
