package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// The gates -gate selects.
const (
	gateSaturation            = "saturation"             // the servers' own metrics (default)
	gateConcurrency           = "concurrency"            // a budget of estimated tokens in flight
	gateSaturationConcurrency = "saturation+concurrency" // both
	gateAdaptive              = "adaptive"               // a limit learnt from the time to first token
	gateMaxInFlight           = "maxinflight"            // as many requests as the servers have slots
)

var gateNames = []string{gateSaturation, gateConcurrency, gateSaturationConcurrency, gateAdaptive, gateMaxInFlight}

// gateFlags are the flags that configure one gate, and the -gate values
// that build it: a flag for a gate that is not built is a usage error,
// not a setting silently ignored.
var gateFlags = map[string][]string{
	"queue-depth":  {gateSaturation, gateSaturationConcurrency},
	"token-budget": {gateConcurrency, gateSaturationConcurrency},
	"target-ttft":  {gateAdaptive},
}

const (
	// scrapeEvery is how often the model servers' load is read.
	scrapeEvery = 50 * time.Millisecond
	// noEndpointsTTL bounds a request's wait while the saturation gate
	// knows no model server.
	noEndpointsTTL = time.Second
	// modelName is the model the servers serve.
	modelName = "sim"
)

// gates is the gateway's gate, built by package gate from the
// configurations in options, and the gates in it whose published state
// the table reads.
type gates struct {
	o           options               // the configurations they were built from
	gate        gate.Gate             // for flowcontrol.Config.Gate
	saturation  *gate.SaturationGate  // nil unless -gate has one; fed by readServers
	concurrency *gate.ConcurrencyGate // nil unless -gate has one
	adaptive    *gate.AdaptiveGate    // nil unless -gate is adaptive
	maxInFlight int                   // the limit of -gate maxinflight; 0 otherwise
}

// newGates builds the gate o.gate names. A configuration a gate refuses
// came from the flags, so the error is a usage error.
func newGates(o options) (*gates, error) {
	g := &gates{o: o}
	var all []gate.Gate
	if o.gate == gateSaturation || o.gate == gateSaturationConcurrency {
		sat, err := gate.Saturation(o.saturation)
		if err != nil {
			return nil, usageError{fmt.Errorf("-gate %s: %w", o.gate, err)}
		}
		g.saturation = sat
		all = append(all, sat)
	}
	if o.gate == gateConcurrency || o.gate == gateSaturationConcurrency {
		budget, err := gate.Concurrency(o.tokenBudget)
		if err != nil {
			return nil, usageError{fmt.Errorf("-gate %s: %w", o.gate, err)}
		}
		g.concurrency = budget
		all = append(all, budget)
	}
	switch {
	case o.gate == gateAdaptive:
		adaptive, err := gate.Adaptive(o.adaptive)
		if err != nil {
			return nil, usageError{fmt.Errorf("-gate %s: %w", o.gate, err)}
		}
		g.adaptive, g.gate = adaptive, adaptive
	case o.gate == gateMaxInFlight:
		g.maxInFlight = o.servers * o.concurrency
		g.gate = gate.MaxInFlight(g.maxInFlight)
	case len(all) == 1:
		g.gate = all[0]
	default:
		g.gate = gate.All(all...)
	}
	return g, nil
}

// describe says what the gate does, for the demo's header.
func (g *gates) describe() string {
	o := g.o
	var parts []string
	if g.saturation != nil {
		parts = append(parts, fmt.Sprintf("saturation (llm-d's utilization detector: each server's queue under %d, KV cache under %.0f%%; metrics read every %v, stale after %v)",
			o.saturation.QueueDepthThreshold, 100*gate.DefaultKVCacheUtilThreshold, scrapeEvery, gate.DefaultMetricsStalenessThreshold))
	}
	if g.concurrency != nil {
		parts = append(parts, fmt.Sprintf("concurrency (a budget of %d estimated tokens in flight)", o.tokenBudget.MaxTokenConcurrency))
	}
	if g.adaptive != nil {
		target := o.adaptive.TargetFirstToken
		parts = append(parts, fmt.Sprintf("adaptive (a limit on requests in flight from %d, the servers' slots, learnt from the time to first token: above %v it backs off, within %v it grows)",
			o.adaptive.InitialLimit, target.Round(time.Millisecond), (target/2).Round(time.Millisecond)))
	}
	if g.maxInFlight > 0 {
		parts = append(parts, fmt.Sprintf("MaxInFlight(%d), the servers' slots", g.maxInFlight))
	}
	return strings.Join(parts, " AND ")
}

// status is the gate's view now, for the table. It reads only what may be
// read while the controller runs: what the saturation and adaptive gates
// publish, and the controller's count of requests in flight. The
// concurrency gate's own counts are guarded by the controller's lock, so
// its line shows the requests in flight beside its budget.
func (g *gates) status(fc *flowcontrol.FlowController) string {
	var parts []string
	if g.saturation != nil {
		st := g.saturation.Status()
		parts = append(parts, fmt.Sprintf("saturation %.0f%%, %d of %d servers saturated, budget %d",
			100*g.saturation.DetectorSaturation(), st.Saturated, st.Endpoints, st.Budget))
	}
	if g.concurrency != nil {
		parts = append(parts, fmt.Sprintf("requests in flight %d, token budget %d", fc.InFlight(), g.o.tokenBudget.MaxTokenConcurrency))
	}
	if g.adaptive != nil {
		parts = append(parts, fmt.Sprintf("in flight %d, limit %d", fc.InFlight(), g.adaptive.Limit()))
	}
	if g.maxInFlight > 0 {
		parts = append(parts, fmt.Sprintf("in flight %d of %d", fc.InFlight(), g.maxInFlight))
	}
	return strings.Join(parts, "; ")
}

// serverReader reads every model server's load every scrapeEvery and feeds
// it to the saturation gate, if there is one; it keeps the peaks for the
// summary. A server that is down is not read, so its metrics go stale and
// the gate counts it saturated.
//
// It reads the servers' state in process, not their /metrics pages: the
// product's scraper (examples/deploy/vllm) parses those with Prometheus's
// expfmt, a dependency the root module does not take, and lives in a
// nested module this one cannot import. The servers are simulations
// running in this process, and [modelserver.Server.Load] returns the very
// numbers their /metrics pages show.
type serverReader struct {
	models     []*modelserver.Server
	saturation *gate.SaturationGate // nil: no gate to feed
	stop       context.CancelFunc
	running    sync.WaitGroup

	mu    sync.Mutex
	peaks modelserver.Load // the highest of each figure of any server
}

// readServers reads the servers once, then every scrapeEvery until its
// stop is called.
func readServers(models []*modelserver.Server, sat *gate.SaturationGate) *serverReader {
	ctx, stop := context.WithCancel(context.Background())
	r := &serverReader{models: models, saturation: sat, stop: stop}
	r.read()
	r.running.Go(func() {
		tick := time.NewTicker(scrapeEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				r.read()
			}
		}
	})
	return r
}

func (r *serverReader) read() {
	for _, m := range r.models {
		l := m.Load()
		r.mu.Lock()
		r.peaks.Waiting = max(r.peaks.Waiting, l.Waiting)
		r.peaks.Running = max(r.peaks.Running, l.Running)
		r.peaks.KVCacheUsage = max(r.peaks.KVCacheUsage, l.KVCacheUsage)
		r.mu.Unlock()
		if !l.Down && r.saturation != nil {
			r.saturation.Update(m.Config().Name, gate.Metrics{Waiting: l.Waiting, Running: l.Running, KVCache: l.KVCacheUsage})
		}
	}
}

// peak returns the highest waiting, running and KV-cache figures any
// server reported so far.
func (r *serverReader) peak() modelserver.Load {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peaks
}

// close stops the reads and waits for them.
func (r *serverReader) close() {
	r.stop()
	r.running.Wait()
}

// serversLine is the model servers' load now, one figure per server.
func serversLine(models []*modelserver.Server) string {
	var waiting, running, kv []string
	for _, m := range models {
		l := m.Load()
		waiting = append(waiting, strconv.Itoa(l.Waiting))
		running = append(running, strconv.Itoa(l.Running))
		kv = append(kv, strconv.FormatFloat(100*l.KVCacheUsage, 'f', 0, 64)+"%")
	}
	return "waiting " + strings.Join(waiting, " ") + ", running " + strings.Join(running, " ") + ", KV cache " + strings.Join(kv, " ")
}
