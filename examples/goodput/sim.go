package main

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"text/tabwriter"
	"time"

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
	// token) then a decode, both log-normal with the given means.
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

// request is one generated request; the same list feeds every policy.
type request struct {
	class            int
	received         time.Duration
	prefill, service time.Duration
}

// Simulate runs each policy of Policies on the same generated workload.
func Simulate(cfg Config) ([]Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	reqs := generate(cfg)
	var results []Result
	for _, p := range Policies() {
		r, err := run(cfg, p, reqs)
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
	return nil
}

// logNormal draws log-normal durations of the given mean with shape sigma,
// rounded to the microsecond. The explicit conversion keeps the compiler from
// fusing the multiply-add, and the rounding absorbs the last-bit differences
// of math.Exp between platforms, so a seed prints the same table everywhere.
func logNormal(rng *rand.Rand, mean time.Duration, sigma float64) time.Duration {
	mu := math.Log(float64(mean)) - float64(sigma*sigma)/2
	d := time.Duration(math.Exp(mu + float64(sigma*rng.NormFloat64())))
	return d.Round(time.Microsecond)
}

// generate draws the workload: Poisson arrivals at Overload times the pool's
// service rate, each with a class, a prefill and a decode time.
func generate(cfg Config) []request {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x600d))
	var total float64
	for _, c := range cfg.Classes {
		total += c.Share
	}
	meanService := cfg.MeanPrefill + cfg.MeanDecode
	rate := cfg.Overload * float64(cfg.Servers) / meanService.Seconds() // requests per second
	var reqs []request
	var t time.Duration
	for {
		t += time.Duration(rng.ExpFloat64() / rate * float64(time.Second)).Round(time.Microsecond)
		if t >= cfg.Duration {
			return reqs
		}
		pick := rng.Float64() * total
		class := len(cfg.Classes) - 1
		for i, c := range cfg.Classes {
			if pick < c.Share {
				class = i
				break
			}
			pick -= c.Share
		}
		prefill := logNormal(rng, cfg.MeanPrefill, 0.5)
		decode := logNormal(rng, cfg.MeanDecode, 0.5)
		reqs = append(reqs, request{class: class, received: t, prefill: prefill, service: prefill + decode})
	}
}

type eventKind int

const (
	evArrive eventKind = iota
	evFree             // a server finishes its request
	evExpire           // a request reaches its TTL
)

type event struct {
	at   time.Duration
	seq  uint64
	kind eventKind
	req  int // index into the workload
}

type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// run simulates the server pool with one band queue ordered by p.
func run(cfg Config, p ordering.Policy, reqs []request) (Result, error) {
	q, err := ordering.NewQueue(ordering.DefaultQueueKind(p), p)
	if err != nil {
		return Result{}, err
	}
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// Requests of a class share one read-only header map.
	headers := make([]http.Header, len(cfg.Classes))
	for i, c := range cfg.Classes {
		headers[i] = http.Header{}
		if c.SLO > 0 {
			headers[i].Set(ordering.SLOTTFTHeader, strconv.FormatInt(c.SLO.Milliseconds(), 10))
		}
	}

	res := Result{Policy: p.TypeName(), Requests: len(reqs), PerClass: map[string]ClassResult{}}
	items := make([]ordering.Item, len(reqs))
	var evs events
	var seq uint64
	schedule := func(at time.Duration, kind eventKind, req int) {
		heap.Push(&evs, event{at: at, seq: seq, kind: kind, req: req})
		seq++
	}
	for i, r := range reqs {
		schedule(r.received, evArrive, i)
	}
	// record books the outcome of request i; wait is its queue wait and
	// ttft its time to first token (negative: never got one).
	record := func(i int, wait, ttft time.Duration) {
		c := cfg.Classes[reqs[i].class]
		cr := res.PerClass[c.Name]
		cr.Requests++
		good := ttft >= 0
		if c.SLO > 0 {
			res.WithSLO++
			good = good && ttft <= c.SLO
			if good {
				res.MetSLO++
			}
		} else {
			res.NoSLOWorstWait = max(res.NoSLOWorstWait, wait)
		}
		if good {
			cr.Good++
			res.Goodput++
		}
		res.PerClass[c.Name] = cr
	}
	idle := cfg.Servers
	var lastDone time.Duration
	start := func(now time.Duration) {
		for idle > 0 {
			it := q.PopHead()
			if it == nil {
				return
			}
			i := it.Value.(int)
			r := reqs[i]
			idle--
			wait := now - r.received
			record(i, wait, wait+r.prefill)
			schedule(now+r.service, evFree, -1)
		}
	}
	for evs.Len() > 0 {
		e := heap.Pop(&evs).(event)
		switch e.kind {
		case evArrive:
			r := reqs[e.req]
			ttl := cfg.BandTTL
			if own := cfg.Classes[r.class].TTL; own > 0 {
				ttl = min(ttl, own)
			}
			at := epoch.Add(e.at)
			items[e.req] = ordering.Item{
				ReceivedTime: at,
				EnqueueTime:  at,
				Header:       headers[r.class],
				TTL:          ttl,
				Value:        e.req,
			}
			q.Add(&items[e.req])
			schedule(e.at+ttl, evExpire, e.req)
		case evExpire:
			if q.Remove(&items[e.req]) {
				res.Expired++
				record(e.req, e.at-reqs[e.req].received, -1)
			}
		case evFree:
			idle++
			lastDone = e.at
		}
		start(e.at)
	}
	if lastDone > 0 {
		res.Goodput /= lastDone.Seconds()
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
