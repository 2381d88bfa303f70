// Package sluice is a library of flow-control primitives for LLM inference
// routers and gateways: the pieces that decide whether and when a request may
// go on to a model server, in which order waiting requests leave, and what
// the router tells its callers about the room left. This package holds no
// code; the primitives are its packages, each usable on its own.
//
// # Packages
//
//   - [github.com/sluicegate/sluice/capacity]: the read-only Reader of one
//     band's capacity and queued length, and the Snapshot value it returns.
//   - [github.com/sluicegate/sluice/headroom]: the pure headroom function
//     (capacity − queued, clamped at 0) and the router-owned header
//     x-llm-d-flow-band-headroom-requests, stamped at response time from a
//     capacity.Reader.
//   - [github.com/sluicegate/sluice/headroom/window]: what an upstream
//     dispatcher imports to size its window of requests in flight from a
//     router's responses (headroom, queue duration, dropped reason,
//     Retry-After).
//   - [github.com/sluicegate/sluice/ordering]: the order requests leave a
//     band in: the items policies read, the policies (FCFS, EDF,
//     SLO-deadline), whose keys are derived once, at enqueue, and the FIFO
//     list and heap order the queues keep.
//   - [github.com/sluicegate/sluice/flowcontrol]: the FlowController:
//     priority bands with capacities and TTLs, effective-priority fallback,
//     flows and fairness within a band, event-driven strict-priority
//     dispatch through a gate, Retry-After, and the optional features —
//     give-way (ceilings, guarantees and lending, in-flight eviction), the
//     no-endpoints wait, the lock-free path — each with one owner. It
//     implements capacity.Reader.
//   - [github.com/sluicegate/sluice/flowcontrol/gate]: the gate contracts
//     (Gate and its optional extensions, MaxInFlight) and the gates that
//     read the model servers: saturation, concurrency, adaptive, their
//     composition, and llm-d's band ceilings. It does not import
//     flowcontrol: a router runs a gate alone through gate.Serial.
//   - [github.com/sluicegate/sluice/flowcontrol/fleet]: the state replicas
//     of a router share (per band: waiting, in flight, demand), the Store
//     contract a shared medium keeps, and an in-memory Store. It imports
//     nothing of Sluice's; the Redis store is in examples/deploy.
//   - [github.com/sluicegate/sluice/flowcontrol/flowhttp]: net/http glue:
//     classifies a request, admits it through a FlowController, answers a
//     refusal (status, dropped reason, Retry-After, an OpenAI-shaped body)
//     and stamps the router's headers at response time.
//   - internal/dheap: the generic 4-ary heap, with handles, under the
//     priority queues.
//   - internal/header: the header-name rules the packages share (ASCII case
//     folding, one deterministic lookup).
//   - internal/openaierror: the OpenAI API's error object, for the examples'
//     model server, sluice-gateway and their tests.
//   - internal/clocktest, internal/pipenet, internal/gatetest,
//     internal/testhttp and internal/clitest, for tests only: a clock that
//     moves when the test moves it, an in-memory network for servers inside
//     a testing/synctest bubble, test gates, HTTP fixtures, and the
//     command-line checks of the binaries.
//   - examples: runnable programs, indexed in examples/README.md — the demo
//     gateway, the simulations (one simulator, examples/internal/sim, that
//     runs the real FlowController on a virtual clock), a vLLM-like model
//     server and a dispatcher client. The product, sluice-gateway with its
//     configuration, metrics and vLLM scraper, is the nested module
//     examples/deploy; the Envoy ext_proc adapter is the nested module
//     examples/extproc. Their heavy dependencies (gRPC, Envoy, Prometheus,
//     YAML) stay out of this module.
//
// # Direction of imports
//
// Each package imports only packages above it in this list:
//
//	capacity              nothing of Sluice's
//	internal/header       nothing of Sluice's
//	internal/dheap        nothing of Sluice's
//	internal/openaierror  nothing of Sluice's
//	headroom              capacity, internal/header
//	headroom/window       headroom
//	ordering              internal/dheap, internal/header
//	flowcontrol/gate      nothing of Sluice's
//	flowcontrol/fleet     nothing of Sluice's
//	flowcontrol           capacity, ordering, flowcontrol/gate, internal/dheap
//	flowcontrol/flowhttp  flowcontrol, headroom, capacity, internal/header
//	examples/...          any of the above
//
// headroom never imports flowcontrol: a router with its own flow registry
// stamps headroom with nothing but a capacity.Reader of its own. A router
// that only needs a gate imports flowcontrol/gate, and one that only needs
// an order imports ordering.
package sluice
