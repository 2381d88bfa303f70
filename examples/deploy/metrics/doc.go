// Package metrics exports a Sluice flow controller's metrics to Prometheus
// under the names llm-d-router's endpoint picker uses, so that its
// dashboards and alerts carry over.
//
// A [Metrics] is a prometheus.Collector. Per-request metrics are counted by
// [Metrics.Observe], the controller's [flowcontrol.Config.Observer]; state
// metrics are read at scrape time from the controller's lock-free snapshots
// ([Metrics.Watch]) and from funcs the caller registers (a gate's
// saturation, stale endpoints or limit), so the request path pays only for one histogram
// observation and one counter increment:
//
//	m := metrics.New(metrics.Options{InferencePool: "pool-a"})
//	cfg.Observer = m.Observe
//	c, err := flowcontrol.New(cfg)
//	...
//	m.Watch(c, cfg)
//	m.PoolSaturation(saturationGate.Saturation)
//	registry.MustRegister(m)
//
// # Metrics
//
// Every name starts with llm_d_epp_. With [Options.InferencePool] set,
// every flow_control_* series also carries inference_pool. Metrics marked
// Sluice have no llm-d-router counterpart; the others have its name, type
// and label names (llm-d's queue_size and queue_bytes are per flow, these
// are per band, and Sluice has no model_name labels).
//
//	metric                                             type       labels                          meaning
//	flow_control_request_queue_duration_seconds        histogram  fairness_id, priority, outcome  time from enqueue to outcome (0 when immediate); buckets 0.1ms-60s
//	flow_control_requests_total                        counter    outcome, priority               requests that reached each outcome
//	flow_control_queue_size                            gauge      priority                        requests waiting in the band
//	flow_control_queue_bytes                           gauge      priority                        bytes waiting in the band
//	flow_control_queue_cost                            gauge      priority                        cost (estimated tokens) waiting in the band; Sluice
//	flow_control_capacity_utilization_requests         gauge      priority                        waiting requests / band request capacity, if bounded
//	flow_control_capacity_utilization_bytes            gauge      priority                        waiting bytes / band byte capacity, if bounded
//	flow_control_capacity_utilization_cost             gauge      priority                        waiting cost / band cost capacity, if bounded; Sluice
//	flow_control_global_capacity_utilization_requests  gauge                                      waiting requests / global request capacity, if bounded
//	flow_control_global_capacity_utilization_bytes     gauge                                      waiting bytes / global byte capacity, if bounded
//	flow_control_global_capacity_utilization_cost      gauge                                      waiting cost / global cost capacity, if bounded; Sluice
//	flow_control_requests_in_flight                    gauge                                      dispatched, not yet done; Sluice
//	flow_control_gate_refusals_total                   counter                                    offers the gate refused; Sluice
//	flow_control_pool_saturation                       gauge      stage="effective"               the func given to PoolSaturation
//	flow_control_stale_endpoints                       gauge      detector                        the func given to StaleEndpoints
//	flow_control_gate_limit                            gauge                                      the func given to GateLimit; Sluice
//	datalayer_poll_errors_total                        counter    source_type                     PollError calls (model-server scrape failures)
//
// priority is the band that handled the request (its effective priority),
// capped at [Options.MaxPriorities] distinct values
// ([DefaultMaxPriorities], 256). fairness_id is the flow id, capped at
// [Options.MaxFairnessIDs] distinct values ([DefaultMaxFairnessIDs],
// 1,000) of at most [Options.MaxLabelLength] bytes
// ([DefaultMaxLabelLength], 128) of valid UTF-8. Every value past a cap is
// counted as "other", so what clients send (a fairness id of any length,
// any priority under NeverPromote) bounds neither the series a scrape
// reads nor the memory that holds them. outcome takes
// llm-d-router's names by default ("Dispatched", "RejectedCapacity",
// "EvictedTTL", ...; see [LLMDOutcomes]) or Sluice's dropped reasons
// ([DroppedReasons]). Displacement by a fairer flow is an outcome
// (EvictedQueuePressure), not a metric of its own.
//
// A utilisation is absent for an unbounded capacity, and may exceed 1 after
// ProvisionBand shrinks a capacity below what waits. The global ones sum the
// watched bands, each read at a slightly different instant.
//
// [Reloads] is a binary's own pair of metrics, outside llm-d's names: its
// configuration reloads by result, and whether the last one succeeded.
package metrics
