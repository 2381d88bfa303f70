package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// defaultBand is the band configured when no -band flag is given.
const defaultBand = "priority=0,capacity=100"

// options is the parsed command line, with the -config file applied: a
// flag that is given wins over the file.
type options struct {
	listen string
	// controller is the controller's configuration with its gate, without
	// its Observer.
	controller flowcontrol.Config
	classifier flowhttp.HeaderClassifier
	// emitProvisionalHeadroom also stamps x-llm-d-flow-band-headroom.
	emitProvisionalHeadroom bool
	logLevel                slog.Level
	gracePeriod             time.Duration
	// drainDelay is -drain-delay, else gateway.drainDelay: how long after
	// SIGTERM the adapter admits while its health says NOT_SERVING.
	drainDelay time.Duration
	// inference is -inference-path: the requests flow control admits;
	// others get CONTINUE at once. None means
	// config.DefaultInferenceRoutes.
	inference config.InferenceRoutes

	// configPath is -config; "" for none.
	configPath string
	// metricsListen is -metrics-listen; "" when the metrics server is off.
	metricsListen string
	// pool is -pool, the inference_pool label of the metrics.
	pool string
	// backends are the -backend URLs, then the file's gateway.backends,
	// without duplicates: the model servers the saturation gate reads and
	// a per-endpoint concurrency budget counts.
	backends []*url.URL
	// scrapeInterval and scrapeTimeout are gateway.scrapeInterval and
	// gateway.scrapeTimeout (their defaults without -config).
	scrapeInterval, scrapeTimeout time.Duration
	// gate is the configuration of the gate: the file's, or -max-inflight's.
	gate config.Gate
	// gates are the gates built for controller.Gate; gates.Saturation, when
	// set, is fed by scraping the backends.
	gates config.Gates
	// gateLimit is the cap on requests in flight the gate sets, for
	// flow_control_gate_limit; 0 when it sets none.
	gateLimit int
	// warnings are the file's warnings and what the adapter accepts but
	// cannot do, for the start-up log.
	warnings []string
	// checkConfig is -check-config; form is the file's form, for it.
	checkConfig bool
	form        config.Form
	// enqueued, if set, hears each classified request's flow key just
	// before it is enqueued (metrics.Metrics.Enqueued).
	enqueued func(flowcontrol.FlowKey)
	// handoff is the priority hand-off: gateway.priorityHandoff, turned
	// on or off by -priority-handoff. requestBodyMode is
	// -request-body-mode, the ext_proc filter's request_body_mode it
	// needs.
	handoff         flowhttp.PriorityHandoff
	requestBodyMode extproc.BodyMode
}

const usageHeader = `Usage: sluice-extproc [flags]

sluice-extproc is an Envoy external processor (envoy.service.ext_proc.v3)
that admits each HTTP request through a Sluice flow controller on its request
headers, and stamps x-llm-d-flow-band-headroom-requests and
x-llm-d-flow-queue-duration-ms on its response headers. Configure Envoy's
ext_proc filter with request_header_mode SEND, response_header_mode SEND,
response_trailer_mode SEND (so backend trailers cannot carry the router's
headers) and no bodies (see examples/extproc/envoy.yaml), unless the
priority hand-off is on.

Requests are classified by x-llm-d-inference-fairness-id (the flow),
-priority-header or the objective header with -objective (the band), and
x-llm-d-inference-ttl (a Go duration that can only shorten the queue wait;
a malformed, zero or negative value is answered 400).

Only inference requests (-inference-path; by default POST /v1/completions,
/v1/chat/completions, /v1/embeddings and /v1/responses, read from :method
and :path) go through flow control; any other request (GET /v1/models,
/health, ...) is answered CONTINUE at once, neither queued nor gated.

Admission comes before any body, so every request costs 1 (a concurrency
gate in tokens mode counts requests).

-priority-handoff (or gateway.priorityHandoff) sets each admitted request's
JSON body field priority, which vLLM run with --scheduling-policy priority
serves lowest first, from the band that admitted it (minus the band's
priority unless the file maps it), replacing the client's own. It needs the
body: set the filter's
request_body_mode to BUFFERED (or BUFFERED_PARTIAL, where a body longer than
Envoy's buffer is answered 413) and tell the adapter with -request-body-mode.
In NONE or STREAMED bodies pass as they are, with a warning at start.

-config reads the YAML file sluice-gateway reads (Sluice's form, or
llm-d-router's EndpointPickerConfig with its flowControl section): its
bands, capacities and TTLs, its gate, and gateway.backends,
gateway.scrapeInterval, gateway.scrapeTimeout, gateway.gracePeriod and
gateway.drainDelay (gateway.listen is the HTTP gateway's and is not read; the gRPC address is
-listen). A flag that is given wins over the file: -band replaces the
file's bands, -max-inflight its gate (0: no gate), -capacity, -default-ttl,
-fallback-priority and -never-promote the controller's settings,
-grace-period gateway.gracePeriod, -drain-delay gateway.drainDelay; -backend URLs are added to
gateway.backends. Without -config the flags alone configure it.

The gate: -max-inflight N if given; else the file's (Sluice's gate section,
or llm-d-router's saturationDetector, which is the utilization-detector when
unset); else none. A saturation gate reads each backend's vLLM /metrics
every gateway.scrapeInterval, so it needs -backend or gateway.backends; so
does llm-d-router's per-endpoint concurrency-detector, to count them.

-metrics-listen serves HTTP (loopback unless told otherwise):
  /metrics   Prometheus metrics under llm-d-router's names
             (llm_d_epp_flow_control_*, llm_d_epp_datalayer_poll_errors_total)
  /healthz   200 while the process runs
  /readyz    200 while it admits; 503 and the reason once shutdown has
             begun or while the saturation gate fails closed

It stops on SIGINT or SIGTERM as Kubernetes expects: grpc.health.v1 turns
NOT_SERVING and /readyz 503 at once, and for the drain delay (-drain-delay)
the adapter admits as before while Envoy takes it out of the cluster; then
queued requests are answered 503 rejected-shutting-down, no new stream is
accepted, and admitted ones may finish within -grace-period. /metrics
answers until exit.

SIGHUP reloads the -config file. A reload is all or nothing: a file that does
not parse, or that changes something only a restart can change, is refused
with an ERROR log naming why, and the running configuration stays; /metrics
counts reloads in sluice_extproc_config_reloads_total{result} and
sluice_extproc_config_last_reload_successful. No reload drops a request that
is admitted or queued.
  A reload may change:
    the backends (gateway.backends) a saturation gate scrapes
    gateway.gracePeriod, unless -grace-period is given; gateway.drainDelay,
      unless -drain-delay is given
    a band's capacities and TTL (maxRequests, maxBytes, maxCost,
      maxFlowRequests, ttl; in llm-d's form priorityBands[].maxRequests,
      maxBytes and the default band templates), unless -band is given: they
      apply to requests enqueued from then on, and requests already queued
      stay queued even above a smaller capacity
    add a band: requests of its priority go to it from then on
  Only a restart changes:
    gateway.scrapeInterval, gateway.scrapeTimeout
    removing a band; a band's ordering, queue or fairness (with its weights
      and quantum)
    the controller-wide capacities, defaultTTL, noEndpointsTTL,
      fallbackPriority, neverPromote and displacement
    the gate: which gates there are and their thresholds
    the flags (which win over the file)

Flags:
`

const usageFooter = `
Band keys (-band, comma-separated key=value; priority is required):
  priority=N    band priority; higher is more important, negative is sheddable
  capacity=N    queued-request capacity, or "unbounded" (the default)
  bytes=N       queued-byte capacity, or "unbounded" (the default)
  ttl=D         queue-wait TTL, e.g. 30s (default none)
  policy=NAME   fcfs-ordering-policy (default), edf-ordering-policy,
                slo-deadline-ordering-policy
  queue=KIND    fifo or heap (default: what the policy needs)

Examples:
  sluice-extproc -listen 127.0.0.1:9002 -max-inflight 64 \
    -band priority=10,capacity=100,policy=slo-deadline-ordering-policy \
    -band priority=0,capacity=200 \
    -band priority=-10,capacity=50,ttl=30s \
    -objective chat=10 -objective batch=-10
  sluice-extproc -config epp.yaml -backend http://127.0.0.1:8001 \
    -metrics-listen 127.0.0.1:9003 -objective chat=10
`

// parseFlags parses args. For -h it prints the usage to stdout and returns
// flag.ErrHelp; for a bad flag it prints the error and the usage to stderr.
func parseFlags(args []string, stdout, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("sluice-extproc", flag.ContinueOnError)
	config.SetUsage(fs, usageHeader, usageFooter)

	var (
		shared       config.Flags
		bands        []flowcontrol.BandConfig
		maxInFlight  int
		globalCap    string
		neverPromote bool
	)
	shared.Register(fs)
	fs.Lookup("backend").Usage = "base `URL` of a model server whose vLLM /metrics a saturation gate reads, repeatable; added to gateway.backends"
	fs.StringVar(&o.listen, "listen", "127.0.0.1:9002", "gRPC listen `address` for Envoy's ext_proc filter (loopback unless told otherwise)")
	fs.StringVar(&o.metricsListen, "metrics-listen", defaultMetricsListen, "HTTP `address` of /metrics, /healthz and /readyz; \"\" or \"off\" turns it off")
	fs.Var(config.BandsFlag{Bands: &bands}, "band", "a priority `band`, repeatable (keys below; default "+strconv.Quote(defaultBand)+"); replaces the file's bands")
	fs.IntVar(&maxInFlight, "max-inflight", 0, "requests admitted at once across all bands; 0 admits everything at once; replaces the file's gate")
	fs.StringVar(&globalCap, "capacity", "unbounded", "queued-request capacity across all bands, or \"unbounded\"")
	fs.IntVar(&o.controller.FallbackPriority, "fallback-priority", 0, "band for requests whose own band is not configured")
	fs.BoolVar(&neverPromote, "never-promote", false, "fall back only to the nearest band at or below the requested priority")
	fs.DurationVar(&o.controller.DefaultTTL, "default-ttl", 0, "queue-wait TTL for bands without their own; 0 means none")
	bodyMode := "NONE"
	fs.StringVar(&bodyMode, "request-body-mode", bodyMode,
		"the ext_proc filter's processing_mode.request_body_mode (`mode`: NONE, STREAMED, BUFFERED, BUFFERED_PARTIAL, FULL_DUPLEX_STREAMED); the priority hand-off needs BUFFERED or BUFFERED_PARTIAL. Envoy's protocol_config, when it sends one, wins")
	fs.StringVar(&shared.Classifier.ObjectiveHeader, "objective-header", flowhttp.DefaultObjectiveHeader,
		"request `header` naming the inference objective (the default also reads "+flowhttp.DeprecatedObjectiveHeader+")")

	set, err := shared.Parse(fs, args, stdout, stderr)
	if err != nil {
		return o, err
	}
	o.configPath, o.backends, o.classifier = shared.ConfigPath, shared.Backends, shared.Classifier
	o.emitProvisionalHeadroom, o.pool, o.logLevel = shared.EmitProvisionalHeadroom, shared.Pool, shared.LogLevel
	o.gracePeriod = shared.GracePeriod
	o.checkConfig = shared.CheckConfig
	o.drainDelay, o.inference = shared.DrainDelay, shared.InferenceRoutes
	fail := func(err error) (options, error) { return o, config.Fail(stderr, fs.Name(), err) }

	if len(bands) == 0 {
		b, err := config.ParseBand(defaultBand)
		if err != nil {
			panic(err) // the constant is wrong
		}
		bands = append(bands, b)
	}
	o.controller.Bands = bands
	o.controller.NeverPromote = neverPromote
	if maxInFlight < 0 {
		return fail(fmt.Errorf("-max-inflight %d: negative", maxInFlight))
	}
	if o.controller.RequestCapacity, err = config.ParseLimit(globalCap); err != nil {
		return fail(fmt.Errorf("-capacity %q: %w", globalCap, err))
	}
	mode, ok := extprocfilterv3.ProcessingMode_BodySendMode_value[bodyMode]
	if !ok || mode == int32(extprocfilterv3.ProcessingMode_GRPC) {
		return fail(fmt.Errorf("-request-body-mode %q: want NONE, STREAMED, BUFFERED, BUFFERED_PARTIAL or FULL_DUPLEX_STREAMED", bodyMode))
	}
	o.requestBodyMode = extproc.BodyMode(mode)
	if h := o.classifier.ObjectiveHeader; h != "" && !httpguts.ValidHeaderFieldName(h) {
		return fail(fmt.Errorf("-objective-header %q: not a valid header name", h))
	}
	if err := config.CheckListen(o.listen); err != nil {
		return fail(fmt.Errorf("-listen %q: %w", o.listen, err))
	}
	if o.metricsListen == "off" {
		o.metricsListen = ""
	}
	if o.metricsListen != "" {
		if err := config.CheckListen(o.metricsListen); err != nil {
			return fail(fmt.Errorf("-metrics-listen %q: %w (or \"off\": no metrics server)", o.metricsListen, err))
		}
	}
	o.scrapeInterval, o.scrapeTimeout = config.DefaultScrapeInterval, config.DefaultScrapeTimeout

	var fileHandoff flowhttp.PriorityHandoff
	gateCfg := config.Gate{}
	if maxInFlight > 0 {
		gateCfg.MaxInFlight = &maxInFlight
	}
	if o.configPath != "" {
		if gateCfg, fileHandoff, err = applyFile(&o, set, gateCfg, shared.Handoff); err != nil {
			return fail(err)
		}
	}
	o.gate = gateCfg
	o.handoff = shared.Handoff(fileHandoff)
	if w := extproc.HandoffWarning(o.handoff, o.requestBodyMode); w != "" {
		o.warnings = append(o.warnings, w+" (and -request-body-mode)")
	}
	if err := buildGate(&o, gateCfg); err != nil {
		return fail(fmt.Errorf("%s%w", where(o.configPath), err))
	}
	return o, nil
}

// defaultMetricsListen is -metrics-listen's default: loopback only.
//
// Not llm-d-router's 9090, which a Prometheus server beside it takes on
// a workstation: 9003, next to the gRPC port 9002 (llm-d-router serves
// its gRPC health there; this adapter serves it on 9002 itself).
const defaultMetricsListen = "127.0.0.1:9003"

// applyFile reads the -config file into o, under the flags given (set names
// them), and returns the file's gate unless -max-inflight replaces it with
// flagGate, and the file's gateway.priorityHandoff; the file is judged
// with the hand-off that runs (handoff: the flags' over the file's).
// Errors name the file, and the line and path within it.
func applyFile(o *options, set map[string]bool, flagGate config.Gate, handoff func(flowhttp.PriorityHandoff) flowhttp.PriorityHandoff) (config.Gate, flowhttp.PriorityHandoff, error) {
	f, err := config.Load(o.configPath)
	if err != nil {
		return config.Gate{}, flowhttp.PriorityHandoff{}, err
	}
	// The file's warnings say what sluice-gateway does instead of
	// llm-d-router's scheduling; behind Envoy, Envoy routes.
	o.warnings = append(o.warnings, config.WarningStrings(config.BehindEnvoy(f.Warnings))...)
	o.form = f.Form

	flagged := o.controller
	o.controller = f.Flow
	o.controller.Bands = slices.Clone(f.Flow.Bands)
	if set["band"] {
		o.controller.Bands = flagged.Bands
	}
	if set["capacity"] {
		o.controller.RequestCapacity = flagged.RequestCapacity
	}
	if set["default-ttl"] {
		o.controller.DefaultTTL = flagged.DefaultTTL
	}
	if set["fallback-priority"] {
		o.controller.FallbackPriority = flagged.FallbackPriority
	}
	if set["never-promote"] {
		o.controller.NeverPromote = flagged.NeverPromote
	}
	if !set[config.GracePeriodFlag] {
		o.gracePeriod = f.Gateway.GracePeriod
	}
	if !set["drain-delay"] {
		o.drainDelay = f.Gateway.DrainDelay
	}
	seen := map[string]bool{}
	var backends []*url.URL
	for _, u := range append(o.backends, f.Gateway.Backends...) {
		if !seen[u.String()] {
			seen[u.String()] = true
			backends = append(backends, u)
		}
	}
	o.backends = backends
	o.scrapeInterval, o.scrapeTimeout = f.Gateway.ScrapeInterval, f.Gateway.ScrapeTimeout

	// llm-d-router provisions a band on first sight of a priority its file
	// does not list; the priorities the flags can classify into are known
	// now, so their bands are provisioned at start.
	if !set["band"] {
		for _, p := range classifiedPriorities(o.classifier) {
			if slices.ContainsFunc(o.controller.Bands, func(b flowcontrol.BandConfig) bool { return b.Priority == p }) {
				continue
			}
			if bc, ok := f.DynamicBand(p); ok {
				o.controller.Bands = append(o.controller.Bands, bc)
			}
		}
	}
	g := f.Gate
	if set["max-inflight"] {
		g = flagGate
	}
	// What the file asks for, judged behind the gate and over the bands
	// the adapter runs (config's File.Check): an error at the file's key,
	// or warnings.
	ws, err := f.Check(config.Running{Flow: o.controller, Gate: g, PriorityHandoff: handoff(f.Gateway.PriorityHandoff)})
	if err != nil {
		return config.Gate{}, flowhttp.PriorityHandoff{}, err
	}
	o.warnings = append(o.warnings, config.WarningStrings(ws)...)
	return g, f.Gateway.PriorityHandoff, nil
}

// buildGate builds the gate g describes into o.controller.Gate, with the
// cap it sets on requests in flight. A saturation gate needs backends to
// read, and a per-endpoint concurrency budget needs them to count.
func buildGate(o *options, g config.Gate) error {
	if g.Saturation != nil && len(o.backends) == 0 {
		return errors.New("the gate is the saturation gate (llm-d-router's utilization-detector, also its default when flowControl.saturationDetector is unset), " +
			"which reads the model servers' /metrics, and no backend is known: give -backend URL or gateway.backends, or replace the gate with -max-inflight")
	}
	if c := g.Concurrency; c != nil && c.PerEndpoint && len(o.backends) == 0 {
		return errors.New("the concurrency gate's budgets are per endpoint (llm-d-router's concurrency-detector), and no backend is known to count: " +
			"give -backend URL or gateway.backends, or replace the gate with -max-inflight")
	}
	// With the hand-off writing the body's priority, the servers run the
	// higher bands first: the saturation gate may let them past the lower
	// bands' queued work.
	handsOff := o.handoff.Enabled && extproc.HandoffWarning(o.handoff, o.requestBodyMode) == ""
	gs, err := g.Build(config.BuildOptions{Endpoints: len(o.backends), PriorityScheduling: handsOff})
	if err != nil {
		return err
	}
	o.gates = gs
	o.controller.Gate = gs.Gate
	o.gateLimit = 0
	if g.MaxInFlight != nil {
		o.gateLimit = *g.MaxInFlight
	}
	if c := g.Concurrency; c != nil {
		if c.Mode != gate.ModeRequests {
			// Envoy sends no bodies, so the tokens a request will take are unknown.
			o.warnings = append(o.warnings, fmt.Sprintf("the concurrency gate's mode is %s, but ext_proc sees no request bodies: every request costs 1 token", c.Mode))
		}
		if c.Mode != gate.ModeTokens {
			n := c.MaxConcurrency
			if c.PerEndpoint {
				n *= len(o.backends)
			}
			if o.gateLimit == 0 || n < o.gateLimit {
				o.gateLimit = n
			}
		}
	}
	return nil
}

// where prefixes a message with the file it is about.
func where(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

// classifiedPriorities lists the priorities the classifier gives without a
// priority header: the default and each objective's.
func classifiedPriorities(c flowhttp.HeaderClassifier) []int {
	ps := []int{c.DefaultPriority}
	for _, p := range c.Objectives {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}
