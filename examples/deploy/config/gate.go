package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// ConcurrencyModes are the modes of the concurrency gate, as
// llm-d-router's concurrency-detector names them.
var ConcurrencyModes = []string{gate.ModeRequests, gate.ModeTokens, gate.ModeHybrid}

// Gate holds the settings of a file's gate. Each part that is set is one
// gate; with several set, a request starts only when every one of them
// admits it. With none set there is no gate and every request starts at
// once.
type Gate struct {
	// MaxInFlight, when set, caps the requests in flight at once
	// ([flowcontrol.MaxInFlight]).
	MaxInFlight *int
	// Saturation, when set, admits while the model servers' queue depth
	// and KV-cache utilisation are under their thresholds (llm-d-router's
	// utilization-detector).
	Saturation *Saturation
	// Concurrency, when set, admits while the requests or tokens in flight
	// are under a budget (llm-d-router's concurrency-detector).
	Concurrency *Concurrency
}

// Saturation configures the saturation gate, with llm-d-router's
// utilization-detector parameters.
type Saturation struct {
	// QueueDepthThreshold is the waiting-queue depth at which one
	// endpoint counts as saturated; above 0.
	QueueDepthThreshold int
	// KVCacheUtilThreshold is the KV-cache utilisation, in (0, 1], at
	// which one endpoint counts as saturated.
	KVCacheUtilThreshold float64
	// MetricsStalenessThreshold is the age past which an endpoint's
	// metrics are stale, and the endpoint counts as saturated; above 0.
	MetricsStalenessThreshold time.Duration
}

// Concurrency configures the concurrency gate, with llm-d-router's
// concurrency-detector parameters.
type Concurrency struct {
	// Mode is "requests", "tokens" (requests' estimated tokens, their
	// flowcontrol.Request.Cost) or "hybrid" (both budgets).
	Mode string
	// MaxConcurrency is the budget of requests in flight; above 0.
	MaxConcurrency int
	// MaxTokenConcurrency is the budget of tokens in flight; above 0.
	MaxTokenConcurrency int64
	// PerEndpoint makes both budgets per endpoint, as llm-d-router's are:
	// [Gate.Build] multiplies them by the number of endpoints. It is true
	// in the llm-d form, and in Sluice's when perEndpoint is set.
	PerEndpoint bool
}

// gate reads Sluice's gate section.
func (d *decoder) gate(n *yaml.Node, path string) Gate {
	var g Gate
	d.mapping(n, path, []field{
		{"maxInFlight", func(n *yaml.Node, p string) {
			if v, ok := d.intValue(n, p, 0, math.MaxInt); ok {
				g.MaxInFlight = &v
			}
		}},
		{"saturation", func(n *yaml.Node, p string) { g.Saturation = d.saturation(n, p, false) }},
		{"concurrency", func(n *yaml.Node, p string) { g.Concurrency = d.concurrency(n, p, false) }},
	})
	return g
}

// saturation reads the saturation gate's settings (a utilization-detector
// plugin's parameters when llmd is set, which may also hold llm-d-router's
// headroom). Unset values take llm-d-router's defaults.
func (d *decoder) saturation(n *yaml.Node, path string, llmd bool) *Saturation {
	s := &Saturation{
		QueueDepthThreshold:       gate.DefaultQueueDepthThreshold,
		KVCacheUtilThreshold:      gate.DefaultKVCacheUtilThreshold,
		MetricsStalenessThreshold: gate.DefaultMetricsStalenessThreshold,
	}
	if n == nil {
		return s
	}
	fields := []field{
		{"queueDepthThreshold", func(n *yaml.Node, p string) {
			if v, ok := d.intValue(n, p, 1, math.MaxInt); ok {
				s.QueueDepthThreshold = v
			}
		}},
		{"kvCacheUtilThreshold", func(n *yaml.Node, p string) {
			if v, ok := d.float(n, p); ok {
				if v <= 0 || v > 1 {
					d.errorf(n, p, "%v is out of range: want a fraction in (0, 1]", v)
					return
				}
				s.KVCacheUtilThreshold = v
			}
		}},
		{"metricsStalenessThreshold", func(n *yaml.Node, p string) {
			d.staleness = d.at[p]
			d.positiveDuration(&s.MetricsStalenessThreshold)(n, p)
		}},
	}
	if llmd {
		fields = append(fields, d.headroomField())
	}
	d.mapping(n, path, fields)
	return s
}

// concurrency reads the concurrency gate's settings (a
// concurrency-detector plugin's parameters when llmd is set). Unset
// values take llm-d-router's defaults.
func (d *decoder) concurrency(n *yaml.Node, path string, llmd bool) *Concurrency {
	c := &Concurrency{
		Mode:                gate.ModeRequests,
		MaxConcurrency:      gate.DefaultMaxConcurrency,
		MaxTokenConcurrency: gate.DefaultMaxTokenConcurrency,
		PerEndpoint:         llmd,
	}
	if n == nil {
		return c
	}
	fields := []field{
		{"concurrencyMode", func(n *yaml.Node, p string) {
			if v, ok := d.str(n, p); ok {
				if !slices.Contains(ConcurrencyModes, v) {
					d.unknownName(n, p, "concurrency mode", v, ConcurrencyModes)
					return
				}
				c.Mode = v
			}
		}},
		{"maxConcurrency", func(n *yaml.Node, p string) {
			if v, ok := d.intValue(n, p, 1, math.MaxInt); ok {
				c.MaxConcurrency = v
			}
		}},
		{"maxTokenConcurrency", func(n *yaml.Node, p string) {
			if v, ok := d.integer(n, p, 1, math.MaxInt64); ok {
				c.MaxTokenConcurrency = v
			}
		}},
	}
	if !llmd {
		fields = append(fields, field{"perEndpoint", func(n *yaml.Node, p string) { c.PerEndpoint, _ = d.boolean(n, p) }})
	}
	if llmd {
		fields = append(fields, d.headroomField(), field{"inFlightLoadProducerName", func(n *yaml.Node, p string) {
			if _, ok := d.str(n, p); ok {
				d.warnf(d.at[p], p, "accepted and unused: Sluice's gate counts its own requests in flight")
			}
		}})
	}
	d.mapping(n, path, fields)
	return c
}

// headroomField reads llm-d-router's headroom, which widens a detector's
// per-endpoint routing filter; Sluice routes no requests, so it is checked
// and otherwise unused.
func (d *decoder) headroomField() field {
	return field{"headroom", func(n *yaml.Node, p string) {
		v, ok := d.float(n, p)
		if !ok {
			return
		}
		if v < 0 {
			d.errorf(n, p, "must not be negative, got %v", v)
			return
		}
		if v != 0 {
			d.warnf(d.at[p], p, "accepted and unused: headroom widens llm-d-router's per-endpoint routing filter, and Sluice picks no endpoints")
		}
	}}
}

// BuildOptions are what a binary knows about its gate and a file does not.
type BuildOptions struct {
	// Endpoints is the number of model servers, by which a per-endpoint
	// concurrency budget is multiplied; 0 means as many as the gateway
	// section's backends in [File.Controller].
	Endpoints int
	// Clock is the controller's clock, which the saturation gate times
	// staleness with; nil means the real clock.
	Clock flowcontrol.Clock
	// Replicas and Replica divide the saturation gate's room among router
	// replicas that share the same model servers ([gate.SaturationConfig]);
	// 0 and 0 mean one replica.
	Replicas, Replica int
}

// Gates are the gates [Gate.Build] built, and the one that composes them.
type Gates struct {
	// Gate is the gate for [flowcontrol.Config.Gate]: the one gate set, or
	// [gate.All] of every gate set in the order MaxInFlight, Concurrency,
	// Saturation; nil when none is.
	Gate flowcontrol.Gate
	// Saturation is the saturation gate, nil when not set; feed it each
	// endpoint's metrics with Update.
	Saturation *gate.SaturationGate
	// Concurrency is the concurrency gate, nil when not set.
	Concurrency *gate.ConcurrencyGate
}

// Build builds the gates g sets. Each call builds new ones: a gate serves
// one controller. It fails when a per-endpoint concurrency budget is set
// and opts.Endpoints is not above 0.
func (g Gate) Build(opts BuildOptions) (Gates, error) {
	var gs Gates
	var all []flowcontrol.Gate
	if g.MaxInFlight != nil {
		all = append(all, flowcontrol.MaxInFlight(*g.MaxInFlight))
	}
	if c := g.Concurrency; c != nil {
		cfg := gate.ConcurrencyConfig{Mode: c.Mode, MaxConcurrency: c.MaxConcurrency, MaxTokenConcurrency: c.MaxTokenConcurrency}
		if c.PerEndpoint {
			if opts.Endpoints <= 0 {
				return Gates{}, errors.New("config: the concurrency gate's budgets are per endpoint (llm-d-router's concurrency-detector), and no endpoints are given: list the backends")
			}
			cfg.MaxConcurrency = mulCap(cfg.MaxConcurrency, opts.Endpoints)
			cfg.MaxTokenConcurrency = int64(mulCap(int(min(cfg.MaxTokenConcurrency, math.MaxInt)), opts.Endpoints))
		}
		cg, err := gate.Concurrency(cfg)
		if err != nil {
			return Gates{}, fmt.Errorf("config: %w", err)
		}
		gs.Concurrency = cg
		all = append(all, cg)
	}
	if s := g.Saturation; s != nil {
		sg, err := gate.Saturation(gate.SaturationConfig{
			QueueDepthThreshold:       s.QueueDepthThreshold,
			KVCacheUtilThreshold:      s.KVCacheUtilThreshold,
			MetricsStalenessThreshold: s.MetricsStalenessThreshold,
			Replicas:                  opts.Replicas,
			Replica:                   opts.Replica,
			Clock:                     opts.Clock,
		})
		if err != nil {
			return Gates{}, fmt.Errorf("config: %w", err)
		}
		gs.Saturation = sg
		all = append(all, sg)
	}
	switch len(all) {
	case 0:
	case 1:
		gs.Gate = all[0]
	default:
		gs.Gate = gate.All(all...)
	}
	return gs, nil
}

// mulCap returns a×b for positive a and b, or math.MaxInt if that
// overflows.
func mulCap(a, b int) int {
	if a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}

// Controller returns the file's controller configuration with a gate built
// afresh (see [Gate.Build]) and opts.Clock as its clock, and the gates, so
// that the binary can feed the saturation gate. When opts.Endpoints is 0,
// the gateway section's backends count the endpoints.
func (f *File) Controller(opts BuildOptions) (flowcontrol.Config, Gates, error) {
	if opts.Endpoints == 0 {
		opts.Endpoints = len(f.Gateway.Backends)
	}
	gs, err := f.Gate.Build(opts)
	if err != nil {
		return flowcontrol.Config{}, Gates{}, err
	}
	cfg := f.Flow
	cfg.Bands = slices.Clone(f.Flow.Bands)
	cfg.Gate = gs.Gate
	cfg.Clock = opts.Clock
	return cfg, gs, nil
}
