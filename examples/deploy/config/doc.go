// Package config reads the YAML configuration of a Sluice gateway: the
// priority bands, fairness and capacities of a [flowcontrol.Config], the
// gate that decides when a request may start, and the server settings of
// the sluice-gateway binary. It reads two forms — Sluice's own, and
// llm-d-router's EndpointPickerConfig, so that an llm-d-router
// configuration drops in unchanged.
//
// [Parse] and [Load] return a [File]; [File.Controller] turns it into a
// flowcontrol.Config with its gate built (package
// [github.com/sluicegate/sluice/flowcontrol/gate]), and returns the saturation gate for
// the binary to feed with each model server's metrics. Every problem in a file is an
// [*Error] naming its line, column and path, such as
//
//	config: sluice.yaml:14:5: flowControl.priorityBands[1].maxRequest: unknown key (did you mean "maxRequests"?)
//
// Unknown keys, values of the wrong type or out of range, unknown policy
// names, duplicate keys or priorities and references to nothing are all
// errors; a file Parse accepts is one flowcontrol.New accepts, behind the
// gate the file sets or the saturation gate sluice-gateway puts in its
// place. What a file can only be judged on with the flags applied —
// eviction that would never find a victim, band ceilings or eviction
// behind a gate that cannot give them what they are for — [File.Check]
// reports, an error or a [Warning], at the key.
//
// # Values
//
// Capacities (maxRequests, maxBytes, maxCost, maxFlowRequests) are whole
// numbers or Kubernetes quantities, as llm-d-router writes them: 100,
// "1k" (1000), "4Mi" (4×2²⁰), "1.5G", "1e6"; a fraction rounds up. In
// Sluice's form a capacity may also be "unbounded", the default, and 0 is
// a bound that admits nothing. Durations are Go durations, as llm-d-router
// writes them: "30s", "250ms", "1m30s"; 0 may be written bare. A null
// value is the same as an absent key.
//
// # Sluice's form
//
// Every section is optional; this file sets every key (the comments give
// the flowcontrol.Config field and the default):
//
//	gateway:
//	  listen: 127.0.0.1:8080          # default: loopback only
//	  backends:                       # model servers, http or https
//	    - http://127.0.0.1:8000
//	    - http://127.0.0.1:8001
//	  scrapeInterval: 50ms            # metrics read per backend; default 50ms
//	  scrapeTimeout: 100ms            # one read's bound; default 100ms
//	  gracePeriod: 30s                # shutdown drain; default 30s
//	  drainDelay: 5s                  # served after SIGTERM, not ready; default 5s
//	  priorityHandoff:                # vLLM's body field priority from the band; default off
//	    enabled: true                 # also -priority-handoff; true alone: the defaults
//	    map: {10: -10, 0: 0, -5: 5}   # band → priority, lower served first; default -band
//	    min: -100                     # bounds of the value; default 32-bit
//	    max: 100
//
//	controller:
//	  maxRequests: 2000               # RequestCapacity, all bands; default unbounded
//	  maxBytes: 512Mi                 # ByteCapacity
//	  maxCost: unbounded              # CostCapacity (estimated tokens)
//	  defaultTTL: 30s                 # DefaultTTL; default none
//	  noEndpointsTTL: 10s             # NoEndpointsTTL; default none (sluice-gateway: 5s)
//	  fallbackPriority: 0             # FallbackPriority; default 0
//	  neverPromote: false             # NeverPromote
//	  displacement: true              # fair admission; false sets NoDisplacement
//	  eviction:                       # Eviction: in-flight eviction; default none; true: the defaults
//	    sheddableBelow: 0             # Below: victims from bands below it; default 0
//	    maxRevocationsPerDecision: 2  # MaxPerDecision; default 2
//	    confirmationGrace: 500ms      # Grace; default the gate's own lag; 0: none
//	    confirmationTimeout: 10s      # Timeout; default 10s
//	  bands:                          # default: one unbounded FCFS band at fallbackPriority
//	    - priority: 10                # required, distinct
//	      maxRequests: 100            # RequestCapacity; default unbounded
//	      maxBytes: 64Mi              # ByteCapacity
//	      maxCost: 400k               # CostCapacity
//	      maxFlowRequests: 20         # FlowRequestCapacity
//	      ttl: 5s                     # TTL; default none
//	      ordering: slo-deadline-ordering-policy   # Policy; default FCFS
//	      queue: heap                 # Queue: fifo or heap; default the policy's
//	      fairness: round-robin-fairness-policy    # Fairness; default global strict
//	      guarantee: 0.5              # Guarantee: share of the gate; default 0
//	    - priority: 0
//	      fairness:                   # deficit round robin with its parameters
//	        type: deficit-round-robin-fairness-policy
//	        quantum: 512              # default 0: adaptive
//	        weights: {tenant-a: 3}    # by flow ID; default 1
//
//	gate:                             # default: no gate, every request starts at once
//	  maxInFlight: 256                # gate.MaxInFlight
//	  saturation:                     # llm-d-router's utilization-detector
//	    queueDepthThreshold: 5
//	    kvCacheUtilThreshold: 0.8
//	    metricsStalenessThreshold: 200ms
//	    slotsPerEndpoint: 16          # each server's slots (vLLM --max-num-seqs); default none: the KV cache
//	  concurrency:                    # llm-d-router's concurrency-detector
//	    concurrencyMode: requests     # requests, tokens or hybrid
//	    maxConcurrency: 100
//	    maxTokenConcurrency: 1000000
//	    perEndpoint: false            # true: both budgets × the endpoints
//	  usageLimit:                     # band ceilings on the gate's saturation (gate.Ceiling)
//	    type: priority-holdback-policy   # or static-usage-limit-policy, soft-reflective-ceiling-policy
//	    shape: linear                 # llm-d-router's only shape
//	    domain: rank                  # rank or value
//	    minCeiling: 0.5               # the lowest band's ceiling; required
//	    maxCeiling: 1                 # the highest band's; default 1
//
// gateway.priorityHandoff hands each admitted request's band to the model
// server ([flowhttp.PriorityHandoff]): the JSON body's top-level priority,
// vLLM's field (lower is served first; run vLLM with --scheduling-policy
// priority), is set from the band that admitted the request, −band by
// default or by map, and a client's own is replaced. The map must be
// monotone (a higher band never maps to a greater value) and within min
// and max; a band it does not list takes the value of the nearest listed
// band below it, else of the lowest. -priority-handoff turns it on or off
// whatever enabled says; the map applies either way.
//
// Ordering policies are fcfs-ordering-policy, edf-ordering-policy and
// slo-deadline-ordering-policy ([OrderingPolicies]); fairness policies are
// global-strict-fairness-policy, round-robin-fairness-policy and
// deficit-round-robin-fairness-policy ([FairnessPolicies]). The gate's
// defaults are llm-d-router's. Each part of the gate that is set is one
// gate; with several, a request starts only when every one admits it
// ([gate.All]).
//
// usageLimit gives each band a ceiling on the saturation of that gate (the
// largest of its parts' saturations: requests in flight ÷ maxInFlight, the
// concurrency budget's use, the share of the model servers' slots in use
// — running or queued ÷ slotsPerEndpoint, or their KV cache if fuller —
// or, without slotsPerEndpoint, of their KV cache; never the depth of
// their queues, which only decides what the saturation gate admits): a band starts a
// request only while the saturation is below its ceiling, so a batch band
// held to 0.5 leaves half the gate to the bands above it ([gate.Ceiling]).
// It needs one of the other parts. Its policies are llm-d-router's usage-limit
// policies ([UsageLimitPolicies]) with their parameters:
// static-usage-limit-policy (threshold, default 1: one ceiling for every
// band), priority-holdback-policy (shape, domain, minCeiling, maxCeiling:
// ceilings spaced from maxCeiling at the highest band to minCeiling at the
// lowest) and soft-reflective-ceiling-policy (no parameters; the name alone,
// "usageLimit: soft-reflective-ceiling-policy", will do).
// The scrape interval must be shorter than the saturation gate's
// metricsStalenessThreshold, or every endpoint would read as stale.
//
// eviction turns on in-flight eviction ([flowcontrol.Eviction]): when the
// gate refuses a band's head, the most recently dispatched requests of
// bands below both it and sheddableBelow (0: the negative bands, as in
// llm-d-router) are revoked, at most maxRevocationsPerDecision at a time;
// the next decision waits until they are confirmed (their requests
// stopped) and confirmationGrace has passed, or confirmationTimeout has.
// "eviction: true" is llm-d-router's enableEviction with its defaults. A
// confirmationGrace left out is the gate's own lag (its
// [gate.LagGate]), none for a gate that counts its slots; 0 is
// none. A band's guarantee is its share of the gate's capacity
// ([flowcontrol.BandConfig.Guarantee]), a fraction in [0, 1], lent to
// other bands while it is idle and taken back by revoking the borrowers'
// requests; the guarantees of all bands add up to at most 1.
//
// # llm-d-router's form
//
// A file with a kind (which must be EndpointPickerConfig) or any of
// llm-d-router's top-level sections is read as llm-d-router's whole
// EndpointPickerConfig:
//
//	apiVersion: llm-d.ai/v1alpha1
//	kind: EndpointPickerConfig
//	featureGates:
//	- flowControl
//	plugins:
//	- type: queue-scorer
//	- name: fair
//	  type: round-robin-fairness-policy
//	- type: concurrency-detector
//	  parameters:
//	    maxConcurrency: 128
//	schedulingProfiles:
//	- name: default
//	  plugins:
//	  - pluginRef: queue-scorer
//	flowControl:
//	  maxBytes: "8Gi"
//	  maxRequests: "2k"
//	  defaultRequestTTL: "45s"
//	  noEndpointRequestTTL: "20s"
//	  saturationDetector:
//	    pluginRef: concurrency-detector
//	  defaultPriorityBand:
//	    maxRequests: "300"
//	  priorityBands:
//	  - priority: 100
//	    maxRequests: "400"
//	    fairnessPolicyRef: fair
//	    orderingPolicyRef: edf-ordering-policy
//
// It maps onto the same [File], with llm-d-router's meanings and defaults:
//   - flowControl.maxRequests and maxBytes are the controller-wide
//     capacities; omitted or 0, unbounded.
//   - defaultRequestTTL is DefaultTTL, 60s when omitted; "0s" is none.
//   - noEndpointRequestTTL is NoEndpointsTTL: with no endpoint up, a
//     request ends rejected-no-endpoints once it has waited that long.
//     A value up to defaultRequestTTL means what it means to llm-d-router.
//     Sluice never lengthens a request's TTL, so a value of 0 or above
//     defaultRequestTTL is a warning and leaves the wait bounded by
//     defaultRequestTTL. Omitted, llm-d-router follows defaultRequestTTL
//     and so does File.Flow (NoEndpointsTTL 0); sluice-gateway applies its
//     own short default instead (see its README), as [File.Wrote] tells it.
//   - priorityBands[] are the bands: a band's maxRequests is 5000 and its
//     maxBytes 1G when omitted or 0; its ordering is FCFS and its
//     fairness global strict unless orderingPolicyRef or
//     fairnessPolicyRef says otherwise.
//   - defaultPriorityBand (and defaultNegativePriorityBand for priorities
//     below 0) is the band llm-d-router provisions for a priority it has
//     not seen: see [File.DynamicBand]. Its band at priority 0 is
//     provisioned at start unless priorityBands lists 0, and it is the
//     fallback band for every priority with no band of its own.
//   - A full band rejects (NoDisplacement), as in llm-d-router.
//   - saturationDetector.pluginRef (or the deprecated top-level
//     saturationDetector) names the gate: a utilization-detector plugin is
//     the saturation gate, a concurrency-detector the concurrency gate,
//     with their parameters (headroom is checked and unused: it widens
//     llm-d-router's per-endpoint routing filter). The concurrency
//     detector's budgets are per endpoint, so the gate's are those times
//     the number of endpoints ([Concurrency.PerEndpoint]). Unset, the gate is the
//     utilization-detector with its defaults, as in llm-d-router. Sluice's
//     gate section may replace it, but not stand beside it.
//   - usageLimitPolicyPluginRef names the usage-limit policy, which puts
//     the gate inside band ceilings ([Gate.UsageLimit], [gate.Ceiling]):
//     static-usage-limit-policy (threshold), priority-holdback-policy
//     (shape, domain rank or value, minCeiling, maxCeiling; its newer
//     explicit domain is refused) or soft-reflective-ceiling-policy (no
//     parameters), with llm-d-router's defaults. Unset, there are no
//     ceilings: llm-d-router's default, a static threshold of 1, stops
//     nothing the gate does not. The gate section may carry it instead,
//     but not both. The ceilings are a share of the gate's capacity, and
//     behind the utilization-detector that is the servers' KV-cache use:
//     for a share of their slots, replace the detector with Sluice's gate
//     section and its saturation.slotsPerEndpoint, which llm-d-router's
//     utilization-detector has no key for.
//   - enableEviction: true turns on in-flight eviction with
//     llm-d-router's defaults ([flowcontrol.Eviction]'s zero value):
//     when the gate refuses a band, the most recently dispatched requests
//     of the sheddable bands (priority below 0) below it are revoked, at
//     most 2 a decision, each decision waiting for the last one's
//     confirmation (or its 10s timeout) and the gate's own lag. A revoked
//     request ends evicted-priority (429).
//   - Sluice's extensions, which are not llm-d-router's keys (its strict
//     loader refuses a file that has them): flowControl.eviction, the
//     mapping of Sluice's controller.eviction (sheddableBelow,
//     maxRevocationsPerDecision, confirmationGrace, confirmationTimeout),
//     tunes what enableEviction: true turns on, and is an error without
//     it; priorityBands[].guarantee is a listed band's guarantee, as in
//     Sluice's form (a template, defaultPriorityBand or
//     defaultNegativePriorityBand, may not have one).
//
// A policy reference names a plugin, as in llm-d-router: the plugins entry
// of that name (an entry without a name is named by its type), whose type
// must be a policy Sluice has; a reference that names no plugin is read
// as a type name, as llm-d-router does for the defaults it registers
// itself. The plugins of the types above have their parameters checked,
// whether referred to or not. Plugins of llm-d-router's other types
// (scorers, filters, pickers, profile handlers, data producers, parsers,
// the admitters), schedulingProfiles, dataLayer, requestHandler
// and parser are llm-d-router's scheduling, data layer and admission: they
// are read past, each with a [Warning] at its line that says what is lost
// (an admitter's says when the file's gate, written to leave admission to
// it, then admits nearly everything). A plugin type that neither Sluice
// nor llm-d-router has is an error at its line, as llm-d-router fails to
// start with it. The featureGates list is checked for form. llm-d-router
// runs no flow control at all without the flowControl gate (off by
// default): it sends every request to an endpoint at once. Sluice queues
// every request whether or not the file enables it, with a warning when
// it does not (at the flowControl section that llm-d-router would not
// apply, or else at featureGates), and warns of every other gate it
// enables. A gateway section may go with either
// form; Sluice's controller section may not be mixed with llm-d-router's.
package config
