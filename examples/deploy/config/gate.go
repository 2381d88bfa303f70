package config

import (
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults of the gates' settings: llm-d-router's utilization-detector and
// concurrency-detector defaults.
const (
	DefaultQueueDepthThreshold       = 5
	DefaultKVCacheUtilThreshold      = 0.8
	DefaultMetricsStalenessThreshold = 200 * time.Millisecond
	DefaultMaxConcurrency            = 100
	DefaultMaxTokenConcurrency       = 1_000_000
	DefaultConcurrencyMode           = "requests"
)

// ConcurrencyModes are the modes of the concurrency gate, as
// llm-d-router's concurrency-detector names them.
var ConcurrencyModes = []string{"requests", "tokens", "hybrid"}

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
		QueueDepthThreshold:       DefaultQueueDepthThreshold,
		KVCacheUtilThreshold:      DefaultKVCacheUtilThreshold,
		MetricsStalenessThreshold: DefaultMetricsStalenessThreshold,
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
		Mode:                DefaultConcurrencyMode,
		MaxConcurrency:      DefaultMaxConcurrency,
		MaxTokenConcurrency: DefaultMaxTokenConcurrency,
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

// gateNames lists the parts of a Gate that are set, for messages.
func (g Gate) names() string {
	var s []string
	if g.MaxInFlight != nil {
		s = append(s, "maxInFlight")
	}
	if g.Saturation != nil {
		s = append(s, "saturation")
	}
	if g.Concurrency != nil {
		s = append(s, "concurrency")
	}
	return strings.Join(s, ", ")
}
