// Command sluice-gateway is a reverse proxy in front of OpenAI-compatible
// model servers (vLLM) that admits every request through a Sluice flow
// controller: priority bands, fairness between flows, a queue-wait TTL, and
// a gate that starts requests only while the model servers have room.
//
//	go run ./examples/modelserver/cmd/fake-vllm -n 2      # http://127.0.0.1:8001, :8002
//	cd examples/deploy
//	go run ./cmd/sluice-gateway -backend http://127.0.0.1:8001 -backend http://127.0.0.1:8002
//
// It listens on 127.0.0.1:8080 unless told otherwise (-listen, or
// gateway.listen in the file) and serves:
//
//	/metrics   Prometheus metrics: llm-d-router's llm_d_epp_flow_control_*
//	           names (package metrics), the scrapes' llm_d_epp_datalayer_poll_errors_total,
//	           sluice_gateway_backend_requests_in_flight{backend},
//	           sluice_gateway_backend_responses_total{backend,code_class},
//	           sluice_gateway_backend_outlier_ejections_total{backend},
//	           sluice_gateway_backend_outlier_ejected{backend},
//	           sluice_gateway_config_reloads_total{result},
//	           sluice_gateway_config_last_reload_successful and
//	           sluice_gateway_build_info{version,revision,goversion}
//	/healthz   200 while the process runs
//	/readyz    200 while it admits; 503 and the reason once shutdown has
//	           begun, with no backend, while no backend is up (naming
//	           each and why), or while the saturation gate fails closed
//	           (no backend has fresh metrics)
//	inference  (-inference-path; by default POST /v1/completions,
//	           /v1/chat/completions, /v1/embeddings and /v1/responses)
//	           admitted through flow control (package flowhttp) and
//	           proxied to a backend, streamed responses flushed as they come
//	anything else (GET /v1/models, /health, /tokenize, ...) proxied to a
//	           backend at once: neither queued nor gated, never 429
//
// # Fleet
//
// With -fleet-redis host:port (or gateway.fleet.redis) the gateway is one
// replica of a fleet that shares its flow-control state in Redis (package
// redisfleet): -max-inflight and each band's maxRequests are the whole
// fleet's, divided among the replicas by demand every -fleet-period. With
// Redis down or stale a replica takes the static share (1/-fleet-replicas)
// and stays ready: /readyz answers 200 "ready (fleet fallback ...)", and
// sluice_gateway_fleet_fallback{reason} says so. See the deploy guide
// (README.md) for the flags, the metrics and the faults.
//
// -version prints the version, VCS revision and Go version and exits.
//
// # Configuration
//
// Flags, and the -config file ([github.com/sluicegate/sluice/examples/deploy/config]:
// Sluice's form, or llm-d-router's EndpointPickerConfig with its flowControl
// section). A flag that is given wins over the file: -listen over
// gateway.listen, -grace-period over gateway.gracePeriod, -max-inflight
// over the file's gate; -backend URLs are added to gateway.backends.
//
// Without -config there is one band, priority 0, with llm-d-router's
// defaults (5000 requests, 1 GB, a 60 s queue-wait TTL). The gate is
// -max-inflight N when given; else the file's (Sluice's gate section, or
// llm-d-router's saturationDetector); else llm-d-router's
// utilization-detector with its defaults (a backend is saturated at 5
// waiting requests or 80% KV cache, and its metrics are stale after
// 200 ms), fed by scraping every backend's /metrics every
// gateway.scrapeInterval (50 ms). Whatever the gate, with no backend up a
// request ends 503 rejected-no-endpoints after the no-endpoints TTL:
// controller.noEndpointsTTL, or llm-d-router's
// flowControl.noEndpointRequestTTL, else 5 s.
//
// # Classification
//
// x-llm-d-inference-fairness-id names a request's flow; its band is
// -default-priority, or its objective's (x-llm-d-inference-objective, with
// -objective name=priority), or -priority-header's value; and
// x-llm-d-inference-ttl can shorten its queue wait. Its cost, which a
// concurrency gate in tokens mode, a cost capacity and deficit round robin
// count, is an estimate of its tokens without a tokenizer: the body's
// bytes ÷ 4 plus its max_completion_tokens or max_tokens, at most
// -max-tokens (the model's context; 131,072 by default). In llm-d-router's
// form, each priority the flags can give that the file does not list gets
// a band from the file's default band template at start, as llm-d-router
// would provision on first sight; other unlisted priorities go to the
// fallback band.
//
// With in-flight eviction on (llm-d-router's flowControl.enableEviction,
// or Sluice's controller.eviction), a request of a sheddable band
// (priority below 0) that is running may be revoked for a waiting request
// of a higher band: its call to the backend is cancelled, and it is
// answered 429 with x-llm-d-request-dropped-reason evicted-priority and
// Retry-After, or cut off if its response had begun; /metrics counts the
// revocations under llm-d-router's flow_control_revocations_* names.
//
// # Load balancing
//
// Each admitted request goes to a backend that is up — one is down until a
// connection to it succeeds, while it refuses them, and once
// -unhealthy-threshold (3) of its scrapes in a row have failed for the
// staleness threshold, or its last good scrape is -unhealthy-window (2 s)
// old: one late scrape on a busy host is not an outage — and not ejected
// by outlier detection, with the fewest requests in flight from this
// gateway; ties go to the one with the fewest waiting requests at its
// latest scrape, then to each in turn. While backends are scraped, one
// whose latest scrape failed gets requests only when every backend's did.
//
// Outlier detection, as Envoy's: a backend that answers
// -outlier-consecutive-5xx (5) 5xx in a row (a connection it failed
// counts as the 502 the gateway answers) is ejected from the pick for
// -outlier-base-ejection-time (30 s) times the ejections it has had, at
// most 300 s, unless more than -outlier-max-ejection-percent (50%) of the
// backends would be out: one always stays. The first 5xx of a run is
// logged at warn (at most once per backend every 10 s), an ejection at
// warn, a return at info; /metrics counts
// sluice_gateway_backend_responses_total{backend, code_class} (1xx to
// 5xx), sluice_gateway_backend_outlier_ejections_total{backend} and
// sluice_gateway_backend_outlier_ejected{backend}. Router-owned response headers (the headroom, the queue
// duration, the dropped reason) are removed from what a backend sends; the
// gateway sets its own. A response its backend cuts off after the header
// was sent (a crash, a reset connection) cannot be answered 502 any more:
// a stream (text/event-stream) then ends with an OpenAI error event,
// data: {"error":{...,"type":"server_error",...}}, on an event boundary,
// which an OpenAI SDK raises as an API error; any other response is cut
// off. Either is logged with the backend's name.
//
// # Signals
//
// SIGTERM or SIGINT shuts down as Kubernetes expects: /readyz turns 503 at
// once, and for the drain delay (-drain-delay or gateway.drainDelay, 5 s
// by default, 0 for none) the gateway serves as before, while the
// endpoint is removed from the Service. Then queued requests are answered
// 503 with x-llm-d-request-dropped-reason rejected-shutting-down, new ones
// are refused (503), and admitted requests have the grace period to
// finish before their connections are closed. /metrics and the probes
// answer until the process exits. A second SIGTERM or SIGINT exits at
// once, with status 1.
//
// SIGHUP reloads the -config file. A reload is all or nothing: a file that
// does not parse, or that changes something only a restart can change, is
// refused with an ERROR log naming why (the file's line and path, or each
// such change), sluice_gateway_config_last_reload_successful turns 0, and
// the running configuration stays. No reload drops a request that is
// admitted or queued.
//
// A reload may change:
//   - the backends (gateway.backends): new ones are scraped and take
//     requests; removed ones take no new requests and finish those they
//     have;
//   - gateway.gracePeriod and gateway.drainDelay;
//   - a band's capacities and TTL (maxRequests, maxBytes, maxCost,
//     maxFlowRequests, ttl; in llm-d-router's form a priority band's
//     maxRequests and maxBytes, and the default band templates), through
//     [flowcontrol.FlowController.ProvisionBand]: the new limits apply to
//     requests enqueued from then on, and requests already queued stay
//     queued even above a smaller capacity;
//   - new bands, which take requests of their priority from then on (with
//     a guarantee only if a running band has one).
//
// Only a restart changes gateway.listen, gateway.scrapeInterval and
// gateway.scrapeTimeout; removing a band, or a band's ordering, queue or
// fairness policy (with its weights and quantum), since requests wait in
// the band's queues; the controller-wide capacities, defaultTTL,
// noEndpointsTTL, fallbackPriority, neverPromote and displacement,
// in-flight eviction (enableEviction, eviction) and a band's guarantee,
// which the controller fixes when it is made; the gate (which gates there are and
// their thresholds), which the controller calls under its lock and cannot
// swap; and the flags, among them -log-level.
//
// # Logs
//
// log/slog, text, to stderr, at -log-level: what the gateway swallows or
// refuses — a backend's failed request, failed scrapes (the first of a run
// at WARN, later ones at DEBUG, the recovery at INFO), a band that cannot
// be read for the headroom header, a recovered handler panic, a metric
// whose func panicked, configuration warnings, reloads and their refusals,
// shutdown.
// Nothing is logged for a request that goes well.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit code: 0 after a clean
// shutdown, 1 when it cannot listen or serve, 2 for a bad flag or file.
func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if opts.checkConfig {
		return checkConfig(opts, stdout, stderr)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: opts.logLevel}))

	// Listen for signals before anything can take time, so that a SIGHUP
	// during start-up is a reload, not the default action (exit).
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)

	g, err := newGateway(opts, log)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-gateway: %v\n", err)
		return 2
	}
	l, err := net.Listen("tcp", g.cur.listen)
	if err != nil {
		g.fc.Close()
		log.Error("cannot listen", "error", err)
		return 1
	}

	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	served := make(chan error, 1)
	go func() { served <- g.serve(ctx, l) }()
	stopping := false
	for {
		select {
		case sig := <-signals:
			if sig == syscall.SIGHUP {
				_ = g.reload() // logged; a bad file keeps the running configuration
				continue
			}
			if stopping {
				log.Warn("second signal: exiting without waiting for the requests in flight", "signal", sig.String(), "in_flight", g.fc.InFlight())
				return 1
			}
			stopping = true
			log.Info("signal received", "signal", sig.String())
			shutdown()
		case err := <-served:
			if err != nil {
				log.Error("server failed", "error", err)
				return 1
			}
			return 0
		}
	}
}
