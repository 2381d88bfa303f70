package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// llm-d-router's plugin types that the llm-d form reads.
const (
	utilizationDetectorType = "utilization-detector"
	concurrencyDetectorType = "concurrency-detector"
	flowControlFeatureGate  = "flowControl"
)

var detectorTypes = []string{utilizationDetectorType, concurrencyDetectorType}

// plugin is one entry of llm-d-router's plugins list.
type plugin struct {
	name, typ string
	params    *yaml.Node // nil when absent
	path      string     // plugins[i]

	// The parameters, read once, of the types the llm-d form reads.
	saturation  *Saturation
	concurrency *Concurrency
	drr         fairnessSpec
	usageLimit  *UsageLimit // a usage-limit policy's; nil when its parameters are wrong
}

// llmdBand is one of llm-d-router's PriorityBandConfig, its policy
// references still unresolved.
type llmdBand struct {
	path        string
	priority    int
	maxRequests int64 // 0: the default
	maxBytes    int64 // 0: the default
	ordering    ref
	fairness    ref
	guarantee   float64 // Sluice's key; a listed band's only
}

// ref is a reference to a plugin, by name, as a file writes it.
type ref struct {
	name string
	node *yaml.Node
	path string
}

// llmd reads llm-d-router's EndpointPickerConfig: its flowControl section,
// the plugins it refers to, and the deprecated top-level
// saturationDetector. The other sections are llm-d-router's scheduling and
// data layer, which Sluice accepts and does not read.
func (d *decoder) llmd(top, keys map[string]*yaml.Node, f *File, gateSet bool) {
	gates := map[string]bool{}
	if n := top["featureGates"]; n != nil {
		d.sequence(n, "featureGates", func(_ int, item *yaml.Node, p string) {
			s, ok := d.str(item, p)
			if !ok {
				return
			}
			name, val, hasVal := strings.Cut(s, "=")
			switch {
			case name == "":
				d.errorf(item, p, "want a gate name, optionally with =true or =false, got %q", truncate(s))
			case !hasVal || val == "true":
				gates[name] = true
			case val == "false":
				gates[name] = false
			default:
				d.errorf(item, p, "want %s, %s=true or %s=false, got %q", name, name, name, truncate(s))
			}
		})
	}

	plugins := map[string]*plugin{}
	if n := top["plugins"]; n != nil {
		d.sequence(n, "plugins", func(_ int, item *yaml.Node, p string) {
			pl := &plugin{path: p}
			var typeNode *yaml.Node
			d.mapping(item, p, []field{
				{"name", func(n *yaml.Node, p string) { pl.name, _ = d.str(n, p) }},
				{"type", func(n *yaml.Node, p string) { pl.typ, _ = d.str(n, p); typeNode = n }},
				{"parameters", func(n *yaml.Node, _ string) { pl.params = n }},
			})
			if item.Kind != yaml.MappingNode {
				return
			}
			if pl.typ == "" {
				d.errorf(item, join(p, "type"), "required")
				return
			}
			if !readTypes[pl.typ] && !llmdPluginTypes[pl.typ] {
				// llm-d-router builds every plugin it lists, and fails to
				// start on a type it has not registered.
				d.errorf(typeNode, join(p, "type"), "unknown plugin type %q: neither Sluice nor llm-d-router has it, and llm-d-router refuses to start with it%s",
					truncate(pl.typ), suggestType(pl.typ))
			}
			if pl.name == "" {
				pl.name = pl.typ // as llm-d-router names an unnamed plugin
			}
			if first, dup := plugins[pl.name]; dup {
				d.errorf(d.pos(p), join(p, "name"), "plugin name %q is already used by %s", truncate(pl.name), first.path)
				return
			}
			plugins[pl.name] = pl
			d.checkParams(pl)
		})
	}

	var detector, usageLimit ref
	if n := top["saturationDetector"]; n != nil { // deprecated by llm-d-router for flowControl.saturationDetector
		detector = d.detectorRef(n, "saturationDetector")
	}

	fc := flowcontrol.Config{DefaultTTL: LLMDDefaultRequestTTL, NoDisplacement: true}
	var bands []llmdBand
	var defaultBand, negativeBand *llmdBand
	var noEndpointTTL *time.Duration
	evict := false
	var knobs *flowcontrol.Eviction // Sluice's flowControl.eviction
	hasQueueing := false
	if n := top["flowControl"]; n != nil {
		const p0 = "flowControl"
		d.mapping(n, p0, []field{
			{"maxBytes", func(n *yaml.Node, p string) { fc.ByteCapacity = d.llmdGlobal(n, p) }},
			{"maxRequests", func(n *yaml.Node, p string) { fc.RequestCapacity = d.llmdGlobal(n, p) }},
			{"defaultRequestTTL", func(n *yaml.Node, p string) {
				if v, ok := d.duration(n, p); ok {
					fc.DefaultTTL = v
				}
			}},
			{"noEndpointRequestTTL", func(n *yaml.Node, p string) {
				if v, ok := d.duration(n, p); ok {
					noEndpointTTL = &v
				}
			}},
			{"defaultPriorityBand", func(n *yaml.Node, p string) {
				b := d.llmdBand(n, p, false)
				defaultBand = &b
			}},
			{"defaultNegativePriorityBand", func(n *yaml.Node, p string) {
				b := d.llmdBand(n, p, false)
				negativeBand = &b
			}},
			{"priorityBands", func(n *yaml.Node, p string) {
				d.sequence(n, p, func(_ int, item *yaml.Node, p string) {
					bands = append(bands, d.llmdBand(item, p, true))
				})
			}},
			{"usageLimitPolicyPluginRef", func(n *yaml.Node, p string) {
				if s, ok := d.str(n, p); ok {
					usageLimit = ref{name: s, node: n, path: p}
				}
			}},
			{"saturationDetector", func(n *yaml.Node, p string) {
				if r := d.detectorRef(n, p); r.node != nil {
					detector = r // wins over the deprecated top-level one
				}
			}},
			{"enableEviction", func(n *yaml.Node, p string) { evict, _ = d.boolean(n, p) }},
			{"eviction", func(n *yaml.Node, p string) { knobs = d.evictionKnobs(n, p) }},
		})
		for _, k := range []string{"maxBytes", "maxRequests", "defaultRequestTTL", "noEndpointRequestTTL",
			"defaultPriorityBand", "defaultNegativePriorityBand", "priorityBands", "usageLimitPolicyPluginRef", "enableEviction", "eviction"} {
			hasQueueing = hasQueueing || d.at[join(p0, k)] != nil
		}
		// enableEviction turns in-flight eviction on, with llm-d-router's
		// defaults (the zero Eviction); Sluice's eviction mapping tunes it.
		switch {
		case evict && knobs != nil:
			fc.Eviction = knobs
		case evict:
			fc.Eviction = &flowcontrol.Eviction{}
		case knobs != nil:
			p := join(p0, "eviction")
			d.errorf(d.at[p], p, "tunes in-flight eviction, which is off: set enableEviction: true")
		}
	}

	if !gates[flowControlFeatureGate] {
		d.noFlowControlGate(top, keys, hasQueueing)
	}

	// The TTL with no endpoints: llm-d-router's replaces the TTL while the
	// pool is empty; Sluice's bounds the wait within it. The two agree on
	// a value up to defaultRequestTTL — the use that fails fast on a dead
	// pool — so that is honoured as written, without a warning. A longer
	// one (or 0s, no bound), llm-d's waiting room for a pool scaling from
	// zero, cannot be: the request waits its TTL, and the file is told.
	if noEndpointTTL != nil {
		p := "flowControl.noEndpointRequestTTL"
		fc.NoEndpointsTTL = *noEndpointTTL
		if fc.DefaultTTL > 0 && (*noEndpointTTL == 0 || *noEndpointTTL > fc.DefaultTTL) {
			fc.NoEndpointsTTL = 0
			d.warnf(d.at[p], p, "Sluice never lengthens a request's TTL: with no endpoints a request still waits at most defaultRequestTTL (%s), and is then dropped as rejected-no-endpoints", fc.DefaultTTL)
		}
	}

	// Policies, resolved through the plugins.
	template := d.resolveBand(plugins, defaultBand, 0)
	f.DefaultBand = &template
	if negativeBand != nil {
		nb := d.resolveBand(plugins, negativeBand, 0)
		f.DefaultNegativeBand = &nb
	}
	paths := make([]string, 0, len(bands)+1)
	fc.Bands = make([]flowcontrol.BandConfig, 0, len(bands)+1)
	for i := range bands {
		fc.Bands = append(fc.Bands, d.resolveBand(plugins, &bands[i], bands[i].priority))
		paths = append(paths, bands[i].path)
	}
	d.checkPriorities(fc.Bands, paths)
	d.checkGuarantees(fc.Bands, paths)
	if !hasPriority(fc.Bands, 0) {
		// llm-d-router would provision band 0 from the template on the
		// first request of priority 0; Sluice provisions it at start and
		// makes it the fallback for every priority the file does not list.
		b := template
		b.Priority = 0
		fc.Bands = append(fc.Bands, b)
	}
	f.Flow = fc

	// The gate: Sluice's gate section, or llm-d-router's saturation
	// detector (the utilization-detector with its defaults unless named).
	if gateSet {
		if detector.node != nil {
			d.errorf(detector.node, detector.path, "the gate section and llm-d-router's saturationDetector both configure the gate: keep one")
		}
	} else {
		f.Gate = d.resolveDetector(plugins, detector)
	}
	if usageLimit.node != nil {
		if u := d.resolveUsageLimit(plugins, usageLimit); u != nil {
			if f.Gate.UsageLimit != nil {
				d.errorf(usageLimit.node, usageLimit.path, "the gate section's usageLimit and llm-d-router's usageLimitPolicyPluginRef both set the band ceilings: keep one")
			} else if f.Gate.UsageLimit = u; !f.Gate.hasGate() {
				d.errorf(usageLimit.node, usageLimit.path, "band ceilings bound the saturation of a gate, and the gate section sets none: add maxInFlight, saturation or concurrency")
			}
		}
	}
	d.unread(top, keys, plugins, gates, f)
}

// llmdGlobal reads a controller-wide maxRequests or maxBytes: a quantity,
// where 0 means no bound.
func (d *decoder) llmdGlobal(n *yaml.Node, p string) capacity.Limit {
	v, ok := d.quantity(n, p)
	if !ok || v == 0 {
		return capacity.Unbounded()
	}
	return capacity.Bounded(v)
}

// llmdBand reads one PriorityBandConfig: one of priorityBands when
// listed, else a template (defaultPriorityBand,
// defaultNegativePriorityBand), which may not have Sluice's guarantee.
func (d *decoder) llmdBand(n *yaml.Node, path string, listed bool) llmdBand {
	b := llmdBand{path: path}
	d.mapping(n, path, []field{
		{"priority", func(n *yaml.Node, p string) { b.priority, _ = d.intValue(n, p, math.MinInt32, math.MaxInt32) }},
		{"maxBytes", func(n *yaml.Node, p string) { b.maxBytes, _ = d.quantity(n, p) }},
		{"maxRequests", func(n *yaml.Node, p string) { b.maxRequests, _ = d.quantity(n, p) }},
		{"orderingPolicyRef", func(n *yaml.Node, p string) {
			if s, ok := d.str(n, p); ok {
				b.ordering = ref{name: s, node: n, path: p}
			}
		}},
		{"fairnessPolicyRef", func(n *yaml.Node, p string) {
			if s, ok := d.str(n, p); ok {
				b.fairness = ref{name: s, node: n, path: p}
			}
		}},
		{"guarantee", func(n *yaml.Node, p string) {
			if !listed {
				d.errorf(d.at[p], p, "a guarantee belongs to a band of priorityBands: each band this template provisions would take it again")
				return
			}
			d.guarantee(&b.guarantee)(n, p)
		}},
	})
	return b
}

// resolveBand turns a PriorityBandConfig into a band, with llm-d-router's
// defaults: 5000 requests, 1G bytes, FCFS ordering, global-strict
// fairness. A nil b is the system default band.
func (d *decoder) resolveBand(plugins map[string]*plugin, b *llmdBand, priority int) flowcontrol.BandConfig {
	bc := flowcontrol.BandConfig{
		Priority:        priority,
		RequestCapacity: capacity.Bounded(LLMDDefaultBandMaxRequests),
		ByteCapacity:    capacity.Bounded(LLMDDefaultBandMaxBytes),
		Policy:          ordering.FCFS(),
		Fairness:        flowcontrol.GlobalStrict(),
	}
	if b == nil {
		return bc
	}
	if b.maxRequests > 0 {
		bc.RequestCapacity = capacity.Bounded(b.maxRequests)
	}
	if b.maxBytes > 0 {
		bc.ByteCapacity = capacity.Bounded(b.maxBytes)
	}
	bc.Guarantee = b.guarantee
	if b.ordering.node != nil {
		if typ, _, ok := d.resolveRef(plugins, b.ordering, "ordering policy", OrderingPolicies); ok {
			bc.Policy, _ = d.orderingPolicy(b.ordering.node, b.ordering.path, typ)
		}
	}
	if b.fairness.node != nil {
		if typ, pl, ok := d.resolveRef(plugins, b.fairness, "fairness policy", FairnessPolicies); ok {
			s := fairnessSpec{name: typ, node: b.fairness.node, path: b.fairness.path}
			if pl != nil {
				s.quantum, s.weights = pl.drr.quantum, pl.drr.weights
			}
			if f, ok := d.buildFairness(s); ok {
				bc.Fairness = f
			}
		}
	}
	return bc
}

// resolveRef finds the plugin a reference names and returns its type,
// which must be one of known. As llm-d-router does, a reference names a
// plugin by its name (its type when it has none); a reference to no plugin
// is taken as a type name, as llm-d-router does for the defaults it
// registers itself (fcfs-ordering-policy, global-strict-fairness-policy,
// utilization-detector) and Sluice does for every type it has.
func (d *decoder) resolveRef(plugins map[string]*plugin, r ref, what string, known []string) (string, *plugin, bool) {
	if pl, ok := plugins[r.name]; ok {
		for _, k := range known {
			if pl.typ == k {
				return pl.typ, pl, true
			}
		}
		d.errorf(r.node, r.path, "plugin %q (%s) has type %q, which is not a%s %s Sluice has (%s)",
			truncate(r.name), pl.path, truncate(pl.typ), article(what), what, strings.Join(known, ", "))
		return "", nil, false
	}
	for _, k := range known {
		if r.name == k {
			return k, nil, true
		}
	}
	candidates := append([]string(nil), known...)
	for name := range plugins {
		candidates = append(candidates, name)
	}
	if best := closest(r.name, candidates); best != "" {
		d.errorf(r.node, r.path, "no plugin named %q and no %s of that type (did you mean %q?)", truncate(r.name), what, best)
		return "", nil, false
	}
	d.errorf(r.node, r.path, "no plugin named %q and no %s of that type (known types: %s)", truncate(r.name), what, strings.Join(known, ", "))
	return "", nil, false
}

func article(what string) string {
	if strings.ContainsAny(what[:1], "aeio") {
		return "n"
	}
	return ""
}

// detectorRef reads a SaturationDetectorConfig: {pluginRef: name}.
func (d *decoder) detectorRef(n *yaml.Node, path string) ref {
	var r ref
	d.mapping(n, path, []field{
		{"pluginRef", func(n *yaml.Node, p string) {
			if s, ok := d.str(n, p); ok {
				r = ref{name: s, node: n, path: p}
			}
		}},
	})
	return r
}

// resolveDetector returns the gate a saturation detector reference names:
// llm-d-router's utilization-detector with its defaults when r is unset.
func (d *decoder) resolveDetector(plugins map[string]*plugin, r ref) Gate {
	typ, pl := utilizationDetectorType, plugins[utilizationDetectorType]
	if r.node != nil {
		var ok bool
		if typ, pl, ok = d.resolveRef(plugins, r, "saturation detector", detectorTypes); !ok {
			return Gate{}
		}
	}
	switch {
	case pl != nil:
		return Gate{Saturation: pl.saturation, Concurrency: pl.concurrency}
	case typ == concurrencyDetectorType:
		return Gate{Concurrency: d.concurrency(nil, "", true)}
	default:
		return Gate{Saturation: d.saturation(nil, "", true)}
	}
}

// resolveUsageLimit returns the band ceilings of the usage-limit policy r
// names: its plugin's parameters, or the type's defaults when r names a
// type with no plugin entry (priority-holdback-policy has none for
// minCeiling, so that is an error). nil when the policy is wrong.
func (d *decoder) resolveUsageLimit(plugins map[string]*plugin, r ref) *UsageLimit {
	typ, pl, ok := d.resolveRef(plugins, r, "usage-limit policy", UsageLimitPolicies)
	switch {
	case !ok:
		return nil
	case pl != nil:
		return pl.usageLimit
	}
	return d.usageLimit(typ, nil, r.node, r.path)
}

// checkParams reads the parameters of a plugin of a type the llm-d form
// reads, whether or not anything refers to it, as llm-d-router builds
// every plugin it lists.
func (d *decoder) checkParams(pl *plugin) {
	path := join(pl.path, "parameters")
	switch pl.typ {
	case utilizationDetectorType:
		pl.saturation = d.saturation(pl.params, path, true)
	case concurrencyDetectorType:
		pl.concurrency = d.concurrency(pl.params, path, true)
	case flowcontrol.DeficitRoundRobinFairnessName:
		if pl.params != nil {
			d.mapping(pl.params, path, d.drrFields(&pl.drr))
		}
	case gate.StaticUsageLimitPolicyName, gate.PriorityHoldbackPolicyName, gate.SoftReflectiveCeilingPolicyName:
		pl.usageLimit = d.usageLimit(pl.typ, pl.params, d.at[pl.path], path)
	case ordering.FCFSPolicyName, ordering.EDFPolicyName, ordering.SLODeadlinePolicyName,
		flowcontrol.GlobalStrictFairnessName, flowcontrol.RoundRobinFairnessName:
		if pl.params != nil {
			d.errorf(d.pos(path), path, "%s takes no parameters", pl.typ)
		}
	}
}

// noFlowControlGate warns that llm-d-router, without its flowControl
// feature gate (off by default), runs no flow control at all: it sends
// each request to an endpoint at once, where Sluice queues each in its
// bands. With a flowControl section that sets bands or capacities the
// warning is at that section, which llm-d-router would not apply; else at
// the featureGates list (its flowControl=false item when it has one), or
// the first of the file's kind and llm-d-router keys.
func (d *decoder) noFlowControlGate(top, keys map[string]*yaml.Node, hasQueueing bool) {
	const unqueued = "it would send every request to an endpoint at once, queueing none"
	if hasQueueing {
		d.warnf(keys["flowControl"], "flowControl", "llm-d-router applies this section only with the %q feature gate, which this file does not enable: %s; Sluice applies it regardless, and queues every request",
			flowControlFeatureGate, unqueued)
		return
	}
	at := d.featureGateNode(top["featureGates"], flowControlFeatureGate)
	if at == nil {
		at = keys["featureGates"]
	}
	if at == nil {
		for _, k := range append([]string{"kind"}, llmdKeys...) {
			if n := keys[k]; n != nil && (at == nil || n.Line < at.Line) {
				at = n
			}
		}
	}
	d.warnf(at, "featureGates", "llm-d-router runs flow control only with the %q feature gate, which this file does not enable: %s; "+
		"Sluice queues every request in its bands (here llm-d-router's defaults) whatever the gate: enable it for llm-d-router to queue as Sluice does",
		flowControlFeatureGate, unqueued)
}

// suggestType returns ", did you mean ...?" for the known plugin type
// closest to typ, or "".
func suggestType(typ string) string {
	known := make([]string, 0, len(readTypes)+len(llmdPluginTypes))
	for t := range readTypes {
		known = append(known, t)
	}
	for t := range llmdPluginTypes {
		known = append(known, t)
	}
	slices.Sort(known) // a tie goes to the same type every time
	if best := closest(typ, known); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}
