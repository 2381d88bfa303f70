package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

const (
	// scrapeEvery is how often the scraper reads the model servers' load.
	scrapeEvery = 50 * time.Millisecond
	// noEndpointsTTL bounds a request's wait while the saturation gate
	// knows no model server.
	noEndpointsTTL = time.Second
	// modelName is the model the servers serve.
	modelName = "sim"
)

// gateView is the gateway's gate and what the table shows of it.
type gateView struct {
	name        string
	gate        gate.Gate
	saturation  *gate.SaturationGate // nil unless the gate has one
	tokens      *tokenMeter          // nil unless the gate has a token budget
	tokenBudget int64
	adaptive    *gate.AdaptiveGate // nil unless the gate is one
	target      time.Duration      // the adaptive gate's TargetFirstToken
	maxInFlight int
	fc          *flowcontrol.FlowController // set once the controller exists
}

// newGate builds the gate o.gate names.
func newGate(o options) (*gateView, error) {
	v := &gateView{name: o.gate}
	var gates []gate.Gate
	if o.gate == gateSaturation || o.gate == gateSaturationConcurrency {
		sat, err := gate.Saturation(gate.SaturationConfig{QueueDepthThreshold: o.queueDepth})
		if err != nil {
			return nil, err
		}
		v.saturation = sat
		gates = append(gates, sat)
	}
	if o.gate == gateConcurrency || o.gate == gateSaturationConcurrency {
		v.tokenBudget = o.tokenBudget
		if v.tokenBudget == 0 {
			v.tokenBudget = int64(o.servers * o.kvCacheTokens)
		}
		budget, err := gate.Concurrency(gate.ConcurrencyConfig{Mode: gate.ModeTokens, MaxTokenConcurrency: v.tokenBudget})
		if err != nil {
			return nil, err
		}
		v.tokens = &tokenMeter{ConcurrencyGate: budget}
		gates = append(gates, v.tokens)
	}
	switch {
	case o.gate == gateAdaptive:
		// It starts from the fixed limit it replaces, the servers' slots,
		// and learns from there.
		v.target = o.targetTTFT
		if v.target == 0 {
			v.target = meanServiceTime(modelConfig(o, 0))
		}
		adaptive, err := gate.Adaptive(gate.AdaptiveConfig{TargetFirstToken: v.target, InitialLimit: o.servers * o.concurrency})
		if err != nil {
			return nil, err
		}
		v.adaptive, v.gate = adaptive, adaptive
	case o.gate == gateMaxInFlight:
		v.maxInFlight = o.servers * o.concurrency
		v.gate = gate.MaxInFlight(v.maxInFlight)
	case len(gates) == 1:
		v.gate = gates[0]
	default:
		v.gate = gate.All(gates...)
	}
	return v, nil
}

// describe says what the gate does, for the demo's header.
func (v *gateView) describe(o options) string {
	var parts []string
	if v.saturation != nil {
		parts = append(parts, fmt.Sprintf("saturation (llm-d's utilization detector: each server's queue under %d, KV cache under %.0f%%; metrics read every %v, stale after %v)",
			o.queueDepth, 100*gate.DefaultKVCacheUtilThreshold, scrapeEvery, gate.DefaultMetricsStalenessThreshold))
	}
	if v.tokens != nil {
		parts = append(parts, fmt.Sprintf("concurrency (a budget of %d estimated tokens in flight)", v.tokenBudget))
	}
	if v.adaptive != nil {
		parts = append(parts, fmt.Sprintf("adaptive (a limit on requests in flight from %d, the servers' slots, learnt from the time to first token: above %v it backs off, within %v it grows)",
			v.adaptive.Limit(), v.target.Round(time.Millisecond), (v.target/2).Round(time.Millisecond)))
	}
	if v.maxInFlight > 0 {
		parts = append(parts, fmt.Sprintf("MaxInFlight(%d), the servers' slots", v.maxInFlight))
	}
	return strings.Join(parts, " AND ")
}

// status is the gate's view now, for the table.
func (v *gateView) status() string {
	var parts []string
	if v.saturation != nil {
		st := v.saturation.Status()
		parts = append(parts, fmt.Sprintf("saturation %.0f%%, %d of %d servers saturated, budget %d",
			100*v.saturation.Saturation(), st.Saturated, st.Endpoints, st.Budget))
	}
	if v.tokens != nil {
		parts = append(parts, fmt.Sprintf("tokens in flight %d of %d", v.tokens.cost.Load(), v.tokenBudget))
	}
	if v.adaptive != nil && v.fc != nil {
		parts = append(parts, fmt.Sprintf("in flight %d, limit %d", v.fc.InFlight(), v.adaptive.Limit()))
	}
	if v.maxInFlight > 0 && v.fc != nil {
		parts = append(parts, fmt.Sprintf("in flight %d of %d", v.fc.InFlight(), v.maxInFlight))
	}
	return strings.Join(parts, "; ")
}

// tokenMeter is the token budget, counting its cost in flight where the
// table may read it: the budget's own counts are guarded by the
// controller's lock.
type tokenMeter struct {
	*gate.ConcurrencyGate
	cost atomic.Int64
}

func (m *tokenMeter) Took(s gate.Slot) {
	m.ConcurrencyGate.Took(s)
	m.cost.Add(s.Cost)
}

func (m *tokenMeter) Returned(u gate.Usage) {
	m.ConcurrencyGate.Returned(u)
	m.cost.Add(-u.Cost)
}

// scraper reads every model server's load every scrapeEvery, in process,
// as a scraper of their /metrics pages would read vllm:num_requests_waiting,
// vllm:num_requests_running and vllm:kv_cache_usage_perc; it feeds the
// saturation gate, if there is one, and keeps the peaks for the summary. A
// server that is down is not read, so its metrics go stale and the gate
// counts it saturated.
type scraper struct {
	models     []*modelserver.Server
	saturation *gate.SaturationGate // nil: no gate to feed
	done       chan struct{}
	stopOnce   sync.Once
	running    sync.WaitGroup

	mu    sync.Mutex
	peaks modelserver.Load // the highest of each figure of any server
}

// startScraper reads the servers once, then every scrapeEvery until stop.
func startScraper(models []*modelserver.Server, sat *gate.SaturationGate) *scraper {
	sc := &scraper{models: models, saturation: sat, done: make(chan struct{})}
	sc.scrape()
	sc.running.Go(func() {
		tick := time.NewTicker(scrapeEvery)
		defer tick.Stop()
		for {
			select {
			case <-sc.done:
				return
			case <-tick.C:
				sc.scrape()
			}
		}
	})
	return sc
}

func (sc *scraper) scrape() {
	for _, m := range sc.models {
		l := m.Load()
		sc.mu.Lock()
		sc.peaks.Waiting = max(sc.peaks.Waiting, l.Waiting)
		sc.peaks.Running = max(sc.peaks.Running, l.Running)
		sc.peaks.KVCacheUsage = max(sc.peaks.KVCacheUsage, l.KVCacheUsage)
		sc.mu.Unlock()
		if l.Down || sc.saturation == nil {
			continue
		}
		sc.saturation.Update(m.Config().Name, gate.Metrics{Waiting: l.Waiting, Running: l.Running, KVCache: l.KVCacheUsage})
	}
}

// peak returns the highest waiting, running and KV-cache figures any
// server reported so far.
func (sc *scraper) peak() modelserver.Load {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.peaks
}

// stop stops the scraper and waits for it.
func (sc *scraper) stop() {
	sc.stopOnce.Do(func() { close(sc.done) })
	sc.running.Wait()
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
