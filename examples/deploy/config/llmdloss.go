package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// probabilisticAdmitterType is llm-d-router's admission plugin that sheds
// sheddable requests with a probability rising with saturation.
const probabilisticAdmitterType = "probabilistic-admitter"

// readTypes are the plugin types the llm-d form reads: the rest are
// llm-d-router's scheduling, data layer and admission, which Sluice reads
// past with a warning each.
var readTypes = map[string]bool{
	utilizationDetectorType: true, concurrencyDetectorType: true,
	gate.StaticUsageLimitPolicyName: true, gate.PriorityHoldbackPolicyName: true, gate.SoftReflectiveCeilingPolicyName: true,
	ordering.FCFSPolicyName: true, ordering.EDFPolicyName: true, ordering.SLODeadlinePolicyName: true,
	flowcontrol.GlobalStrictFairnessName: true, flowcontrol.RoundRobinFairnessName: true,
	flowcontrol.DeficitRoundRobinFairnessName: true,
}

// How Sluice does without what llm-d-router's scheduling decides, for the
// warnings that name what is lost.
const (
	sluicePicks   = "Sluice picks no endpoint: it sends each admitted request to the backend with the fewest requests in flight from it"
	sluiceScrapes = "Sluice scrapes each backend's /metrics itself and takes the backends from -backend and gateway.backends"
)

// unread warns of every section, plugin and feature gate of an llm-d-router
// file that llm-d-router would honour and Sluice reads past, each at its
// place, saying what is lost. plugins are the file's, by name; gates its
// feature gates; f the file as read, its gate resolved.
func (d *decoder) unread(top, keys map[string]*yaml.Node, plugins map[string]*plugin, gates map[string]bool, f *File) {
	for name, on := range gates {
		if on && name != flowControlFeatureGate {
			p := "featureGates"
			d.warnf(d.featureGateNode(top["featureGates"], name), p, "feature gate %q: ignored, Sluice has no such feature", truncate(name))
		}
	}
	for _, pl := range plugins {
		if readTypes[pl.typ] {
			continue
		}
		d.warnf(d.at[pl.path], pl.path, "plugin %q (type %s): not read: %s", truncate(pl.name), truncate(pl.typ), pluginLoss(pl.typ, f.Gate))
	}
	sections := []struct{ key, loss string }{
		{"schedulingProfiles", "llm-d-router's endpoint scheduling (its filters, scorers, their weights and the picker) is not read: " + sluicePicks},
		{"dataLayer", "llm-d-router's data layer (its sources, extractors and endpoint discovery) is not read: " + sluiceScrapes},
		{"requestHandler", "llm-d-router's request parsers are not read: Sluice reads a body only for its size and token estimate, and forwards it unchanged"},
		{"parser", "llm-d-router's request parser is not read: Sluice reads a body only for its size and token estimate, and forwards it unchanged"},
	}
	for _, s := range sections {
		if n := top[s.key]; n != nil && !isEmpty(n) {
			d.warnf(keys[s.key], s.key, "%s", s.loss)
		}
	}
}

// pluginLoss says what a plugin of type typ, which Sluice does not read,
// did in llm-d-router. g is the file's gate, which an admitter's warning
// weighs.
func pluginLoss(typ string, g Gate) string {
	switch {
	case typ == probabilisticAdmitterType:
		msg := "llm-d-router sheds sheddable requests (priority below 0) at admission with a probability that rises with the pool's saturation; " +
			"Sluice has no admitter, so admission is only what the gate and the band capacities refuse"
		if s := g.Saturation; s != nil && s.QueueDepthThreshold >= 1_000_000 && s.KVCacheUtilThreshold >= 1 {
			msg += fmt.Sprintf("; with this file's utilization-detector (queueDepthThreshold %d, kvCacheUtilThreshold %v), written to leave admission to the admitter, that is effectively no admission control",
				s.QueueDepthThreshold, s.KVCacheUtilThreshold)
		}
		return msg
	case strings.HasSuffix(typ, "-scorer"):
		return "a scheduling scorer, which weighs endpoints for each request: " + sluicePicks
	case strings.HasSuffix(typ, "-filter"), strings.HasSuffix(typ, "-picker"), strings.HasSuffix(typ, "-profile-handler"), strings.HasSuffix(typ, "-decider"):
		return "part of llm-d-router's endpoint scheduling: " + sluicePicks
	case strings.HasSuffix(typ, "-producer"), strings.HasSuffix(typ, "-extractor"), strings.HasSuffix(typ, "-source"):
		return "llm-d-router's data layer, which feeds its scheduling: " + sluiceScrapes
	case strings.HasSuffix(typ, "-parser"):
		return "a request parser: Sluice reads a body only for its size and token estimate, and forwards it unchanged"
	case strings.HasSuffix(typ, "-policy"):
		return "a policy Sluice does not have (flowControl may not refer to it)"
	}
	return "a plugin Sluice does not have; whatever llm-d-router does with it is not done"
}

// featureGateNode returns the item of the featureGates list n that names
// gate, for a warning's place; nil when none does.
func (d *decoder) featureGateNode(n *yaml.Node, gate string) *yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	for _, item := range n.Content {
		if item = resolve(item); item.Kind == yaml.ScalarNode {
			if name, _, _ := strings.Cut(item.Value, "="); name == gate {
				return item
			}
		}
	}
	return nil
}

// isEmpty reports whether n is an empty list or mapping.
func isEmpty(n *yaml.Node) bool {
	n = resolve(n)
	return (n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode) && len(n.Content) == 0
}
