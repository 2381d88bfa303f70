// Package sluice is a library of flow-control primitives for LLM inference
// routers and gateways: the pieces that decide whether and when a request may
// go on to a model server, in which order waiting requests leave, and what
// the router tells its callers about the room left.
//
// Each package is usable on its own, and the arrows between them point one
// way:
//
//   - [github.com/sluicegate/sluice/capacity]: the narrow, read-only Reader of
//     one band's capacity and length, and the value types it returns.
//   - [github.com/sluicegate/sluice/headroom]: the pure headroom function
//     (capacity − length, clamped at 0) and the router-owned advisory header
//     x-llm-d-flow-band-headroom-requests, sampled at response time.
//   - [github.com/sluicegate/sluice/ordering]: ordering policies (FCFS, EDF,
//     SLO-deadline) whose keys are derived once at enqueue, over FIFO and
//     d-ary heap queues.
//   - [github.com/sluicegate/sluice/flowcontrol]: the FlowController —
//     priority bands with capacities and TTLs, effective-priority fallback,
//     cancellation, and event-driven strict-priority dispatch through a
//     pluggable gate. It implements capacity.Reader.
//   - [github.com/sluicegate/sluice/flowcontrol/flowhttp]: net/http glue that
//     admits at request time and stamps the router's headers at response
//     time.
//
// A router with its own flow registry can use headroom with nothing but a
// capacity.Reader of its own; a router that only needs ordering can use the
// queues without the controller.
package sluice
