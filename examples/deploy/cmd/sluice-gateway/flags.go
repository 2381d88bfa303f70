package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/deploy/redisfleet"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// options is the parsed command line. Fields set by a flag win over the
// configuration file, at start and at every reload.
type options struct {
	// configPath is the -config file; empty for none.
	configPath string
	// listen is -listen, or "" when the flag is not given.
	listen string
	// backends are the -backend URLs, added to the file's.
	backends []*url.URL
	// maxInFlight is -max-inflight; nil when the flag is not given.
	maxInFlight *int
	// gracePeriod is -grace-period; nil when the flag is not given.
	gracePeriod *time.Duration
	// drainDelay is -drain-delay; nil when the flag is not given.
	drainDelay *time.Duration
	// inference is -inference-path: the requests flow control admits;
	// every other one goes straight to a backend. None means
	// config.DefaultInferenceRoutes.
	inference config.InferenceRoutes
	// logLevel is -log-level.
	logLevel slog.Level
	// pool is -pool, the inference_pool label of the metrics.
	pool string
	// classifier classifies requests into flows and bands.
	classifier flowhttp.HeaderClassifier
	// emitProvisionalHeadroom is -emit-provisional-headroom.
	emitProvisionalHeadroom bool
	// maxBodyBytes is -max-body-bytes.
	maxBodyBytes int64
	// maxTokens is -max-tokens, the clamp of a request's estimated tokens.
	maxTokens int64
	// checkConfig is -check-config.
	checkConfig bool
	// priorityHandoff is -priority-handoff; nil when the flag is not
	// given, and gateway.priorityHandoff decides.
	priorityHandoff *bool
	// consecutive5xx, baseEjectionTime and maxEjectionPercent are
	// -outlier-consecutive-5xx (0: off), -outlier-base-ejection-time and
	// -outlier-max-ejection-percent; zero values are off, then the
	// defaults.
	consecutive5xx     int
	baseEjectionTime   time.Duration
	maxEjectionPercent int
	// unhealthyThreshold and unhealthyWindow are -unhealthy-threshold
	// and -unhealthy-window; 0 means DefaultUnhealthyThreshold and no
	// window.
	unhealthyThreshold int
	unhealthyWindow    time.Duration
	// fleet is the -fleet-* flags: the fleet this gateway is a replica
	// of, when fleet.redis is set.
	fleet fleetOptions
	// fleetSet names the -fleet-* flags given (without the dash): they
	// win over gateway.fleet.
	fleetSet map[string]bool
}

const usageHeader = `Usage: sluice-gateway [flags]

sluice-gateway is a reverse proxy in front of OpenAI-compatible model servers
(vLLM): every request waits its turn in a Sluice flow controller (priority
bands, fairness between flows, a queue-wait TTL) and is forwarded to a
backend only when the gate admits it. It listens on 127.0.0.1 unless told
otherwise.

  /metrics   Prometheus metrics under llm-d-router's names (llm_d_epp_*)
  /healthz   200 while the process runs
  /readyz    200 while it admits: not shutting down, at least one backend,
             and a saturation gate that has fresh metrics from a backend;
             503 with the reason otherwise
  inference requests (-inference-path) are admitted through flow control
  and proxied; anything else (GET /v1/models, /health, ...) is proxied at
  once, neither queued nor gated

Requests are classified by x-llm-d-inference-fairness-id (the flow),
-priority-header or the objective header with -objective (the band), and
x-llm-d-inference-ttl (a Go duration that can only shorten the queue wait).
A request's cost (what a concurrency gate in tokens mode, a cost capacity
and deficit round robin count) is its estimated tokens: the body's bytes / 4
plus its max_completion_tokens or max_tokens, at most -max-tokens.
With -priority-handoff (or gateway.priorityHandoff), each admitted request's
JSON body field priority, which vLLM run with --scheduling-policy priority
serves lowest first, is set from the band that admitted it (minus the band's
priority unless the file maps it), replacing the client's own; the
saturation gate, when gate.saturation.slotsPerEndpoint declares the
servers' slots, then lets a higher band past the lower bands' queued work,
and -max-inflight N lets a higher band past the N while a lower one runs
(gate.PriorityMaxInFlight), as a fleet replica does past its share.
Each admitted response carries x-llm-d-flow-band-headroom-requests (room left
in its band) and x-llm-d-flow-queue-duration-ms; a refused request gets 429
or 503 with x-llm-d-request-dropped-reason, Retry-After when one is projected,
and an OpenAI error body whose message names the dropped reason.

Backends: -backend flags and the file's gateway.backends together. Each
request goes to the backend with the fewest requests in flight from this
gateway; ties go to the one with the fewest waiting at its latest scrape,
then in turn. With a saturation gate, every backend's /metrics is scraped
and a backend whose latest scrape failed gets requests only when every
backend's did; it is down after -unhealthy-threshold failed scrapes in a
row, or once its last good one is -unhealthy-window old. A backend that
answers -outlier-consecutive-5xx 5xx in a row is ejected from the pick for
-outlier-base-ejection-time times its ejections (Envoy's outlier
detection), at most -outlier-max-ejection-percent of the backends at once.

The gate: -max-inflight N if given; else the file's gate (Sluice's gate
section, or llm-d-router's saturationDetector); else llm-d-router's
utilization-detector with its defaults, fed by scraping the backends. A
usage limit of the file (band ceilings) applies to whichever gate runs,
-max-inflight's included.

Fleet: with -fleet-redis (or gateway.fleet) the gateway is one replica of a
fleet sharing its state in Redis: -max-inflight and each band's maxRequests
are the fleet's, divided by demand every -fleet-period. With Redis down or
stale it takes 1/-fleet-replicas of them and stays ready, saying so on
/readyz and in sluice_gateway_fleet_fallback.

SIGTERM or SIGINT: /readyz turns 503 at once and the gateway serves as before
for the drain delay (-drain-delay or gateway.drainDelay), while Kubernetes
removes the endpoint; then queued requests are answered 503
rejected-shutting-down, new ones are refused, and admitted ones may finish
within the grace period (-grace-period or gateway.gracePeriod) before their
connections are closed. /metrics and the probes answer until exit. A second
SIGTERM or SIGINT exits at once, with status 1.

SIGHUP reloads the -config file. A reload is all or nothing: a file that does
not parse, or that changes something only a restart can change, is refused
with an ERROR log naming why, and the running configuration stays. No reload
drops a request that is admitted or queued.
  A reload may change:
    the backends (gateway.backends): new ones are scraped and take requests;
      removed ones take no new requests, and those in flight finish
    gateway.gracePeriod, gateway.drainDelay
    a band's capacities and TTL (maxRequests, maxBytes, maxCost,
      maxFlowRequests, ttl; in llm-d's form priorityBands[].maxRequests,
      maxBytes and the default band templates): they apply to requests
      enqueued from then on, and requests already queued stay queued even
      above a smaller capacity
    add a band: requests of its priority go to it from then on
  Only a restart changes:
    gateway.listen, gateway.scrapeInterval, gateway.scrapeTimeout
    removing a band; a band's ordering, queue or fairness (with its weights
      and quantum)
    the controller-wide capacities, defaultTTL, noEndpointsTTL,
      fallbackPriority, neverPromote and displacement
    the gate: which gates there are and their thresholds
    gateway.priorityHandoff
    the flags (which win over the file), among them -log-level

Flags:
`

const usageFooter = `
Examples:
  sluice-gateway -backend http://127.0.0.1:8001 -backend http://127.0.0.1:8002
  sluice-gateway -config gateway.yaml -listen 127.0.0.1:9000 -log-level debug
  sluice-gateway -backend http://127.0.0.1:8001 -max-inflight 16 \
    -objective chat=10 -objective batch=-10
`

// parseFlags parses args. For -h it prints the usage to stdout and returns
// flag.ErrHelp; for a bad flag it prints the error to stderr, with the
// usage for a flag the parser does not know.
func parseFlags(args []string, stdout, stderr io.Writer) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("sluice-gateway", flag.ContinueOnError)
	config.SetUsage(fs, usageHeader, usageFooter)

	var (
		shared      config.Flags
		listen      string
		maxInFlight int
	)
	shared.Register(fs)
	fs.StringVar(&listen, "listen", config.DefaultListen, "`address` to listen on; overrides gateway.listen")
	fs.IntVar(&maxInFlight, "max-inflight", 0, "gate on at most `N` requests in flight instead of the file's or the default saturation gate (the file's usage limit still applies)")
	fs.Int64Var(&o.maxBodyBytes, "max-body-bytes", flowhttp.DefaultMaxBodyBytes,
		"longest request body, read before queueing to size it and estimate its tokens; longer ones get 413 (negative: never read, every request costs 1)")
	fs.Int64Var(&o.maxTokens, "max-tokens", flowhttp.DefaultMaxTokens,
		"largest cost a request's estimated tokens may claim, whatever its max_tokens: the model's context length")

	fs.IntVar(&o.consecutive5xx, "outlier-consecutive-5xx", DefaultConsecutive5xx,
		"eject a backend from the pick after `N` 5xx answers in a row (Envoy's outlier detection); 0: never")
	fs.DurationVar(&o.baseEjectionTime, "outlier-base-ejection-time", DefaultBaseEjectionTime,
		"how long a backend's first ejection lasts; each further one lasts that times the ejections, at most 300s")
	fs.IntVar(&o.maxEjectionPercent, "outlier-max-ejection-percent", DefaultMaxEjectionPercent,
		"most backends, in `percent`, ejected at once; one always stays")
	fs.IntVar(&o.unhealthyThreshold, "unhealthy-threshold", DefaultUnhealthyThreshold,
		"failed metrics scrapes of a backend in a row, `N`, before it is down (once they have failed for the staleness threshold)")
	fs.DurationVar(&o.unhealthyWindow, "unhealthy-window", DefaultUnhealthyWindow,
		"a backend whose last good metrics scrape is this old is down however few scrapes failed; 0: no window")

	fs.StringVar(&o.fleet.redis, "fleet-redis", "",
		"run as one replica of a fleet that shares its flow-control state in the Redis at `host:port`: -max-inflight and each band's maxRequests are then the whole fleet's")
	fs.StringVar(&o.fleet.passwordFile, "fleet-redis-password-file", "",
		"read the Redis password from the first line of `file` (else from $"+fleetPasswordEnv+", else none)")
	fs.StringVar(&o.fleet.prefix, "fleet-prefix", redisfleet.DefaultPrefix,
		"`prefix` of the fleet's Redis keys: fleets sharing one Redis each take their own")
	fs.StringVar(&o.fleet.id, "fleet-id", defaultReplicaID(),
		"this replica's `name` in the fleet, unique (default: the host name and the process id)")
	fs.IntVar(&o.fleet.replicas, "fleet-replicas", 1,
		"the `N` replicas the fleet runs: in fallback (Redis down or stale) each takes 1/N of the budget and capacities")
	fs.DurationVar(&o.fleet.period, "fleet-period", DefaultFleetPeriod,
		"how often a replica publishes its state and reads the fleet's (one Redis round trip each)")
	fs.DurationVar(&o.fleet.lease, "fleet-lease", 0,
		"how long Redis keeps a replica's state after its last publish, so a dead replica's share returns within it (default 3 x -fleet-period)")
	fs.IntVar(&o.fleet.overdraft, "fleet-overdraft", 0,
		"the `B` requests of a band that may start beyond this replica's share while a lower band holds one of its slots (fleet.Config.Overdraft; examples/fleet runs 2): fewer revocations for a higher band's arrivals, for up to B requests beyond the fleet's budget")

	set, err := shared.Parse(fs, args, stdout, stderr)
	if err != nil {
		return o, err
	}
	o.configPath, o.backends, o.classifier = shared.ConfigPath, shared.Backends, shared.Classifier
	o.emitProvisionalHeadroom, o.pool, o.logLevel = shared.EmitProvisionalHeadroom, shared.Pool, shared.LogLevel
	o.checkConfig = shared.CheckConfig
	if shared.GracePeriodSet {
		o.gracePeriod = &shared.GracePeriod
	}
	if shared.DrainDelaySet {
		o.drainDelay = &shared.DrainDelay
	}
	o.inference = shared.InferenceRoutes
	if shared.PriorityHandoffSet {
		o.priorityHandoff = &shared.PriorityHandoff
	}
	fail := func(err error) (options, error) { return o, config.Fail(stderr, fs.Name(), err) }
	if set["listen"] {
		if err := config.CheckListen(listen); err != nil {
			return fail(fmt.Errorf("-listen %q: %w", listen, err))
		}
		o.listen = listen
	}
	if set["max-inflight"] {
		if maxInFlight < 1 {
			return fail(fmt.Errorf("-max-inflight %d: must be at least 1", maxInFlight))
		}
		o.maxInFlight = &maxInFlight
	}
	if o.maxTokens < 1 {
		return fail(fmt.Errorf("-max-tokens %d: must be at least 1", o.maxTokens))
	}
	if o.consecutive5xx < 0 {
		return fail(fmt.Errorf("-outlier-consecutive-5xx %d: must be 0 (never eject) or more", o.consecutive5xx))
	}
	if o.baseEjectionTime <= 0 {
		return fail(fmt.Errorf("-outlier-base-ejection-time %s: must be positive (-outlier-consecutive-5xx 0 turns ejection off)", o.baseEjectionTime))
	}
	if o.maxEjectionPercent < 1 || o.maxEjectionPercent > 100 {
		return fail(fmt.Errorf("-outlier-max-ejection-percent %d: must be 1 to 100 (-outlier-consecutive-5xx 0 turns ejection off)", o.maxEjectionPercent))
	}
	if o.unhealthyThreshold < 1 {
		return fail(fmt.Errorf("-unhealthy-threshold %d: must be at least 1", o.unhealthyThreshold))
	}
	if o.unhealthyWindow < 0 {
		return fail(fmt.Errorf("-unhealthy-window %s: must be 0 (none) or positive", o.unhealthyWindow))
	}
	o.fleetSet = make(map[string]bool)
	for name := range set {
		if strings.HasPrefix(name, "fleet-") {
			o.fleetSet[name] = true
		}
	}
	if err := o.fleet.check(); err != nil {
		return fail(err)
	}
	if o.maxBodyBytes == 0 {
		return fail(errors.New("-max-body-bytes 0: must be positive (or negative to never read bodies)"))
	}
	return o, nil
}
