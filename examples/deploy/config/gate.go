package config

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
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
	// ([gate.MaxInFlight]).
	MaxInFlight *int
	// Saturation, when set, admits while the model servers' queue depth
	// and KV-cache utilisation are under their thresholds (llm-d-router's
	// utilization-detector).
	Saturation *Saturation
	// Concurrency, when set, admits while the requests or tokens in flight
	// are under a budget (llm-d-router's concurrency-detector).
	Concurrency *Concurrency
	// UsageLimit, when set, gives each band a ceiling on the saturation
	// of the gate the other parts make (llm-d-router's usage-limit
	// policies, [gate.Ceiling]): a band starts a request only while that
	// saturation is below its ceiling. It needs one of the other parts.
	UsageLimit *UsageLimit
}

// UsageLimitPolicies are the usage-limit policies, as llm-d-router names
// them.
var UsageLimitPolicies = []string{gate.StaticUsageLimitPolicyName, gate.PriorityHoldbackPolicyName, gate.SoftReflectiveCeilingPolicyName}

// UsageLimit configures band ceilings: one of llm-d-router's usage-limit
// policies, with its parameters, which are llm-d-router's.
type UsageLimit struct {
	// Type is one of [UsageLimitPolicies].
	Type string
	// Threshold is the static-usage-limit-policy's one ceiling, in
	// [0, 1]; 1 when the file does not set it.
	Threshold float64
	// Shape ("linear"), Domain ("rank" or "value"), MinCeiling and
	// MaxCeiling are the priority-holdback-policy's; see
	// [gate.PriorityHoldbackConfig]. MaxCeiling is 1 when the file does
	// not set it; MinCeiling has no default.
	Shape, Domain          string
	MinCeiling, MaxCeiling float64
}

// String names u's policy and its parameters, for messages.
func (u UsageLimit) String() string {
	switch u.Type {
	case gate.StaticUsageLimitPolicyName:
		return fmt.Sprintf("%s, threshold %v", u.Type, u.Threshold)
	case gate.PriorityHoldbackPolicyName:
		shape, domain := cmp.Or(u.Shape, gate.ShapeLinear), cmp.Or(u.Domain, gate.DomainRank)
		return fmt.Sprintf("%s, shape %s, domain %s, minCeiling %v, maxCeiling %v", u.Type, shape, domain, u.MinCeiling, u.MaxCeiling)
	}
	return u.Type
}

// Policy builds the policy u configures. Each call builds a new one: the
// soft-reflective policy's state serves one controller.
func (u UsageLimit) Policy() (gate.UsageLimitPolicy, error) {
	switch u.Type {
	case gate.StaticUsageLimitPolicyName:
		return gate.StaticUsageLimit(u.Threshold)
	case gate.PriorityHoldbackPolicyName:
		return gate.PriorityHoldback(gate.PriorityHoldbackConfig{Shape: u.Shape, Domain: u.Domain, MinCeiling: u.MinCeiling, MaxCeiling: u.MaxCeiling})
	case gate.SoftReflectiveCeilingPolicyName:
		return gate.SoftReflectiveCeiling(), nil
	}
	return nil, fmt.Errorf("config: unknown usage-limit policy %q", u.Type)
}

// usageLimit reads the parameters params (nil when there are none) of the
// usage-limit policy typ, checks them by building the policy, and returns
// them; nil, with an error at the parameters, at params' path, or at
// where when there are none, if they are wrong. fields are more keys the
// mapping may hold (Sluice's type key).
func (d *decoder) usageLimit(typ string, params, where *yaml.Node, path string, more ...field) *UsageLimit {
	u := &UsageLimit{Type: typ, Threshold: 1, MaxCeiling: 1}
	minSet := false
	fraction := func(v *float64, set *bool) func(n *yaml.Node, p string) {
		return func(n *yaml.Node, p string) {
			if f, ok := d.float(n, p); ok {
				*v = f
				if set != nil {
					*set = true
				}
			}
		}
	}
	var fields []field
	switch typ {
	case gate.StaticUsageLimitPolicyName:
		fields = []field{{"threshold", fraction(&u.Threshold, nil)}}
	case gate.PriorityHoldbackPolicyName:
		fields = []field{
			{"shape", func(n *yaml.Node, p string) { u.Shape, _ = d.str(n, p) }},
			{"domain", func(n *yaml.Node, p string) {
				if s, ok := d.str(n, p); ok {
					if s == "explicit" {
						d.errorf(n, p, `"explicit" (a ceiling for each priority): Sluice's priority-holdback-policy has the "rank" and "value" domains only`)
						return
					}
					u.Domain = s
				}
			}},
			{"minCeiling", fraction(&u.MinCeiling, &minSet)},
			{"maxCeiling", fraction(&u.MaxCeiling, nil)},
			{"ceilings", func(n *yaml.Node, p string) {
				d.errorf(n, p, `the "explicit" domain's ceilings: Sluice's priority-holdback-policy has the "rank" and "value" domains only`)
			}},
		}
	}
	before := d.problems()
	if params != nil {
		where = params
		if typ == gate.SoftReflectiveCeilingPolicyName && params.Kind == yaml.MappingNode && len(params.Content) > len(more)*2 {
			d.errorf(params, path, "%s takes no parameters", typ)
			return nil
		}
		d.mapping(params, path, append(fields, more...))
	}
	if d.problems() > before {
		return nil
	}
	if typ == gate.PriorityHoldbackPolicyName && !minSet {
		d.errorf(where, path, "%s needs minCeiling, the ceiling of the lowest band (llm-d-router has no default for it)", typ)
		return nil
	}
	// A ceiling of 0 closes a band for good: the gate's constructors
	// refuse it, and the file is told at the key.
	switch {
	case typ == gate.PriorityHoldbackPolicyName && u.MinCeiling == 0:
		p := join(path, "minCeiling")
		d.errorf(d.at[p], p, "0 holds the lowest band back whatever the saturation: its requests would never start; set the share of the gate it may use, above 0 (such as 0.5)")
		return nil
	case typ == gate.StaticUsageLimitPolicyName && u.Threshold == 0:
		p := join(path, "threshold")
		d.errorf(d.at[p], p, "0 holds every band back whatever the saturation: no request would ever start; 1, the default, holds none back")
		return nil
	}
	if _, err := u.Policy(); err != nil {
		d.errorf(where, path, "%s", strings.TrimPrefix(err.Error(), "gate: "))
		return nil
	}
	return u
}

// usageLimitSection reads the gate section's usageLimit: a policy's type,
// or a mapping of its type and parameters.
func (d *decoder) usageLimitSection(n *yaml.Node, path string) *UsageLimit {
	if n.Kind != yaml.MappingNode {
		typ, ok := d.usageLimitPolicy(n, path)
		if !ok {
			return nil
		}
		return d.usageLimit(typ, nil, n, path)
	}
	var typeNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "type" {
			typeNode = resolve(n.Content[i+1])
		}
	}
	if typeNode == nil {
		d.errorf(n, path, "type is required (one of %s)", strings.Join(UsageLimitPolicies, ", "))
		return nil
	}
	typ, ok := d.usageLimitPolicy(typeNode, join(path, "type"))
	if !ok {
		return nil
	}
	return d.usageLimit(typ, n, n, path, field{"type", func(*yaml.Node, string) {}})
}

// usageLimitPolicy reads n, at path, as the type of a usage-limit policy;
// it reports an error and returns false for anything else.
func (d *decoder) usageLimitPolicy(n *yaml.Node, path string) (string, bool) {
	typ, ok := d.str(n, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(UsageLimitPolicies, typ) {
		d.unknownName(n, path, "usage-limit policy", typ, UsageLimitPolicies)
		return "", false
	}
	return typ, true
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
	// SlotsPerEndpoint declares each model server's slots (vLLM's
	// --max-num-seqs), so that band ceilings, guarantees and eviction
	// read the share of the servers' slots in use; 0, unset, reads their
	// KV-cache use ([gate.SaturationConfig.SlotsPerEndpoint]). Sluice's
	// key, gate.saturation.slotsPerEndpoint; llm-d-router's
	// utilization-detector has none.
	SlotsPerEndpoint int
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
		{"usageLimit", func(n *yaml.Node, p string) { g.UsageLimit = d.usageLimitSection(n, p) }},
	})
	if g.UsageLimit != nil && !g.hasGate() {
		p := join(path, "usageLimit")
		d.errorf(d.at[p], p, "band ceilings bound the saturation of a gate, and this section sets none: add maxInFlight, saturation or concurrency")
	}
	return g
}

// hasGate reports whether g sets a gate, not counting the band ceilings
// around it.
func (g Gate) hasGate() bool {
	return g.MaxInFlight != nil || g.Saturation != nil || g.Concurrency != nil
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
	} else {
		fields = append(fields, field{"slotsPerEndpoint", func(n *yaml.Node, p string) {
			if v, ok := d.intValue(n, p, 1, math.MaxInt); ok {
				s.SlotsPerEndpoint = v
			}
		}})
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
	// PriorityScheduling says the binary hands each request's band to the
	// model servers, which serve by it (the priority hand-off is on):
	// maxInFlight is then [gate.PriorityMaxInFlight], and a saturation
	// gate whose slotsPerEndpoint declares the servers' slots lets a
	// higher band past the lower bands' queued work
	// ([gate.SaturationConfig.PriorityScheduling]); without
	// slotsPerEndpoint that changes nothing, and [File.Check] warns.
	PriorityScheduling bool
}

// Gates are the gates [Gate.Build] built, and the one that composes them.
type Gates struct {
	// Gate is the gate for [flowcontrol.Config.Gate]: the one gate set, or
	// [gate.All] of every gate set in the order MaxInFlight, Concurrency,
	// Saturation, inside [gate.Ceiling] when UsageLimit is set; nil when
	// none is.
	Gate gate.Gate
	// Saturation is the saturation gate, nil when not set; feed it each
	// endpoint's metrics with Update.
	Saturation *gate.SaturationGate
	// Concurrency is the concurrency gate, nil when not set.
	Concurrency *gate.ConcurrencyGate
}

// Build builds the gates g sets. Each call builds new ones: a gate serves
// one controller. It fails when a per-endpoint concurrency budget is set
// and opts.Endpoints is not above 0, or when a usage limit is set with no
// gate for its ceilings to read.
func (g Gate) Build(opts BuildOptions) (Gates, error) {
	var gs Gates
	var all []gate.Gate
	if g.MaxInFlight != nil && opts.PriorityScheduling {
		all = append(all, gate.PriorityMaxInFlight(*g.MaxInFlight))
	} else if g.MaxInFlight != nil {
		all = append(all, gate.MaxInFlight(*g.MaxInFlight))
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
			SlotsPerEndpoint:          s.SlotsPerEndpoint,
			PriorityScheduling:        opts.PriorityScheduling && s.SlotsPerEndpoint > 0,
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
	if u := g.UsageLimit; u != nil {
		if gs.Gate == nil {
			return Gates{}, fmt.Errorf("config: the usage limit %s has no gate whose saturation its ceilings bound: set maxInFlight, saturation or concurrency", u.Type)
		}
		p, err := u.Policy()
		if err != nil {
			return Gates{}, fmt.Errorf("config: %w", err)
		}
		gs.Gate = gate.Ceiling(gs.Gate, p)
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
