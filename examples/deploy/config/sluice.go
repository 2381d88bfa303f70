package config

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/ordering"
)

// OrderingPolicies are the ordering policy names a file may give, as
// [ordering.PolicyByName] accepts them (llm-d-router's type names).
var OrderingPolicies = []string{
	ordering.FCFSPolicyName, ordering.EDFPolicyName, ordering.SLODeadlinePolicyName,
}

// FairnessPolicies are the fairness policy names a file may give, as
// [flowcontrol.FairnessByName] accepts them; the first two are
// llm-d-router's.
var FairnessPolicies = []string{
	flowcontrol.GlobalStrictFairnessName, flowcontrol.RoundRobinFairnessName,
	flowcontrol.DeficitRoundRobinFairnessName,
}

// queueKinds are the queue names a band may give.
var queueKinds = []string{string(ordering.QueueFIFO), string(ordering.QueueHeap)}

// unknownName reports a name that is not in known, suggesting the closest.
func (d *decoder) unknownName(n *yaml.Node, path, what, name string, known []string) {
	if best := closest(name, known); best != "" {
		d.errorf(n, path, "unknown %s %q (did you mean %q?)", what, truncate(name), best)
		return
	}
	d.errorf(n, path, "unknown %s %q (known: %s)", what, truncate(name), strings.Join(known, ", "))
}

// orderingPolicy returns the ordering policy of the given name.
func (d *decoder) orderingPolicy(n *yaml.Node, path, name string) (ordering.Policy, bool) {
	p, err := ordering.PolicyByName(name)
	if err != nil {
		d.unknownName(n, path, "ordering policy", name, OrderingPolicies)
		return nil, false
	}
	return p, true
}

// fairnessSpec is a fairness policy as a file gives it: a name, and for
// deficit round robin its quantum and weights.
type fairnessSpec struct {
	name    string
	node    *yaml.Node
	path    string
	quantum int64
	weights map[string]int64
	drrKey  *yaml.Node // the first of quantum or weights, if given
	drrPath string
}

// buildFairness returns the policy s names.
func (d *decoder) buildFairness(s fairnessSpec) (flowcontrol.Fairness, bool) {
	if s.name == flowcontrol.DeficitRoundRobinFairnessName {
		return flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{Weights: s.weights, Quantum: s.quantum}), true
	}
	f, err := flowcontrol.FairnessByName(s.name)
	if err != nil {
		d.unknownName(s.node, s.path, "fairness policy", s.name, FairnessPolicies)
		return nil, false
	}
	if s.drrKey != nil {
		d.errorf(s.drrKey, s.drrPath, "quantum and weights belong to %s only, not %s",
			flowcontrol.DeficitRoundRobinFairnessName, s.name)
		return nil, false
	}
	return f, true
}

// drrFields reads the quantum and weights of deficit round robin into s,
// as one more key of a mapping.
func (d *decoder) drrFields(s *fairnessSpec) []field {
	return []field{
		{"quantum", func(n *yaml.Node, p string) {
			if s.drrKey == nil {
				s.drrKey, s.drrPath = d.at[p], p
			}
			s.quantum, _ = d.integer(n, p, 0, math.MaxInt64)
		}},
		{"weights", func(n *yaml.Node, p string) {
			if s.drrKey == nil {
				s.drrKey, s.drrPath = d.at[p], p
			}
			s.weights = map[string]int64{}
			d.entries(n, p, func(k, v *yaml.Node) {
				wp := join(p, k.Value)
				if w, ok := d.integer(resolve(v), wp, 1, math.MaxInt64); ok {
					s.weights[k.Value] = w
				}
			})
		}},
	}
}

// fairness reads a band's fairness: a policy name, or a mapping with its
// type and, for deficit round robin, quantum and weights.
func (d *decoder) fairness(n *yaml.Node, path string) (flowcontrol.Fairness, bool) {
	s := fairnessSpec{node: n, path: path}
	if n.Kind == yaml.MappingNode {
		typeSet := false
		fields := append([]field{{"type", func(n *yaml.Node, p string) {
			s.name, typeSet = d.str(n, p)
			s.node, s.path = n, p
		}}}, d.drrFields(&s)...)
		before := d.problems()
		d.mapping(n, path, fields)
		if d.problems() > before {
			return nil, false
		}
		if !typeSet {
			d.errorf(n, path, "type is required (one of %s)", strings.Join(FairnessPolicies, ", "))
			return nil, false
		}
	} else {
		name, ok := d.str(n, path)
		if !ok {
			return nil, false
		}
		s.name = name
	}
	return d.buildFairness(s)
}

// controller reads Sluice's controller section.
func (d *decoder) controller(n *yaml.Node, path string) flowcontrol.Config {
	var cfg flowcontrol.Config
	var bands []flowcontrol.BandConfig
	var bandPaths []string
	bandsSet, fallbackSet := false, false
	bandsBad := false
	displacement := true
	d.mapping(n, path, []field{
		{"maxRequests", d.setLimit(&cfg.RequestCapacity)},
		{"maxBytes", d.setLimit(&cfg.ByteCapacity)},
		{"maxCost", d.setLimit(&cfg.CostCapacity)},
		{"defaultTTL", func(n *yaml.Node, p string) { cfg.DefaultTTL, _ = d.duration(n, p) }},
		{"noEndpointsTTL", func(n *yaml.Node, p string) { cfg.NoEndpointsTTL, _ = d.duration(n, p) }},
		{"fallbackPriority", func(n *yaml.Node, p string) {
			cfg.FallbackPriority, fallbackSet = d.intValue(n, p, math.MinInt, math.MaxInt)
		}},
		{"neverPromote", func(n *yaml.Node, p string) { cfg.NeverPromote, _ = d.boolean(n, p) }},
		{"displacement", func(n *yaml.Node, p string) {
			if v, ok := d.boolean(n, p); ok {
				displacement = v
			}
		}},
		{"eviction", func(n *yaml.Node, p string) { cfg.Eviction = d.eviction(n, p) }},
		{"bands", func(n *yaml.Node, p string) {
			bandsSet = true
			before := d.problems()
			d.sequence(n, p, func(_ int, item *yaml.Node, p string) {
				if bc, ok := d.band(item, p); ok {
					bands = append(bands, bc)
					bandPaths = append(bandPaths, p)
				}
			})
			if d.problems() > before {
				bandsBad = true
			} else if len(bands) == 0 {
				d.errorf(n, p, "at least one band is needed")
				bandsBad = true
			}
		}},
	})
	cfg.NoDisplacement = !displacement
	if !bandsSet {
		// No bands: one unbounded FCFS band takes every request.
		bands = []flowcontrol.BandConfig{{Priority: cfg.FallbackPriority}}
		bandPaths = []string{join(path, "bands")}
	}
	cfg.Bands = bands

	if bandsBad {
		return cfg // the bands' own problems are reported; the rest would mislead
	}
	d.checkPriorities(bands, bandPaths)
	d.checkGuarantees(bands, bandPaths)
	if cfg.NeverPromote && cfg.FallbackPriority != 0 {
		d.errorf(d.pos(join(path, "fallbackPriority")), join(path, "fallbackPriority"),
			"must be left unset with neverPromote: true (the fallback band is then unused)")
	} else if !cfg.NeverPromote && !hasPriority(bands, cfg.FallbackPriority) {
		where := join(path, "fallbackPriority")
		msg := fmt.Sprintf("%d names no band (bands: %s); requests of a priority with no band go to the fallback band",
			cfg.FallbackPriority, priorities(bands))
		if !fallbackSet {
			where = join(path, "bands")
			msg = fmt.Sprintf("no band of priority 0 to take requests of a priority with no band (bands: %s): add one, set fallbackPriority, or set neverPromote",
				priorities(bands))
		}
		d.errorf(d.pos(where), where, "%s", msg)
	}
	// Sluice's form lists every band the controller has, so eviction that
	// finds no victim among them is known wrong now.
	if where, msg := victimProblem(FormSluice, cfg, func(p string) bool { return d.at[p] != nil }); msg != "" {
		d.errorf(d.pos(where), where, "%s", msg)
	}
	return cfg
}

// band reads one band of the controller section; false if its priority is
// missing or a part of it is wrong.
func (d *decoder) band(n *yaml.Node, path string) (flowcontrol.BandConfig, bool) {
	var bc flowcontrol.BandConfig
	prioritySet := false
	var queueNode *yaml.Node
	before := d.problems()
	d.mapping(n, path, []field{
		{"priority", func(n *yaml.Node, p string) {
			bc.Priority, _ = d.intValue(n, p, math.MinInt, math.MaxInt)
			prioritySet = true
		}},
		{"maxRequests", d.setLimit(&bc.RequestCapacity)},
		{"maxBytes", d.setLimit(&bc.ByteCapacity)},
		{"maxCost", d.setLimit(&bc.CostCapacity)},
		{"maxFlowRequests", d.setLimit(&bc.FlowRequestCapacity)},
		{"ttl", func(n *yaml.Node, p string) { bc.TTL, _ = d.duration(n, p) }},
		{"ordering", func(n *yaml.Node, p string) {
			if name, ok := d.str(n, p); ok {
				bc.Policy, _ = d.orderingPolicy(n, p, name)
			}
		}},
		{"queue", func(n *yaml.Node, p string) {
			queueNode = n
			if name, ok := d.str(n, p); ok {
				if !slices.Contains(queueKinds, name) {
					d.unknownName(n, p, "queue", name, queueKinds)
					return
				}
				bc.Queue = ordering.QueueKind(name)
			}
		}},
		{"fairness", func(n *yaml.Node, p string) { bc.Fairness, _ = d.fairness(n, p) }},
		{"guarantee", d.guarantee(&bc.Guarantee)},
	})
	if n.Kind == yaml.MappingNode && !prioritySet {
		d.errorf(n, path, "priority is required")
	}
	bad := d.problems() > before
	if !bad {
		d.checkQueue(queueNode, join(path, "queue"), bc)
	}
	return bc, !bad && prioritySet
}

// checkQueue reports a queue that cannot run the band's ordering policy.
func (d *decoder) checkQueue(queueNode *yaml.Node, path string, bc flowcontrol.BandConfig) {
	if bc.Queue == "" {
		return
	}
	p := bc.Policy
	if p == nil {
		p = ordering.FCFS()
	}
	if _, err := ordering.NewQueue(bc.Queue, p); err != nil {
		d.errorf(queueNode, path, "a %s queue cannot run %s: %s needs the %s queue",
			bc.Queue, p.TypeName(), p.TypeName(), ordering.DefaultQueueKind(p))
	}
}

// checkPriorities reports bands that share a priority.
func (d *decoder) checkPriorities(bands []flowcontrol.BandConfig, paths []string) {
	first := map[int]string{}
	for i, bc := range bands {
		p := join(paths[i], "priority")
		if prev, dup := first[bc.Priority]; dup {
			d.errorf(d.pos(p), p, "%d duplicates %s.priority", bc.Priority, prev)
			continue
		}
		first[bc.Priority] = paths[i]
	}
}

func hasPriority(bands []flowcontrol.BandConfig, p int) bool {
	return slices.ContainsFunc(bands, func(bc flowcontrol.BandConfig) bool { return bc.Priority == p })
}

func priorities(bands []flowcontrol.BandConfig) string {
	s := make([]string, len(bands))
	for i, bc := range bands {
		s[i] = fmt.Sprint(bc.Priority)
	}
	return strings.Join(s, ", ")
}
