package main

import (
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
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
	// drain is -drain-delay, else gateway.drainDelay.
	drain time.Duration
	// gate is -max-inflight, else the file's gate, else the default
	// saturation gate.
	gate config.Gate
	// flow is the controller's configuration without Gate and Observer:
	// the file's, plus a band for each priority the classifier can give
	// that llm-d-router's form would provision on first sight.
	flow flowcontrol.Config
	// handoff is the priority hand-off: gateway.priorityHandoff, turned on
	// or off by -priority-handoff.
	handoff flowhttp.PriorityHandoff
	// fleet is the -fleet-* flags given, over gateway.fleet, over the
	// flags' defaults; fleet.redis is empty when the gateway runs alone.
	fleet fleetOptions
	// warnings are the file's, then what the gateway runs that works
	// against the file or the flags (no backend; eviction, guarantees or
	// band ceilings behind a gate that cannot serve them: config's
	// File.Check), formatted for a log.
	warnings []string
}

// defaultNoEndpointsTTL is the no-endpoints TTL (flowcontrol.Config's
// NoEndpointsTTL) when the file sets none (neither controller.noEndpointsTTL
// nor llm-d's flowControl.noEndpointRequestTTL): with every backend down,
// a request is answered 503 rejected-no-endpoints this long after it was
// queued, or after the last backend went down, instead of at the end of
// its TTL (60 s by default). Five seconds rides out a backend's restart
// or a reload that swaps the backends — a returning backend is probed
// within a second — and is still far below any client's patience.
// llm-d-router's own default follows defaultRequestTTL (a waiting room
// for a pool scaling from zero); a file that wants that sets the key.
const defaultNoEndpointsTTL = 5 * time.Second

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
	s := &settings{file: f, listen: f.Gateway.Listen, grace: f.Gateway.GracePeriod, drain: f.Gateway.DrainDelay, gate: f.Gate, flow: f.Flow}
	s.flow.Bands = slices.Clone(f.Flow.Bands)
	if !f.Wrote("controller.noEndpointsTTL") && !f.Wrote("flowControl.noEndpointRequestTTL") {
		s.flow.NoEndpointsTTL = defaultNoEndpointsTTL
	}
	if o.listen != "" {
		s.listen = o.listen
	}
	if o.gracePeriod != nil {
		s.grace = *o.gracePeriod
	}
	if o.drainDelay != nil {
		s.drain = *o.drainDelay
	}
	seen := map[string]bool{}
	for _, u := range append(slices.Clone(o.backends), f.Gateway.Backends...) {
		if !seen[u.String()] {
			seen[u.String()] = true
			s.backends = append(s.backends, u)
		}
	}
	flags := config.Flags{PriorityHandoffSet: o.priorityHandoff != nil}
	if o.priorityHandoff != nil {
		flags.PriorityHandoff = *o.priorityHandoff
	}
	if s.handoff = flags.Handoff(f.Gateway.PriorityHandoff); s.handoff.Enabled && o.maxBodyBytes < 0 {
		return nil, fmt.Errorf("-max-body-bytes %d is negative, so bodies are not read, but the priority hand-off (-%s or gateway.priorityHandoff) rewrites them",
			o.maxBodyBytes, config.PriorityHandoffFlag)
	}
	s.warnings = config.WarningStrings(f.Warnings)
	if len(s.backends) == 0 {
		s.warnings = append(s.warnings, noBackend(o, f))
	}
	switch {
	case o.maxInFlight != nil:
		n := *o.maxInFlight
		s.gate = config.Gate{MaxInFlight: &n, UsageLimit: s.gate.UsageLimit} // the band ceilings stay
	case s.gate.MaxInFlight == nil && s.gate.Saturation == nil && s.gate.Concurrency == nil:
		s.gate = config.Gate{Saturation: &config.Saturation{
			QueueDepthThreshold:       gate.DefaultQueueDepthThreshold,
			KVCacheUtilThreshold:      gate.DefaultKVCacheUtilThreshold,
			MetricsStalenessThreshold: gate.DefaultMetricsStalenessThreshold,
		}}
		if iv := f.Gateway.ScrapeInterval; iv >= s.gate.Saturation.MetricsStalenessThreshold {
			return nil, f.ErrorAt("gateway.scrapeInterval", "%s is not below the default saturation gate's metricsStalenessThreshold %s: every backend would read as stale and the gate would never admit; set gate.saturation.metricsStalenessThreshold or -max-inflight",
				iv, s.gate.Saturation.MetricsStalenessThreshold)
		}
	}
	s.fleet = o.fleet.over(f.Gateway.Fleet, o.fleetSet)
	if f.Gateway.Fleet != nil {
		if err := s.fleet.check(); err != nil {
			return nil, f.ErrorAt("gateway.fleet", "with the flags: %v", err)
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
	// What the file asks for, judged behind the gate and over the bands
	// the gateway runs: an error at the file's key, or warnings logged at
	// start and printed by -check-config.
	ws, err := f.Check(s.running())
	if err != nil {
		return nil, err
	}
	s.warnings = append(s.warnings, config.WarningStrings(ws)...)
	return s, nil
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

// running is what s runs that a reload compares.
func (s *settings) running() config.Running {
	return config.Running{
		Flow:           s.flow,
		Gate:           s.gate,
		Backends:       s.backendNames(),
		ScrapeInterval: s.file.Gateway.ScrapeInterval,
		ScrapeTimeout:  s.file.Gateway.ScrapeTimeout,
		GracePeriod:    s.grace,
		DrainDelay:     s.drain,

		PriorityHandoff: s.handoff,
		Fleet:           s.fleet.config(),
	}
}

// diff compares the running settings with those of a reloaded file:
// config.Diff, and the listen address, which only a restart changes.
func diff(old, next *settings) config.Change {
	c := config.Diff(old.running(), next.running())
	if old.listen != next.listen {
		c.Restart = append([]string{fmt.Sprintf("listen address %s → %s", old.listen, next.listen)}, c.Restart...)
	}
	return c
}

// noBackend is the warning of a gateway without backends: it starts, and
// answers nothing but 503 until a reload gives it one.
func noBackend(o options, f *config.File) string {
	const msg = "no backend: /readyz answers 503, each inference request ends 503 rejected-no-endpoints after the no-endpoints TTL, " +
		"and every other request 503 at once, until -backend or gateway.backends (then SIGHUP) gives one"
	if o.configPath == "" {
		return "sluice-gateway: " + msg
	}
	return config.Warning(*f.ErrorAt("gateway.backends", "%s", msg)).String()
}
