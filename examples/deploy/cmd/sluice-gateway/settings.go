package main

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/gate"
	"github.com/sluicegate/sluice/ordering"
)

// settings is what the gateway runs: the configuration file (or the
// defaults) with the flags applied.
type settings struct {
	// file is the parsed file; its Gateway, Flow and Gate sections are
	// overridden by the fields below.
	file *config.File
	// listen is -listen, else gateway.listen.
	listen string
	// backends are the -backend URLs, then the file's, without duplicates.
	backends []*url.URL
	// grace is -grace-period, else gateway.gracePeriod.
	grace time.Duration
	// gate is -max-inflight, else the file's gate, else the default
	// saturation gate.
	gate config.Gate
	// flow is the controller's configuration without Gate and Observer:
	// the file's, plus a band for each priority the classifier can give
	// that llm-d-router's form would provision on first sight.
	flow flowcontrol.Config
}

// defaultFile is the configuration without -config: one band of priority
// 0 with llm-d-router's defaults (5000 requests, 1 GB, a 60 s queue-wait
// TTL), so that the headroom header has a capacity to count from.
func defaultFile() *config.File {
	f, err := config.Parse(nil)
	if err != nil {
		panic("sluice-gateway: the empty configuration does not parse: " + err.Error())
	}
	f.Flow.Bands = []flowcontrol.BandConfig{{
		Priority:        0,
		RequestCapacity: capacity.Bounded(config.LLMDDefaultBandMaxRequests),
		ByteCapacity:    capacity.Bounded(config.LLMDDefaultBandMaxBytes),
	}}
	f.Flow.DefaultTTL = config.LLMDDefaultRequestTTL
	return f
}

// load reads the -config file, or takes the defaults, and applies the
// flags. Errors name the file and the line, or the flag.
func load(o options) (*settings, error) {
	f := defaultFile()
	if o.configPath != "" {
		var err error
		if f, err = config.Load(o.configPath); err != nil {
			return nil, err
		}
	}
	s := &settings{file: f, listen: f.Gateway.Listen, grace: f.Gateway.GracePeriod, gate: f.Gate, flow: f.Flow}
	s.flow.Bands = slices.Clone(f.Flow.Bands)
	if o.listen != "" {
		s.listen = o.listen
	}
	if o.gracePeriod != nil {
		s.grace = *o.gracePeriod
	}
	seen := map[string]bool{}
	for _, u := range append(slices.Clone(o.backends), f.Gateway.Backends...) {
		if !seen[u.String()] {
			seen[u.String()] = true
			s.backends = append(s.backends, u)
		}
	}
	switch {
	case o.maxInFlight != nil:
		n := *o.maxInFlight
		s.gate = config.Gate{MaxInFlight: &n}
	case s.gate.MaxInFlight == nil && s.gate.Saturation == nil && s.gate.Concurrency == nil:
		s.gate = config.Gate{Saturation: &config.Saturation{
			QueueDepthThreshold:       gate.DefaultQueueDepthThreshold,
			KVCacheUtilThreshold:      gate.DefaultKVCacheUtilThreshold,
			MetricsStalenessThreshold: gate.DefaultMetricsStalenessThreshold,
		}}
		if iv := f.Gateway.ScrapeInterval; iv >= s.gate.Saturation.MetricsStalenessThreshold {
			return nil, fmt.Errorf("%sgateway.scrapeInterval %s is not below the default saturation gate's metricsStalenessThreshold %s: every backend would read as stale and the gate would never admit; set gate.saturation.metricsStalenessThreshold or -max-inflight",
				where(o.configPath), iv, s.gate.Saturation.MetricsStalenessThreshold)
		}
	}
	// llm-d-router provisions a band on first sight of a priority its
	// file does not list; the priorities the flags can classify into are
	// known now, so their bands are provisioned at start.
	for _, p := range classifiedPriorities(o) {
		if hasBand(s.flow.Bands, p) {
			continue
		}
		if bc, ok := f.DynamicBand(p); ok {
			s.flow.Bands = append(s.flow.Bands, bc)
		}
	}
	return s, nil
}

// where prefixes a message with the file it is about.
func where(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

// classifiedPriorities lists the priorities the flags' classifier gives
// without a priority header: the default and each objective's.
func classifiedPriorities(o options) []int {
	ps := []int{o.classifier.DefaultPriority}
	for _, p := range o.classifier.Objectives {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

func hasBand(bands []flowcontrol.BandConfig, p int) bool {
	return slices.ContainsFunc(bands, func(b flowcontrol.BandConfig) bool { return b.Priority == p })
}

func findBand(bands []flowcontrol.BandConfig, p int) (flowcontrol.BandConfig, bool) {
	i := slices.IndexFunc(bands, func(b flowcontrol.BandConfig) bool { return b.Priority == p })
	if i < 0 {
		return flowcontrol.BandConfig{}, false
	}
	return bands[i], true
}

// backendNames returns the backends' URLs as written: the names the
// scraper, the saturation gate and the metrics know them by.
func (s *settings) backendNames() []string {
	names := make([]string, len(s.backends))
	for i, u := range s.backends {
		names[i] = u.String()
	}
	return names
}

// change is what a reload does to the running gateway.
type change struct {
	// provision lists the bands to provision: changed limits of a band
	// that runs, or a new band.
	provision []flowcontrol.BandConfig
	// added lists the priorities of the new bands.
	added []int
	// live describes each change that applies at once, for the log.
	live []string
	// restart describes each change only a restart can make; a reload
	// with any is refused.
	restart []string
}

// diff compares the running settings with those of a reloaded file.
func diff(old, next *settings) change {
	var c change
	restart := func(format string, args ...any) { c.restart = append(c.restart, fmt.Sprintf(format, args...)) }
	live := func(format string, args ...any) { c.live = append(c.live, fmt.Sprintf(format, args...)) }

	if old.listen != next.listen {
		restart("listen address %s → %s", old.listen, next.listen)
	}
	og, ng := old.file.Gateway, next.file.Gateway
	if og.ScrapeInterval != ng.ScrapeInterval {
		restart("gateway.scrapeInterval %s → %s", og.ScrapeInterval, ng.ScrapeInterval)
	}
	if og.ScrapeTimeout != ng.ScrapeTimeout {
		restart("gateway.scrapeTimeout %s → %s", og.ScrapeTimeout, ng.ScrapeTimeout)
	}
	if !reflect.DeepEqual(old.gate, next.gate) {
		restart("the gate: %s → %s", describeGate(old.gate), describeGate(next.gate))
	} else if c := next.gate.Concurrency; c != nil && c.PerEndpoint && len(old.backends) != len(next.backends) {
		restart("the number of backends %d → %d, by which the concurrency gate's per-endpoint budgets are multiplied",
			len(old.backends), len(next.backends))
	}

	of, nf := old.flow, next.flow
	limit := func(name string, a, b capacity.Limit) {
		if a != b {
			restart("controller-wide %s %s → %s", name, a, b)
		}
	}
	limit("maxRequests", of.RequestCapacity, nf.RequestCapacity)
	limit("maxBytes", of.ByteCapacity, nf.ByteCapacity)
	limit("maxCost", of.CostCapacity, nf.CostCapacity)
	if of.DefaultTTL != nf.DefaultTTL {
		restart("defaultTTL %s → %s", of.DefaultTTL, nf.DefaultTTL)
	}
	if of.NoEndpointsTTL != nf.NoEndpointsTTL {
		restart("noEndpointsTTL %s → %s", of.NoEndpointsTTL, nf.NoEndpointsTTL)
	}
	if of.FallbackPriority != nf.FallbackPriority {
		restart("fallbackPriority %d → %d", of.FallbackPriority, nf.FallbackPriority)
	}
	if of.NeverPromote != nf.NeverPromote {
		restart("neverPromote %t → %t", of.NeverPromote, nf.NeverPromote)
	}
	if of.NoDisplacement != nf.NoDisplacement {
		restart("displacement %t → %t", !of.NoDisplacement, !nf.NoDisplacement)
	}

	for _, ob := range of.Bands {
		if !hasBand(nf.Bands, ob.Priority) {
			restart("band %d removed", ob.Priority)
		}
	}
	for _, nb := range nf.Bands {
		ob, ok := findBand(of.Bands, nb.Priority)
		if !ok {
			c.provision = append(c.provision, nb)
			c.added = append(c.added, nb.Priority)
			live("band %d added (maxRequests %s, ttl %s, %s)", nb.Priority, nb.RequestCapacity, nb.TTL, policyName(nb.Policy))
			continue
		}
		if a, b := policyName(ob.Policy), policyName(nb.Policy); a != b {
			restart("band %d ordering %s → %s", nb.Priority, a, b)
		}
		if a, b := queueKind(ob), queueKind(nb); a != b {
			restart("band %d queue %s → %s", nb.Priority, a, b)
		}
		if a, b := fairnessOf(ob), fairnessOf(nb); !reflect.DeepEqual(a, b) {
			restart("band %d fairness %s → %s (or its weights or quantum)", nb.Priority, a.TypeName(), b.TypeName())
		}
		changed := false
		bandLimit := func(name string, a, b capacity.Limit) {
			if a != b {
				changed = true
				live("band %d %s %s → %s", nb.Priority, name, a, b)
			}
		}
		bandLimit("maxRequests", ob.RequestCapacity, nb.RequestCapacity)
		bandLimit("maxBytes", ob.ByteCapacity, nb.ByteCapacity)
		bandLimit("maxCost", ob.CostCapacity, nb.CostCapacity)
		bandLimit("maxFlowRequests", ob.FlowRequestCapacity, nb.FlowRequestCapacity)
		if ob.TTL != nb.TTL {
			changed = true
			live("band %d ttl %s → %s", nb.Priority, ob.TTL, nb.TTL)
		}
		if changed {
			c.provision = append(c.provision, nb)
		}
	}

	if a, b := old.backendNames(), next.backendNames(); !slices.Equal(a, b) {
		live("backends %v → %v", a, b)
	}
	if old.grace != next.grace {
		live("grace period %s → %s", old.grace, next.grace)
	}
	return c
}

// policyName is the type name of a band's ordering policy; nil is FCFS.
func policyName(p ordering.Policy) string {
	if p == nil {
		return ordering.FCFSPolicyName
	}
	return p.TypeName()
}

// queueKind is the queue a band runs: its own, or its policy's default.
func queueKind(b flowcontrol.BandConfig) ordering.QueueKind {
	if b.Queue != "" {
		return b.Queue
	}
	p := b.Policy
	if p == nil {
		p = ordering.FCFS()
	}
	return ordering.DefaultQueueKind(p)
}

// fairnessOf is the fairness policy a band runs; nil is global strict.
func fairnessOf(b flowcontrol.BandConfig) flowcontrol.Fairness {
	if b.Fairness == nil {
		return flowcontrol.GlobalStrict()
	}
	return b.Fairness
}

// describeGate names the gates of g with their settings, for messages.
func describeGate(g config.Gate) string {
	var parts []string
	if g.MaxInFlight != nil {
		parts = append(parts, fmt.Sprintf("maxInFlight %d", *g.MaxInFlight))
	}
	if s := g.Saturation; s != nil {
		parts = append(parts, fmt.Sprintf("saturation (queueDepthThreshold %d, kvCacheUtilThreshold %v, metricsStalenessThreshold %s)",
			s.QueueDepthThreshold, s.KVCacheUtilThreshold, s.MetricsStalenessThreshold))
	}
	if c := g.Concurrency; c != nil {
		per := ""
		if c.PerEndpoint {
			per = " per endpoint"
		}
		parts = append(parts, fmt.Sprintf("concurrency (%s, maxConcurrency %d, maxTokenConcurrency %d%s)",
			c.Mode, c.MaxConcurrency, c.MaxTokenConcurrency, per))
	}
	if len(parts) == 0 {
		return "none"
	}
	return fmt.Sprint(parts)
}
