// Package metrics exports a Sluice flow controller's metrics to Prometheus
// under the names llm-d-router's endpoint picker uses, so that its
// dashboards and alerts carry over.
//
// A [Metrics] is a prometheus.Collector. Per-request metrics are counted by
// [Metrics.Observe], the controller's [flowcontrol.Config.Observer]; state
// metrics are read at scrape time from the controller's lock-free snapshots
// ([Metrics.Watch]) and from funcs the caller registers (a gate's
// saturation, stale endpoints or limit), so the request path pays only for two histogram
// observations and one counter increment. [Metrics.Waiting], the
// controller's [flowcontrol.Config.Waiting] hook, counts a request as it
// starts to wait; [Metrics.Revocations], its [flowcontrol.Config.Revocations]
// hook, counts in-flight eviction:
//
//	m := metrics.New(metrics.Options{InferencePool: "pool-a"})
//	cfg.Observer, cfg.Waiting, cfg.Revocations = m.Observe, m.Waiting, m.Revocations
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
//	flow_control_request_queue_duration_seconds        histogram  fairness_id, priority, outcome, time from enqueue to outcome (0 when immediate); buckets 0.1ms-60s
//	                                                              model_name, target_model_name
//	flow_control_request_enqueue_duration_seconds      histogram  fairness_id, priority, outcome  time the enqueue took, by the outcome it reached or NotYetFinalized; buckets 0.1ms-100ms
//	flow_control_requests_total                        counter    outcome, priority               requests that reached each outcome
//	flow_control_queue_size                            gauge      fairness_id, priority,          requests of the flow waiting in the band
//	                                                              model_name, target_model_name
//	flow_control_queue_bytes                           gauge      fairness_id, priority,          bytes of the flow waiting in the band
//	                                                              model_name, target_model_name
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
//	flow_control_revocations_issued_total              counter    priority                        admissions revoked, by the band revoked for
//	flow_control_revocations_total                     counter    outcome                         revocations ended: confirmed or timed_out
//	flow_control_reclaim_target                        gauge                                      what the last decision set out to free (saturation units)
//	flow_control_pending_reclaim                       gauge                                      what revocations not yet seen by the gate free
//	flow_control_revocation_confirmation_seconds       histogram                                  issue to confirmation; buckets 5ms-10s
//	datalayer_poll_errors_total                        counter    source_type                     PollError calls (model-server scrape failures)
//
// queue_size and queue_bytes are read at scrape time: for each watched
// band, one series per flow seen in it ([Metrics.Enqueued] just before a
// request is enqueued, or its first outcome), read with
// [flowcontrol.FlowController.FlowSnapshot], which holds the controller's
// lock briefly, once per flow; and a fairness_id "other" series with what
// the band holds beyond them (flows past the cap, flows not seen yet),
// present while that is not nothing. So sum by (priority) is the band's
// queue, and sum by (fairness_id) each flow's, as in llm-d-router. A
// flow's total is split by model: [Metrics.Waiting] and [Metrics.Observe]
// count what each flow has waiting per pair of model labels, and the
// part of the total that no model accounts for (requests without
// [RequestLabels], a request between its insert and its Waiting call, a
// controller without the Waiting hook) has empty model labels, as has
// the "other" flow. A flow has a series per model it has waited for in
// the band, which reads 0 once none waits, as llm-d-router's gauges do;
// a flow that never waited in the band (its requests started or were
// refused at once) has none there.
//
// model_name and target_model_name come from the [RequestLabels] a
// request carries as its [flowcontrol.Request.Tag]; a request without
// them has two empty values, as llm-d-router labels a request whose
// model it does not know. sluice-gateway reads the model from the body it
// has read anyway (flowhttp.Model), else from the x-gateway-model-name
// header; sluice-extproc, which Envoy sends the headers only, from that
// header. Sluice rewrites no model, so target_model_name is model_name:
// in llm-d-router too it is the model its rewrite chose before dispatch,
// not the one the backend names in its answer, which comes only after
// dispatch, too late for the queue's series, and in a body the gateway
// streams through unread.
//
// flow_control_request_enqueue_duration_seconds is observed once per
// request: for one whose outcome its enqueue reached (dispatched or
// refused at once), with that outcome, by Observe; for one left waiting,
// with outcome NotYetFinalized ("queued" with [DroppedReasons]), by
// Waiting as it starts to wait, as llm-d-router observes it at the end of
// its processor's enqueue. Its duration is the controller's
// [flowcontrol.Event.EnqueueTime]: from the EnqueueAndWait or Submit call
// to the outcome or the insert, lock waits included.
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
//	                                                   histogram  Sluice  fairness_id priority outcome inference_pool model_name target_model_name
//	flow_control_requests_total                        counter    llm-d   outcome priority inference_pool
//	                                                   counter    Sluice  outcome priority inference_pool
//	flow_control_queue_size                            gauge      llm-d   fairness_id priority inference_pool model_name target_model_name
//	                                                   gauge      Sluice  fairness_id priority inference_pool model_name target_model_name
//	flow_control_queue_bytes                           gauge      llm-d   fairness_id priority inference_pool model_name target_model_name
//	                                                   gauge      Sluice  fairness_id priority inference_pool model_name target_model_name
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
//	                                                   histogram  Sluice  fairness_id priority outcome inference_pool
//	flow_control_dispatch_cycle_duration_seconds       histogram  llm-d   -
//	                                                   —          Sluice
//	flow_control_revocations_issued_total              counter    llm-d   priority inference_pool
//	                                                   counter    Sluice  priority inference_pool
//	flow_control_revocations_total                     counter    llm-d   outcome inference_pool
//	                                                   counter    Sluice  outcome inference_pool
//	flow_control_reclaim_target                        gauge      llm-d   inference_pool
//	                                                   gauge      Sluice  inference_pool
//	flow_control_pending_reclaim                       gauge      llm-d   inference_pool
//	                                                   gauge      Sluice  inference_pool
//	flow_control_revocation_confirmation_seconds       histogram  llm-d   inference_pool
//	                                                   histogram  Sluice  inference_pool
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
//     is on stale_endpoints and request_enqueue_duration_seconds too.
//   - target_model_name is always model_name (see above).
//   - request_enqueue_duration_seconds times, in llm-d-router, its
//     processor goroutine's handling of an enqueue taken from a channel
//     (capacity check and insert); dispatch comes later, from its
//     dispatch loop, so an enqueue there ends Rejected… or
//     NotYetFinalized. Sluice enqueues in the caller's own call, under
//     its lock, and may dispatch the request within it, so "Dispatched"
//     is an outcome of its enqueues too; the time includes the wait for
//     the lock where llm-d-router's excludes the wait in its channel.
//     priority is the band that handled the request, as on every family
//     here; llm-d-router provisions a band for each priority asked, so
//     its requested and effective priorities are one.
//   - dispatch_cycle_duration_seconds times llm-d-router's ticker-driven
//     dispatch loop, which Sluice does not have (dispatch is event-driven).
//   - The revocation families count Sluice's in-flight eviction
//     ([flowcontrol.Eviction]) with llm-d-router's meanings, and also
//     the revocations that take back a band's guarantee
//     ([flowcontrol.BandConfig.Guarantee]), which llm-d-router does not
//     have. reclaim_target is set by the decisions that revoke something;
//     llm-d-router also sets it for a decision that finds its target
//     already pending. pending_reclaim is written at each step and, for
//     a watched controller, read from it at each scrape, so that a grace
//     that has ended shows as llm-d-router's does: see
//     [Metrics.Revocations].
//
// priority is the band that handled the request (its effective priority),
// capped at [Options.MaxPriorities] distinct values
// ([DefaultMaxPriorities], 256). fairness_id is the flow id, capped at
// [Options.MaxFairnessIDs] distinct values ([DefaultMaxFairnessIDs],
// 1,000) of at most [Options.MaxLabelLength] bytes
// ([DefaultMaxLabelLength], 128) of valid UTF-8. model_name and
// target_model_name share a cap of [Options.MaxModelNames] distinct values
// ([DefaultMaxModelNames], 1,000, as in llm-d-router), of the same length
// bound. Every value past a cap is counted as "other".
//
// # Series bounds
//
// A per-label cap bounds one label's values, not the series: a client
// chooses a fairness id (a header) and a model (the body's "model", or a
// header) together, and each pair would be a series of its own, rejected
// requests' included (300 fairness ids × 300 models once made 90,000
// series of the queue-duration histogram). So each family whose labels a
// client chooses holds at most [Options.MaxSeries] series
// ([DefaultMaxSeries], 10,000), its overflow series included:
//
//	family                                         client-chosen labels                          bound
//	flow_control_request_queue_duration_seconds    fairness_id priority model_name               MaxSeries
//	                                               target_model_name
//	flow_control_request_enqueue_duration_seconds  fairness_id priority                          MaxSeries
//	flow_control_queue_size, queue_bytes           fairness_id model_name target_model_name      MaxSeries, plus 2 per watched band
//	flow_control_requests_total                    priority                                      outcomes × (MaxPriorities + 1)
//	flow_control_revocations_issued_total          — (the band revoked for)                      bands
//	other families                                 —                                             fixed
//
// In the two histograms, the first label sets seen have series of their
// own; a new one once the family holds its cap is counted under its
// overflow series, whose fairness_id, priority, model_name and
// target_model_name are all "other" and whose outcome is its own (one
// place per outcome value is set aside for them). Such a request is still
// counted once in each histogram and under its band in
// flow_control_requests_total, so no total is lost; only its split by
// client labels is. In the queue gauges, a flow seen in a band and each
// pair of models a flow has waiting there take a place: past the cap a
// new flow's requests are read under fairness_id "other" with empty
// models, and a flow's requests of a new pair of models under
// fairness_id "other" with model_name and target_model_name "other" —
// the two series of each band beside the cap — so sum by (priority) stays
// the band's queue. The memory behind the series is bounded alike: a
// label set past a cap is not kept in any cache. So what clients send (a
// fairness id of any length, any priority under NeverPromote, any model,
// in any combination) bounds neither the series a scrape reads nor the
// memory that holds them.
//
// outcome takes
// llm-d-router's names by default ("Dispatched", "RejectedCapacity",
// "EvictedTTL", ...; see [LLMDOutcomes]) or Sluice's dropped reasons
// ([DroppedReasons]). The llm-d values are llm-d-router's QueueOutcome set
// and no other:
//
//	outcome label              flowcontrol outcome
//	Dispatched                 dispatched
//	RejectedCapacity           rejected-saturated, displacements by a fairer flow included
//	RejectedNoEndpoints        rejected-no-endpoints, never queued
//	RejectedOther              rejected-ttl-expired, rejected-context-cancelled or
//	                           rejected-shutting-down, never queued
//	EvictedTTL                 rejected-ttl-expired after queueing
//	EvictedNoEndpoints         rejected-no-endpoints after queueing
//	EvictedContextCancelled    rejected-context-cancelled after queueing
//	EvictedOther               rejected-shutting-down after queueing
//	(not counted again)        evicted-priority, evicted: revoked after its dispatch
//
// A displacement never reached a model server, so it is counted as llm-d
// counts a request refused for capacity, RejectedCapacity (rejected-saturated
// under DroppedReasons), not as a metric of its own. A request revoked
// while it runs (in-flight eviction, or a band taking back its guarantee)
// was counted Dispatched at its dispatch; llm-d-router's outcome set has
// no value for what happens after, and it counts the revocation in the
// revocation families only, so with the llm-d values the revocation
// changes no outcome series. With DroppedReasons, whose values are
// llm-d-router's dropped reasons, evicted-priority and evicted among
// them, it is counted once more in flow_control_requests_total under the
// dropped reason its client is answered with, in the band it ran in; the
// histograms observe it once, at its dispatch.
//
// A utilisation is absent for an unbounded capacity, and may exceed 1 after
// ProvisionBand shrinks a capacity below what waits. The global ones sum the
// watched bands, each read at a slightly different instant.
//
// [Reloads] is a binary's own pair of metrics, outside llm-d's names: its
// configuration reloads by result, and whether the last one succeeded.
package metrics
