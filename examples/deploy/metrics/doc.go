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
// Sluice have no llm-d-router counterpart; the others have its name and
// type, and the label names the table below compares.
//
//	metric                                             type       labels                          meaning
//	flow_control_request_queue_duration_seconds        histogram  fairness_id, priority, outcome  time from enqueue to outcome (0 when immediate); buckets 0.1ms-60s
//	flow_control_requests_total                        counter    outcome, priority               requests that reached each outcome
//	flow_control_queue_size                            gauge      fairness_id, priority           requests of the flow waiting in the band
//	flow_control_queue_bytes                           gauge      fairness_id, priority           bytes of the flow waiting in the band
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
// queue_size and queue_bytes are read at scrape time: for each watched
// band, one series per flow seen in it ([Metrics.Enqueued] just before a
// request is enqueued, or its first outcome), read with
// [flowcontrol.FlowController.FlowSnapshot], which holds the controller's
// lock briefly, once per flow; and a fairness_id "other" series with what
// the band holds beyond them (flows past the cap, flows not seen yet),
// present while that is not nothing. So sum by (priority) is the band's
// queue, and sum by (fairness_id) each flow's, as in llm-d-router.
//
// # Side by side with llm-d-router
//
// Each family of llm-d-router's endpoint picker in flow control, and each
// of Sluice's, with its type and label names in llm-d-router (as its
// pkg/epp/metrics defines them) and here (with InferencePool set; a test
// checks this column against what a Metrics registers). "—" is a family
// one side does not have; "-" a family without labels.
//
//	metric                                             type       who     labels
//	flow_control_request_queue_duration_seconds        histogram  llm-d   fairness_id priority outcome inference_pool model_name target_model_name
//	                                                   histogram  Sluice  fairness_id priority outcome inference_pool
//	flow_control_requests_total                        counter    llm-d   outcome priority inference_pool
//	                                                   counter    Sluice  outcome priority inference_pool
//	flow_control_queue_size                            gauge      llm-d   fairness_id priority inference_pool model_name target_model_name
//	                                                   gauge      Sluice  fairness_id priority inference_pool
//	flow_control_queue_bytes                           gauge      llm-d   fairness_id priority inference_pool model_name target_model_name
//	                                                   gauge      Sluice  fairness_id priority inference_pool
//	flow_control_capacity_utilization_requests         gauge      llm-d   priority inference_pool
//	                                                   gauge      Sluice  priority inference_pool
//	flow_control_capacity_utilization_bytes            gauge      llm-d   priority inference_pool
//	                                                   gauge      Sluice  priority inference_pool
//	flow_control_global_capacity_utilization_requests  gauge      llm-d   inference_pool
//	                                                   gauge      Sluice  inference_pool
//	flow_control_global_capacity_utilization_bytes     gauge      llm-d   inference_pool
//	                                                   gauge      Sluice  inference_pool
//	flow_control_pool_saturation                       gauge      llm-d   inference_pool stage
//	                                                   gauge      Sluice  inference_pool stage
//	flow_control_stale_endpoints                       gauge      llm-d   detector
//	                                                   gauge      Sluice  detector inference_pool
//	datalayer_poll_errors_total                        counter    llm-d   source_type
//	                                                   counter    Sluice  source_type
//	flow_control_request_enqueue_duration_seconds      histogram  llm-d   fairness_id priority outcome
//	                                                   —          Sluice
//	flow_control_dispatch_cycle_duration_seconds       histogram  llm-d   -
//	                                                   —          Sluice
//	flow_control_revocations_issued_total              counter    llm-d   priority inference_pool
//	                                                   —          Sluice
//	flow_control_revocations_total                     counter    llm-d   outcome inference_pool
//	                                                   —          Sluice
//	flow_control_reclaim_target                        gauge      llm-d   inference_pool
//	                                                   —          Sluice
//	flow_control_pending_reclaim                       gauge      llm-d   inference_pool
//	                                                   —          Sluice
//	flow_control_revocation_confirmation_seconds       histogram  llm-d   inference_pool
//	                                                   —          Sluice
//	flow_control_queue_cost                            —          llm-d
//	                                                   gauge      Sluice  priority inference_pool
//	flow_control_capacity_utilization_cost             —          llm-d
//	                                                   gauge      Sluice  priority inference_pool
//	flow_control_global_capacity_utilization_cost      —          llm-d
//	                                                   gauge      Sluice  inference_pool
//	flow_control_requests_in_flight                    —          llm-d
//	                                                   gauge      Sluice  inference_pool
//	flow_control_gate_refusals_total                   —          llm-d
//	                                                   counter    Sluice  inference_pool
//	flow_control_gate_limit                            —          llm-d
//	                                                   gauge      Sluice  inference_pool
//
// Where they differ, and why:
//   - inference_pool is always a label in llm-d-router (empty for no
//     pool); here it is present only with [Options.InferencePool], and it
//     is on stale_endpoints too.
//   - model_name and target_model_name: Sluice's per-request families are
//     counted by the controller's Observer, whose events carry the flow
//     key and the outcome but no request field, and its queue gauges are
//     read per flow from the controller, which keeps no model; a model
//     label needs the request's model carried to the outcome (a field of
//     the controller's Event, or a hook in flowhttp and ext_proc), which
//     this package does not add. Sluice rewrites no model, so
//     target_model_name would equal model_name.
//   - request_enqueue_duration_seconds times, in llm-d-router, its
//     processor goroutine's handling of an enqueue (capacity check and
//     insert, labelled with the outcome if one was reached, else
//     NotYetFinalized). Sluice enqueues in the caller's own call, under
//     its lock, and neither flowhttp nor ext_proc has a hook around that
//     call's synchronous part, so it is not exported rather than
//     approximated.
//   - dispatch_cycle_duration_seconds times llm-d-router's ticker-driven
//     dispatch loop, which Sluice does not have (dispatch is event-driven);
//     the revocation and reclaim families are llm-d-router's in-flight
//     eviction, which Sluice does not do.
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
