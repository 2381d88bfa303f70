// Command gateway runs a small LLM gateway built from Sluice, end to end on
// loopback: simulated vLLM-like model servers
// ([github.com/sluicegate/sluice/examples/modelserver]: OpenAI's API, a
// bounded batch, a bounded KV cache, vLLM's load metrics); in front of them
// an httputil.ReverseProxy behind flowhttp, with three priority bands —
// 10 interactive (slo-deadline), 0 standard (FCFS), −10 sheddable batch
// (FCFS) — and a gate; and a load generator offering about 1.5 times what
// the servers can do, in mixed streamed traffic: interactive chat
// completions with x-llm-d-slo-ttft-ms, standard and batch completions,
// and some for priority 5, which has no band and falls back to band 0.
//
// The gate (-gate) decides when the head of the bands may go on to a
// server. Each is built by package
// [github.com/sluicegate/sluice/flowcontrol/gate] from its own
// configuration type, which the gate's flags fill in:
//
//	saturation              the default: llm-d's utilization detector over the
//	                        servers' own metrics (waiting queue, KV-cache use),
//	                        read in process every 50ms, as a scraper of their
//	                        /metrics would read them; each server's queue is
//	                        kept under -queue-depth
//	concurrency             a budget of estimated tokens in flight (-token-budget)
//	saturation+concurrency  both
//	adaptive                a limit on requests in flight learnt from the time
//	                        to first token (-target-ttft), starting from the slots
//	maxinflight             as many requests as the servers have slots
//
// Two tenants of very different rates share the sheddable band: a heavy
// batch job and a light evaluation suite (x-llm-d-inference-fairness-id
// batch-etl and eval-suite). Every band schedules its flows by deficit round
// robin over each request's estimated tokens (flowhttp.EstimateTokens: the
// body's bytes / 4 plus max_tokens, which the gateway's classifier reads
// from the body), and a
// full band admits fairly: a request of a flow holding less than its share
// displaces the newest request of the flow holding the most. So the heavy
// tenant absorbs the band's overload, and the light one is served.
//
// Every second it prints each band's queue, capacity and headroom (and the
// headroom the clients last received), and for each tenant its requests,
// outcomes, 95th-percentile queue time and SLO attainment; under them, each
// server's waiting and running requests and KV-cache use, and the gate's
// view: what the gates publish (the saturation and the start budget, the
// adaptive limit) and the requests in flight, as the controller counts
// them. At the end, a summary of what each class of clients saw and the
// servers' peaks.
//
//	go run ./examples/gateway
//	go run ./examples/gateway -duration 30s -rate 80 -servers 3
//	go run ./examples/gateway -gate maxinflight
//	go run ./examples/gateway -fairness global-strict-fairness-policy -no-displacement  # one queue per band, as before
//
// With -listen it runs only the model servers and the gateway, until
// interrupted (or for -duration, if given), for curl, an OpenAI SDK or
// examples/dispatcher. It listens on loopback addresses only.
//
//	go run ./examples/gateway -listen 127.0.0.1:8080
//	curl -sS -D - -H 'x-llm-d-priority: 10' \
//	  -d '{"model":"sim","prompt":"hello world","max_tokens":8,"stream":true}' \
//	  http://127.0.0.1:8080/v1/completions
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

const (
	defaultDuration = 15 * time.Second
	// defaultKVCacheTokens is each model server's KV cache: four batch
	// requests of the mix fill it past the saturation gate's threshold.
	defaultKVCacheTokens = 8192
	// overload is the default offered load as a multiple of the servers'
	// capacity.
	overload = 1.5
	// shutdownGrace is how long admitted requests may take to finish once
	// the load stops, before they are cut.
	shutdownGrace = 3 * time.Second
	reportEvery   = time.Second
	// maxRate bounds -rate: far beyond what loopback servers can take, low
	// enough that the generator keeps up with its own clock.
	maxRate = 10000
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	var usage usageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

// usageError is a bad command line.
type usageError struct{ error }

// options are the command-line flags.
type options struct {
	duration    time.Duration
	durationSet bool
	rate        float64 // 0: overload × capacity
	servers     int
	concurrency int
	listen      string
	seed        uint64
	fairness    flowcontrol.Fairness
	noDisplace  bool

	// The gate: -gate names it, and each gate's flags fill its own
	// configuration, which package gate validates. parseFlags fills in
	// the demo's defaults, derived from the servers.
	gate          string                 // one of gateNames
	saturation    gate.SaturationConfig  // -queue-depth
	tokenBudget   gate.ConcurrencyConfig // in tokens mode; -token-budget
	adaptive      gate.AdaptiveConfig    // -target-ttft; from the servers' slots
	kvCacheTokens int                    // each model server's KV cache
}

func parseFlags(args []string, out io.Writer) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.DurationVar(&o.duration, "duration", defaultDuration, "how long to run (with -listen: until interrupted unless set)")
	fs.Float64Var(&o.rate, "rate", 0, "requests per second to offer (0: 1.5 × the servers' capacity)")
	fs.IntVar(&o.servers, "servers", 2, "simulated model servers")
	fs.IntVar(&o.concurrency, "concurrency", 4, "requests each model server works on at once")
	fs.StringVar(&o.listen, "listen", "", "run only the gateway and the servers, listening on this loopback `address`, e.g. 127.0.0.1:8080")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the traffic mix")
	fairness := fs.String("fairness", flowcontrol.DeficitRoundRobinFairnessName, "the bands' fairness policy: "+
		flowcontrol.GlobalStrictFairnessName+", "+flowcontrol.RoundRobinFairnessName+" or "+flowcontrol.DeficitRoundRobinFairnessName)
	fs.BoolVar(&o.noDisplace, "no-displacement", false, "turn fair admission off: a full band rejects, whatever the flow")
	fs.StringVar(&o.gate, "gate", gateSaturation, "the gateway's gate: "+strings.Join(gateNames, ", "))
	fs.IntVar(&o.saturation.QueueDepthThreshold, "queue-depth", 0, "saturation gate: the waiting-queue depth at which a model server is saturated, llm-d's queueDepthThreshold (0: half of -concurrency, at least 1)")
	fs.Int64Var(&o.tokenBudget.MaxTokenConcurrency, "token-budget", 0, "concurrency gate: estimated tokens in flight (0: the servers' KV caches, -servers × -kv-cache-tokens)")
	fs.IntVar(&o.kvCacheTokens, "kv-cache-tokens", defaultKVCacheTokens, "each model server's KV cache, in tokens")
	fs.DurationVar(&o.adaptive.TargetFirstToken, "target-ttft", 0, "adaptive gate: the time to first token, from dispatch, above which it backs off (0: the mix's mean service time)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, usageError{err}
	}
	var misplaced error
	fs.Visit(func(f *flag.Flag) {
		o.durationSet = o.durationSet || f.Name == "duration"
		if builtBy := gateFlags[f.Name]; builtBy != nil && !slices.Contains(builtBy, o.gate) && misplaced == nil {
			misplaced = fmt.Errorf("-%s configures -gate %s, not %s", f.Name, strings.Join(builtBy, " or "), o.gate)
		}
	})
	switch {
	case fs.NArg() > 0:
		return o, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	case o.duration <= 0:
		return o, usageError{fmt.Errorf("-duration %v: must be positive", o.duration)}
	case !(o.rate >= 0 && o.rate <= maxRate):
		// NaN and +Inf would stall the generator's clock.
		return o, usageError{fmt.Errorf("-rate %v: must be between 0 and %d", o.rate, maxRate)}
	case o.servers < 1 || o.servers > 64:
		return o, usageError{fmt.Errorf("-servers %d: must be between 1 and 64", o.servers)}
	case o.concurrency < 1 || o.concurrency > 256:
		return o, usageError{fmt.Errorf("-concurrency %d: must be between 1 and 256", o.concurrency)}
	case !slices.Contains(gateNames, o.gate):
		return o, usageError{fmt.Errorf("-gate %q: want one of %s", o.gate, strings.Join(gateNames, ", "))}
	case misplaced != nil:
		return o, usageError{misplaced}
	case o.kvCacheTokens < modelserver.DefaultMaxModelLen || o.kvCacheTokens > 1<<24:
		// Every request of the mix fits in the context of 4096 tokens.
		return o, usageError{fmt.Errorf("-kv-cache-tokens %d: must be between %d and %d", o.kvCacheTokens, modelserver.DefaultMaxModelLen, 1<<24)}
	}
	if o.saturation.QueueDepthThreshold == 0 {
		// llm-d's default, 5, suits servers of hundreds of slots; behind
		// a server of 4, five waiting requests hold an interactive one
		// for a whole service time, in the server's FCFS queue.
		o.saturation.QueueDepthThreshold = max(o.concurrency/2, 1)
	}
	o.tokenBudget.Mode = gate.ModeTokens
	if o.tokenBudget.MaxTokenConcurrency == 0 {
		o.tokenBudget.MaxTokenConcurrency = int64(o.servers * o.kvCacheTokens)
	}
	if o.adaptive.TargetFirstToken == 0 {
		o.adaptive.TargetFirstToken = meanServiceTime(modelConfig(o, 0))
	}
	// The adaptive gate starts from the fixed limit it replaces, the
	// servers' slots, and learns from there.
	o.adaptive.InitialLimit = o.servers * o.concurrency
	var err error
	if o.fairness, err = flowcontrol.FairnessByName(*fairness); err != nil {
		return o, usageError{fmt.Errorf("-fairness: %w", err)}
	}
	if o.listen != "" {
		addr, err := checkLoopback(o.listen)
		if err != nil {
			return o, usageError{err}
		}
		o.listen = addr
	}
	return o, nil
}

// run runs the demo with the command-line arguments args, writing to
// stdout, until it is done or ctx ends. Everything it starts has stopped
// when it returns.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	g, err := newGates(o)
	if err != nil {
		return err
	}
	addr := "127.0.0.1:0"
	if o.listen != "" {
		addr = o.listen
	}
	sys, err := startSystem(o, g, addr)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		sys.close(closeCtx)
	}()
	capacity := float64(sys.slots) / meanServiceTime(sys.models[0].Config()).Seconds()
	if o.listen != "" {
		return serveOnly(ctx, o, sys, stdout)
	}
	return runLoad(ctx, o, sys, capacity, stdout)
}

// runLoad runs the load generator against the gateway for o.duration,
// printing the table every second and the summary at the end.
func runLoad(ctx context.Context, o options, sys *system, capacity float64, stdout io.Writer) error {
	rate := o.rate
	if rate == 0 {
		rate = overload * capacity
	}
	fmt.Fprintf(stdout, "%d model servers × %d slots, %d KV-cache tokens on loopback, mean service %v: capacity about %.1f req/s\n",
		o.servers, o.concurrency, o.kvCacheTokens, meanServiceTime(sys.models[0].Config()).Round(time.Millisecond), capacity)
	fmt.Fprintf(stdout, "offering %.1f req/s (%.2f×) for %v:", rate, rate/capacity, o.duration)
	for i, c := range classes {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(stdout, "%s %.0f%% %s (priority %d)", sep, 100*c.share, c.name, c.priority)
	}
	fmt.Fprintln(stdout)
	printBands(stdout, o, sys)

	tr := &http.Transport{MaxIdleConnsPerHost: 512, DisableCompression: true}
	defer tr.CloseIdleConnections()
	gen := &generator{
		client: &http.Client{Transport: tr},
		url:    sys.gatewayURL,
		rate:   rate,
		rng:    rand.New(rand.NewPCG(o.seed, 0x5eed)),
		stats:  newClientStats(),
	}
	runCtx, stopRun := context.WithTimeout(ctx, o.duration)
	defer stopRun()
	reqCtx, cutRequests := context.WithCancel(ctx)
	defer cutRequests()
	generating := make(chan struct{})
	go func() {
		defer close(generating)
		gen.run(runCtx, reqCtx)
	}()

	start := time.Now()
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, tableHeader)
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	lastPrinted := time.Duration(0) // in whole seconds
	for runCtx.Err() == nil {
		select {
		case <-tick.C:
		case <-runCtx.Done():
		}
		// The last second is printed once, whether the tick or the end
		// of the run comes first.
		if now := time.Since(start).Round(time.Second); now > lastPrinted {
			printTable(stdout, now, sys.rows(), gen.stats, sys.status())
			lastPrinted = now
		}
	}
	<-generating
	elapsed := time.Since(start)

	// The load has stopped. Requests still queued are rejected
	// (rejected-shutting-down); admitted ones may finish within the grace.
	sys.fc.Close()
	finished := make(chan struct{})
	go func() {
		gen.wait()
		close(finished)
	}()
	grace := time.NewTimer(shutdownGrace)
	defer grace.Stop()
	select {
	case <-finished:
	case <-grace.C:
		cutRequests()
		<-finished
	}
	printSummary(stdout, elapsed, time.Since(start), gen.stats, capacity)
	printServers(stdout, sys)
	return nil
}

// printBands describes the gateway's gate and bands.
func printBands(w io.Writer, o options, sys *system) {
	fmt.Fprintf(w, "gate: %s\n", sys.gates.describe())
	fmt.Fprint(w, "gateway:")
	for _, b := range bands {
		fmt.Fprintf(w, " band %d %s (%s, capacity %d, TTL %v);", b.priority, b.name, b.policy.TypeName(), b.capacity, b.ttl)
	}
	fmt.Fprintf(w, " fallback band %d\n", fallbackPriority)
	admission := "fair admission (a full band displaces the newest request of the flow holding the most)"
	if o.noDisplace {
		admission = "no displacement (a full band rejects)"
	}
	fmt.Fprintf(w, "every band: flows by x-llm-d-inference-fairness-id, %s, cost = estimated tokens; %s\n", o.fairness.TypeName(), admission)
}

// serveOnly runs the gateway and the servers without load until ctx ends
// (or for o.duration, if set), printing the table in each second something
// changed.
func serveOnly(ctx context.Context, o options, sys *system, stdout io.Writer) error {
	if o.durationSet {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	fmt.Fprintf(stdout, "gateway listening on %s with %d model servers × %d slots\n", sys.gatewayURL, o.servers, o.concurrency)
	printBands(stdout, o, sys)
	fmt.Fprintf(stdout, "try: curl -sS -D - -H '%s: 10' -H '%s: 500' -d '{\"model\":\"sim\",\"prompt\":\"hello world\",\"max_tokens\":8}' %s/v1/completions\n",
		priorityHeader, sloHeader, sys.gatewayURL)

	start := time.Now()
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	last, header := sys.rows(), false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		rows := sys.rows()
		if !changed(last, rows) {
			continue
		}
		if !header {
			fmt.Fprintln(stdout, tableHeader)
			header = true
		}
		printTable(stdout, time.Since(start), rows, nil, sys.status())
		last = rows
	}
}

// changed reports whether anything moved from a to b, or anything waits.
func changed(a, b []bandRow) bool {
	for i := range a {
		if b[i].queued > 0 || a[i].headroom != b[i].headroom || !slices.Equal(a[i].flows, b[i].flows) {
			return true
		}
	}
	return false
}
