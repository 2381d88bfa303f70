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

// llmdPluginTypes are the plugin types llm-d-router registers (its
// cmd/epp/runner registerInTreePlugins, at ebab687, the version the
// samples in testdata are from). A type that is neither one of them nor
// one Sluice reads is an error, as llm-d-router refuses to start with a
// plugin it cannot build; one of them that Sluice does not read is a
// warning (see unread).
var llmdPluginTypes = map[string]bool{
	"active-request-scorer": true, "agent-identity": true, "always-disagg-multimodal-decider": true,
	"always-disagg-pd-decider": true, "anthropic-parser": true, "approx-prefix-cache-producer": true,
	"burst-prefix-cache-producer": true, "by-label": true, "by-label-selector": true,
	"concurrency-detector": true, "context-length-aware": true, "core-metrics-extractor": true,
	"data-parallel-profile-handler": true, "dcgm-data-source": true, "dcgm-extractor": true,
	"decode-filter": true, "destination-endpoint-served-verifier": true,
	"disagg-headers-handler": true, "disagg-profile-handler": true,
	"disaggregatedset-rollout-screener": true, "edf-ordering-policy": true, "encode-filter": true,
	"endpoint-attribute-filter": true, "endpoint-attribute-scorer": true,
	"endpoint-notification-source": true, "fcfs-ordering-policy": true, "file-discovery": true,
	"global-strict-fairness-policy": true, "header-based-testing-filter": true,
	"header-label-affinity-scorer": true, "header-profile-handler": true,
	"inflight-load-producer": true, "k8s-notification-source": true,
	"kv-cache-utilization-scorer": true, "label-selector-filter": true, "latency-scorer": true,
	"latency-slo-admitter": true, "load-aware-scorer": true, "lora-affinity-scorer": true,
	"max-score-picker": true, "metrics-data-source": true, "mm-embeddings-cache-producer": true,
	"mm-embeddings-cache-scorer": true, "models-data-extractor": true, "models-data-source": true,
	"multicluster-approx-prefix-cache-producer": true, "multicluster-file-discovery": true,
	"multicluster-kv-cache-utilization-scorer": true, "multicluster-metrics-data-source": true,
	"multicluster-metrics-extractor": true, "multicluster-prefix-cache-scorer": true,
	"multicluster-queue-scorer": true, "multicluster-session-affinity-filter": true,
	"no-hit-lru-scorer": true, "openai-parser": true, "p2p-source-producer": true,
	"passthrough-parser": true, "pd-profile-handler": true, "precise-prefix-cache-producer": true,
	"precise-prefix-cache-scorer": true, "predicted-latency-producer": true, "prefill-filter": true,
	"prefill-header-handler": true, "prefix-based-pd-decider": true,
	"prefix-cache-affinity-filter": true, "prefix-cache-scorer": true,
	"priority-holdback-policy": true, "priority-then-time-eviction-order-policy": true,
	"probabilistic-admitter": true, "program-aware-fairness": true, "queue-scorer": true,
	"random-picker": true, "request-attribute-reporter": true, "round-robin-fairness-policy": true,
	"running-requests-size-scorer": true, "session-affinity-filter": true,
	"session-affinity-scorer": true, "session-id-producer": true, "sglanghttp-parser": true,
	"sheddable-eviction-filter": true, "single-profile-handler": true,
	"slo-deadline-ordering-policy": true, "slo-headroom-tier-filter": true,
	"soft-reflective-ceiling-policy": true, "static-usage-limit-policy": true,
	"token-load-scorer": true, "token-producer": true, "tokenizer": true,
	"topology-affinity-filter": true, "topology-affinity-scorer": true, "topology-extractor": true,
	"utilization-detector": true, "utilization-filter": true, "vertexai-parser": true,
	"vllmgrpc-parser": true, "vllmhttp-parser": true, "weighted-random-picker": true,
}

// How Sluice does without what llm-d-router's scheduling decides, for the
// warnings that name what is lost.
const (
	sluicePicks   = "Sluice picks no endpoint: it sends each admitted request to the backend with the fewest requests in flight from it"
	sluiceScrapes = "Sluice scrapes each backend's /metrics itself and takes the backends from -backend and gateway.backends"
	sluiceBodies  = "Sluice reads a body only for its size and token estimate, and forwards it unchanged"
)

// The same, behind Envoy (sluice-extproc), where Envoy routes each
// request and sends the adapter no body: see [BehindEnvoy].
var behindEnvoy = strings.NewReplacer(
	sluicePicks, "Sluice picks no endpoint: Envoy sends each admitted request to an endpoint of its cluster, by its own load balancing",
	sluiceScrapes, "Envoy's cluster is the endpoints; a saturation gate scrapes the /metrics of -backend and gateway.backends itself",
	sluiceBodies, "Envoy sends sluice-extproc no body, and forwards each unchanged",
)

// BehindEnvoy returns ws as they read for a binary behind Envoy
// (sluice-extproc), where Envoy, not Sluice, picks each request's
// endpoint and the binary sees no body: the warnings [Load] gives say
// what sluice-gateway, which proxies, does instead of llm-d-router's
// scheduling, data layer and parsers. ws is not changed.
func BehindEnvoy(ws []Warning) []Warning {
	out := make([]Warning, len(ws))
	for i, w := range ws {
		w.Msg = behindEnvoy.Replace(w.Msg)
		out[i] = w
	}
	return out
}

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
		{"requestHandler", "llm-d-router's request parsers are not read: " + sluiceBodies},
		{"parser", "llm-d-router's request parser is not read: " + sluiceBodies},
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
	case strings.HasSuffix(typ, "-admitter"):
		return "an admission plugin: Sluice has no admitter, so admission is only what the gate and the band capacities refuse"
	case strings.HasSuffix(typ, "-scorer"):
		return "a scheduling scorer, which weighs endpoints for each request: " + sluicePicks
	case strings.HasSuffix(typ, "-filter"), strings.HasSuffix(typ, "-picker"), strings.HasSuffix(typ, "-profile-handler"), strings.HasSuffix(typ, "-decider"):
		return "part of llm-d-router's endpoint scheduling: " + sluicePicks
	case strings.HasSuffix(typ, "-producer"), strings.HasSuffix(typ, "-extractor"), strings.HasSuffix(typ, "-source"):
		return "llm-d-router's data layer, which feeds its scheduling: " + sluiceScrapes
	case strings.HasSuffix(typ, "-parser"):
		return "a request parser: " + sluiceBodies
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
