// Package deploy is Sluice's product: sluice-gateway (cmd/sluice-gateway),
// the gateway an operator deploys in front of vLLM, installed with go
// install ./cmd/sluice-gateway from this module and checked with
// -check-config. It is built from this module's packages, each usable
// alone and reused by examples/extproc — configuration from a YAML file
// ([github.com/sluicegate/sluice/examples/deploy/config]), Prometheus
// metrics under llm-d-router's names
// ([github.com/sluicegate/sluice/examples/deploy/metrics]), a vLLM metrics
// scraper ([github.com/sluicegate/sluice/examples/deploy/vllm]) and health
// probes ([github.com/sluicegate/sluice/examples/deploy/probe]) — and holds
// no code itself.
//
// # Threat model
//
// sluice-gateway faces clients and model servers, and trusts neither; the
// operator's configuration file and flags are trusted. Each bound below is
// a named default: the flag or field that changes it is beside it.
//
// A client may send:
//   - slow bytes: headers within 10 s (readHeaderTimeout in
//     cmd/sluice-gateway), a body within 30 s
//     (flowhttp.DefaultBodyReadTimeout; 408 after), and an idle kept-alive
//     connection is closed after 2 min (idleTimeout). A client that stalls
//     holds a goroutine and a buffer no longer than that, and never queues.
//   - large messages: headers up to 1 MB (net/http's
//     http.DefaultMaxHeaderBytes, maxHeaderBytes; 431 beyond), a body up to
//     -max-body-bytes (flowhttp.DefaultMaxBodyBytes, 4 MiB; 413 beyond),
//     read whole before queueing, so a queued request holds at most that.
//   - any max_tokens: its cost is flowhttp.EstimateTokens, clamped to
//     -max-tokens (flowhttp.DefaultMaxTokens, 131,072) and saturating, so
//     no request claims more than a model's context of a token budget or
//     a cost capacity, whatever number, string or nesting it sends.
//   - any fairness id and, with NeverPromote, any priority: the controller
//     keys waiting flows by the id, and the metrics bound both labels
//     (metrics.DefaultMaxFairnessIDs, 1,000 ids of at most
//     metrics.DefaultMaxLabelLength, 128 bytes, of UTF-8;
//     metrics.DefaultMaxPriorities, 256): every value past a cap is
//     counted as "other", so neither a scrape's size nor the memory behind
//     it grows with what clients send.
//   - a TTL (x-llm-d-inference-ttl), which can only shorten its wait, and
//     a disconnect, which takes it out of the queue or frees its slot at
//     once.
//
// A model server may send:
//   - the router's own headers (flowhttp.RouterOwnedHeaders: the headroom
//     under both names, the queue duration, the dropped reason) in its
//     headers, its 1xx headers, its trailers or Trailer:-prefixed keys, in
//     any letter case: every copy is removed before the gateway sets its
//     own, so it cannot advertise room, claim a queue time or mark a
//     dispatched request dropped.
//   - a metrics page, scraped for the saturation gate by package vllm,
//     which bounds its size (vllm.DefaultMaxBodyBytes, 4 MiB) and its time
//     (vllm.DefaultTimeout, 500 ms, or gateway.scrapeTimeout) and refuses
//     a page it cannot read, or a reading that is not a number in range
//     (NaN, negative, a utilisation above 1): the backend then has no
//     fresh reading and the gate counts it saturated (fails closed).
//   - a response of any size and duration, streamed to the client as it
//     comes and never buffered; it holds its slot until it ends or the
//     client goes away.
//
// What the gateway answers itself carries an OpenAI-shaped error body of
// bounded size that names no internal address.
package deploy
