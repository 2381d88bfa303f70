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

// backendNames returns the backends' URLs as written: the names the
// scraper, the saturation gate and the metrics know them by.
func (s *settings) backendNames() []string {
	names := make([]string, len(s.backends))
	for i, u := range s.backends {
		names[i] = u.String()
	}
	return names
}

// diff compares the running settings with those of a reloaded file: the
// controller's changes (config.DiffFlow), and the gateway's own.
func diff(old, next *settings) config.FlowChange {
	var restart []string
	restartf := func(format string, args ...any) { restart = append(restart, fmt.Sprintf(format, args...)) }
	if old.listen != next.listen {
		restartf("listen address %s → %s", old.listen, next.listen)
	}
	og, ng := old.file.Gateway, next.file.Gateway
	if og.ScrapeInterval != ng.ScrapeInterval {
		restartf("gateway.scrapeInterval %s → %s", og.ScrapeInterval, ng.ScrapeInterval)
	}
	if og.ScrapeTimeout != ng.ScrapeTimeout {
		restartf("gateway.scrapeTimeout %s → %s", og.ScrapeTimeout, ng.ScrapeTimeout)
	}
	if !reflect.DeepEqual(old.gate, next.gate) {
		restartf("the gate: %s → %s", old.gate, next.gate)
	} else if c := next.gate.Concurrency; c != nil && c.PerEndpoint && len(old.backends) != len(next.backends) {
		restartf("the number of backends %d → %d, by which the concurrency gate's per-endpoint budgets are multiplied",
			len(old.backends), len(next.backends))
	}

	c := config.DiffFlow(old.flow, next.flow)
	c.Restart = append(restart, c.Restart...)
	live := func(format string, args ...any) { c.Live = append(c.Live, fmt.Sprintf(format, args...)) }
	if a, b := old.backendNames(), next.backendNames(); !slices.Equal(a, b) {
		live("backends %v → %v", a, b)
	}
	if old.grace != next.grace {
		live("grace period %s → %s", old.grace, next.grace)
	}
	return c
}
