// Package gate holds the gate contracts and the gates built on them. A
// gate decides whether one more request may start: [Gate] is the contract,
// with its optional extensions ([MeteredGate], [FirstTokenGate],
// [BoundGate], [EndpointGate], [SaturationDetector], [CeilingGate],
// [LagGate], [CountGate]); [MaxInFlight] is the plain in-flight limit, and
// [PriorityMaxInFlight] the same for model servers that schedule by the
// priority the router hands them. A
// flowcontrol.FlowController dispatches through a gate; a router without
// one runs a gate through [Serial], which serializes its methods and
// follows its contracts. The package imports nothing of Sluice's.
//
// The gates here go further than a fixed limit: a gate that reads the
// model servers' own metrics ([Saturation]), a budget of requests and
// estimated tokens in flight ([Concurrency]), a limit learned from the
// time to first token ([Adaptive]), one that refuses while the router
// knows no model server to be up ([Endpoints]), so that requests end
// rejected-no-endpoints instead of waiting out their TTL, and [All],
// which composes them.
//
// Each of them is a [SaturationDetector]: it reports how full
// it is, as a share of its capacity — slots, tokens, or the model
// servers' declared slots or KV cache for the saturation gate, never the
// depth of their queues — and [Ceiling] gives each band a ceiling on that
// saturation, set by
// one of llm-d-router's usage-limit policies ([UsageLimitPolicy]):
// [StaticUsageLimit], [PriorityHoldback] and [SoftReflectiveCeiling]. A
// band may start a request only while the saturation is below its
// ceiling, so a batch band held to half the slots leaves the other half to
// interactive traffic the moment it comes: strict priority decides who
// starts next, and a ceiling keeps a low band from taking every slot
// before a high one needs them.
//
// The first two gates mirror llm-d-router's saturation detectors, and the
// three policies its usage-limit policies; their parameters are named
// beside llm-d's, with the defaults, which are llm-d's (llm-d has no
// adaptive detector):
//
//	Sluice                                  llm-d-router                                   default
//	SaturationConfig.QueueDepthThreshold    utilization-detector queueDepthThreshold       5
//	SaturationConfig.KVCacheUtilThreshold   utilization-detector kvCacheUtilThreshold      0.8
//	SaturationConfig.MetricsStalenessThreshold  utilization-detector metricsStalenessThreshold  200ms
//	ConcurrencyConfig.Mode                  concurrency-detector concurrencyMode           "requests"
//	ConcurrencyConfig.MaxConcurrency        concurrency-detector maxConcurrency            100
//	ConcurrencyConfig.MaxTokenConcurrency   concurrency-detector maxTokenConcurrency       1000000
//	SaturationConfig.SlotsPerEndpoint       (none)                                         0 (none: the KV cache)
//	SaturationConfig.PriorityScheduling     (none)                                         false
//	SaturationConfig.Replicas, Replica      (none)                                         1, 0
//	StaticUsageLimit(threshold)             static-usage-limit-policy threshold            1
//	PriorityHoldbackConfig.Shape            priority-holdback-policy shape                 "linear"
//	PriorityHoldbackConfig.Domain           priority-holdback-policy domain                "rank"
//	PriorityHoldbackConfig.MinCeiling       priority-holdback-policy minCeiling            (required, above 0)
//	PriorityHoldbackConfig.MaxCeiling       priority-holdback-policy maxCeiling            1
//	SoftReflectiveCeiling()                 soft-reflective-ceiling-policy                 (no parameters)
//
// The adaptive gate's own defaults are InitialLimit 100, MinLimit 1,
// MaxLimit 10,000, Backoff 0.9 and Increase 0.1; TargetFirstToken has none
// and must be set.
//
// A gate's methods are serialized by its caller: a controller calls them
// with its lock held, a [Serial] with its own. Their TryAcquire reads no
// clock and allocates nothing. A gate whose state changes for reasons its
// caller cannot see — the saturation gate, when fresh metrics arrive —
// nudges the [Controller] it is bound to itself, so a controller still
// runs no goroutine of its own. Each gate instance serves one controller.
//
// Nothing a client or a model server sends can make a gate fail open:
// costs (a client's max_tokens) are summed exactly, never wrapping, up to
// math.MaxInt64 each ([ConcurrencyGate]); limits and rooms saturate at
// their bounds, math.MaxInt included ([AdaptiveGate], [SaturationGate]);
// a metrics reading that is not a finite number in range counts as
// saturated, as stale metrics do ([Metrics]), and a configuration
// threshold that is NaN or infinite is refused by the constructor.
//
// Which to use: the saturation gate where the model servers' metrics can
// be scraped — it sees a change of capacity at the next scrape; the
// adaptive gate where they cannot — it learns from each response's time
// to first token as the caller reports it; the concurrency gate as a
// ceiling beside either, through All. The simulation in examples/gates
// measures them against fixed limits on a pool whose capacity changes;
// examples/gates/README.md has its command, its tables and the gates'
// benchmarks.
package gate
