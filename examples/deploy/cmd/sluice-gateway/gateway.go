package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/examples/deploy/probe"
	"github.com/sluicegate/sluice/examples/deploy/vllm"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// How long and how much a client may take to send a request, and to keep
// an idle connection. No WriteTimeout: a streamed completion may rightly
// run for minutes, and a client that stops reading it is noticed by the
// write that fails.
const (
	// readHeaderTimeout bounds the time from a connection's first byte
	// (or the end of its previous request) to the end of the request
	// headers; the server closes a connection that takes longer.
	readHeaderTimeout = 10 * time.Second
	// bodyReadTimeout bounds the time a request body takes to arrive
	// (flowhttp.Config.BodyReadTimeout): a client that stalls is answered
	// 408 once it passes, before its request is queued.
	bodyReadTimeout = flowhttp.DefaultBodyReadTimeout
	// idleTimeout is how long a kept-alive connection may wait for its
	// next request.
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes bounds the request line and headers (net/http's
	// default, named here so the threat model can cite it); a larger
	// request is answered 431.
	maxHeaderBytes = http.DefaultMaxHeaderBytes
)

// gateway is the running program: the controller, its gate, the backends,
// the metrics and the HTTP handler in front of them.
type gateway struct {
	opts     options
	log      *slog.Logger
	fc       *flowcontrol.FlowController
	metrics  *metrics.Metrics
	registry *prometheus.Registry
	pool     *pool
	sat      *gate.SaturationGate // nil unless the gate has a saturation part
	fleet    *fleetMember         // nil unless -fleet-redis is given
	scraper  *vllm.Scraper        // nil unless sat is set
	handler  http.Handler

	// handlers counts the requests being served, so that serve returns
	// only once every handler has; work counts those of them that are
	// not /metrics or a probe, which shutdown waits for within the grace
	// period.
	handlers tracker
	work     tracker
	// closing is set at SIGTERM (/readyz answers 503), refusing once the
	// drain delay after it is over (new requests are refused).
	closing  atomic.Bool
	refusing atomic.Bool
	grace    atomic.Int64 // time.Duration
	drain    atomic.Int64 // time.Duration

	mu  sync.Mutex // serializes reloads; guards cur
	cur *settings

	reloads *metrics.Reloads
}

// newGateway loads the configuration and builds the gateway; nothing
// listens or scrapes until serve.
func newGateway(opts options, log *slog.Logger) (*gateway, error) {
	s, err := load(opts)
	if err != nil {
		return nil, err
	}
	g := &gateway{opts: opts, log: log, cur: s}
	for _, w := range s.warnings {
		log.Warn("configuration", "warning", w)
	}

	g.metrics = metrics.New(metrics.Options{InferencePool: opts.pool, Logger: log})
	endpoints := gate.Endpoints(0) // none up until one is reached
	var fleetGate gate.Gate
	if s.fleet.redis != "" {
		redisLogOnce.Do(func() { redis.SetLogger(redisLog{log}) }) // go-redis logs through one global, set once
		if g.fleet, err = newFleetMember(s.fleet, s); err != nil {
			return nil, err
		}
		fleetGate = g.fleet.view.Gate()
	}
	gates, limit, err := buildGate(s, endpoints, fleetGate)
	if err != nil {
		g.closeFleet()
		return nil, err
	}
	if g.fleet != nil {
		share := g.fleet.view
		limit = func() float64 { return float64(share.Share()) }
	}
	sat := gates.Saturation
	g.sat = sat
	cfg := s.flow
	cfg.Gate = gates.Gate
	cfg.Observer = g.metrics.Observe
	cfg.Waiting = g.metrics.Waiting
	cfg.Revocations = g.metrics.Revocations // in-flight eviction, when the file turns it on
	if g.fc, err = flowcontrol.New(cfg); err != nil {
		g.closeFleet()
		return nil, err
	}
	g.metrics.Watch(g.fc, cfg)
	if g.fleet != nil {
		after := g.afterFleetRound
		g.fleet.afterRound.Store(&after)
	}
	if sat != nil {
		g.metrics.SaturationGate(sat)
	}
	if limit != nil {
		g.metrics.GateLimit(limit)
	}

	var stale time.Duration // scrapes run only for the saturation gate
	var slots int
	if sat != nil {
		stale, slots = s.gate.Saturation.MetricsStalenessThreshold, s.gate.Saturation.SlotsPerEndpoint
	}
	idle := inFlightLimit(limit)
	if s.handoff.Enabled && s.gate.MaxInFlight != nil {
		// gate.PriorityMaxInFlight: a higher band may pass the slots.
		idle = min(2*idle, math.MaxInt32)
	}
	g.pool = newPool(s.backends, poolConfig{log: log, endpoints: endpoints, stale: stale,
		unhealthyThreshold: opts.unhealthyThreshold, unhealthyWindow: opts.unhealthyWindow,
		outlier: outlierConfig{consecutive5xx: opts.consecutive5xx, baseEjectionTime: opts.baseEjectionTime,
			maxEjectionPercent: opts.maxEjectionPercent},
		maxInFlight: idle, byBand: s.handoff.Enabled, slots: slots})
	if sat != nil {
		if g.scraper, err = g.newScraper(s, nil); err != nil {
			g.fc.Close()
			g.closeFleet()
			return nil, err
		}
	}
	g.grace.Store(int64(s.grace))
	g.drain.Store(int64(s.drain))

	classify := costClassifier{headers: opts.classifier, maxTokens: opts.maxTokens}.classify
	if opts.maxBodyBytes < 0 {
		// Bodies are not read before queueing: reading one to estimate
		// its cost would take it from the backend.
		classify = headerModels(opts.classifier.Classify)
	}
	classify = announced(classify, g.metrics.Enqueued)
	// A backend that cuts a stream off is answered by the guard.
	backends := streamGuard{next: g.pool, log: log}
	var headroom capacity.Reader // the controller's own
	if g.fleet != nil {
		headroom = g.fleet.view.Reader(g.fc) // the fleet's room
	}
	admit, err := flowhttp.New(flowhttp.Config{
		Controller:              g.fc,
		Capacity:                headroom,
		Logger:                  log, // a failed read for the headroom header
		Classify:                classify,
		MaxBodyBytes:            opts.maxBodyBytes,
		BodyReadTimeout:         bodyReadTimeout,
		EmitProvisionalHeadroom: opts.emitProvisionalHeadroom,
		PriorityHandoff:         s.handoff,
	}, backends)
	if err != nil {
		g.fc.Close()
		g.closeFleet()
		return nil, err
	}

	build := config.ReadBuildInfo()
	more := []prometheus.Collector{backendCollector{g.pool}}
	if g.fleet != nil {
		more = append(more, fleetCollector{g.fleet})
	}
	exporter := metrics.NewExporter("sluice_gateway", g.metrics, build.Version, build.Revision, build.GoVersion, more...)
	g.registry, g.reloads = exporter.Registry, exporter.Reloads

	mux := http.NewServeMux()
	mux.Handle("/metrics", exporter.Handler(log))
	mux.Handle("/healthz", probe.Alive())
	mux.Handle("/readyz", probe.ReadyNote(g.readiness, g.degraded))
	inference := opts.inference
	if len(inference.Routes()) == 0 {
		inference = config.DefaultInferenceRoutes()
	}
	proxied := router{inference: inference, admit: admit, pass: backends, refusing: &g.refusing}
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.work.add()
		defer g.work.done()
		proxied.ServeHTTP(w, r)
	}))
	g.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.handlers.add()
		defer g.handlers.done()
		mux.ServeHTTP(w, r)
	})
	return g, nil
}

// buildGate builds the gate s describes (see [config.Gate.Build]; a
// per-endpoint concurrency budget is multiplied by the backends), behind
// endpoints, which refuses while no backend is up (the pool tells it), so
// that with every backend down a request ends rejected-no-endpoints after
// the no-endpoints TTL whatever the gate; and the limit on requests in
// flight for flow_control_gate_limit, nil when the gate has none. With a
// usage limit (gate.usageLimit, or llm-d-router's usageLimitPolicyPluginRef)
// Build has put the gate inside band ceilings already ([gate.Ceiling]);
// the endpoints gate, which reports no saturation, goes in front of them.
//
// With fleetGate (a fleet's view gate, which enforces this replica's share
// of the fleet-wide in-flight budget that maxInFlight names), maxInFlight
// is not built: fleetGate takes its place, after endpoints.
func buildGate(s *settings, endpoints *gate.EndpointsGate, fleetGate gate.Gate) (config.Gates, func() float64, error) {
	spec := s.gate
	if fleetGate != nil {
		spec.MaxInFlight = nil
	}
	// With the hand-off on, the servers run the higher bands first: the
	// saturation gate may let them past the lower bands' queued work.
	gs, err := spec.Build(config.BuildOptions{Endpoints: len(s.backends), PriorityScheduling: s.handoff.Enabled})
	if err != nil {
		return config.Gates{}, nil, err
	}
	switch {
	case fleetGate == nil:
	case gs.Gate == nil:
		gs.Gate = fleetGate
	default:
		gs.Gate = gate.All(fleetGate, gs.Gate)
	}
	if gs.Gate == nil {
		gs.Gate = endpoints
	} else {
		gs.Gate = gate.All(endpoints, gs.Gate)
	}
	limit := -1
	if s.gate.MaxInFlight != nil {
		limit = *s.gate.MaxInFlight
	}
	if c := s.gate.Concurrency; c != nil && c.Mode != gate.ModeTokens {
		n := c.MaxConcurrency
		if c.PerEndpoint {
			n *= len(s.backends)
		}
		if limit < 0 || n < limit {
			limit = n
		}
	}
	if limit < 0 {
		return gs, nil, nil
	}
	return gs, func() float64 { return float64(limit) }, nil
}

// newScraper returns the scraper of the backends s names, which feeds
// g's saturation gate and pool, its requests made by client (nil: the
// scraper's own).
func (g *gateway) newScraper(s *settings, client *http.Client) (*vllm.Scraper, error) {
	return vllm.New(vllm.Config{
		Targets:  s.backendNames(),
		Sink:     scrapeSink{sat: g.sat, pool: g.pool},
		Interval: s.file.Gateway.ScrapeInterval,
		Timeout:  s.file.Gateway.ScrapeTimeout,
		Client:   client,
		OnError: func(endpoint string, _ error) {
			g.pool.scrapeFailed(endpoint)
			g.metrics.PollError(metrics.SourceMetrics)
		},
		Logger: g.log,
	})
}

// inFlightLimit returns the gate's limit on requests in flight, as
// buildGate reports it, or 0 when it has none.
func inFlightLimit(limit func() float64) int {
	if limit == nil {
		return 0
	}
	return int(min(limit(), math.MaxInt32))
}

// scrapeSink hands each scrape to the saturation gate and to the load
// balancer.
type scrapeSink struct {
	sat  *gate.SaturationGate
	pool *pool
}

func (s scrapeSink) Update(endpoint string, m vllm.Metrics) {
	s.pool.scraped(endpoint, m.Waiting, m.ReadAt)
	s.sat.Update(endpoint, gate.Metrics(m))
}

func (s scrapeSink) Remove(endpoint string) { s.sat.Remove(endpoint) }

// readiness returns nil when the gateway can admit requests, or why not.
func (g *gateway) readiness() error {
	if g.closing.Load() {
		return errors.New("shutting down")
	}
	n := len(g.pool.list())
	if n == 0 {
		return errors.New("no backend: give -backend or gateway.backends")
	}
	err := g.pool.ready()
	if g.sat != nil {
		if satErr := g.sat.Ready(); satErr != nil {
			if err != nil {
				return fmt.Errorf("%w; %w", err, satErr)
			}
			return satErr
		}
	}
	return err
}

// degraded returns what /readyz adds to "ready" while the gateway admits
// in a degraded mode: a fleet replica in fallback. Such a replica stays
// ready: it admits within its static share ⌊budget/replicas⌋, which keeps
// the fleet within its budget, and taking every replica out of the
// Service because the shared store is down would turn a Redis outage into
// a whole outage. The metric sluice_gateway_fleet_fallback says the same
// for alerting.
func (g *gateway) degraded() string {
	if g.fleet == nil {
		return ""
	}
	return g.fleet.degraded()
}

// afterFleetRound applies the fleet's round to the controller: each band's
// part of its fleet-wide capacity, and a log line when the replica enters
// or leaves its fallback.
func (g *gateway) afterFleetRound(st fleet.Status) {
	g.mu.Lock()
	bands := g.cur.flow.Bands
	g.mu.Unlock()
	if err := g.fleet.apply(g.fc, bands); err != nil && !g.closing.Load() {
		g.log.Warn("fleet: cannot apply the band capacities", "error", err)
	}
	switch was, changed := g.fleet.changed(st); {
	case !changed:
	case st.Fallback == fleet.Synced:
		g.log.Info("fleet: synced", "replicas", st.Live, "share", st.Share, "was", was.String())
	case st.Fallback == fleet.FallbackStale:
		g.log.Warn("fleet: falling back to the static share", "reason", st.Fallback.String(), "share", st.Share, "error", st.Err)
	}
}

// closeFleet releases the fleet's Redis client, if any.
func (g *gateway) closeFleet() {
	if g.fleet != nil {
		g.fleet.close()
	}
}

// serve serves on l and scrapes the backends until ctx ends, then shuts
// down as Kubernetes expects of a pod behind a Service:
//
//  1. /readyz turns 503 at once, and for the drain delay the gateway
//     serves as before, so that requests routed to it while the endpoint
//     is being removed (probes, kube-proxy, a load balancer) still
//     succeed;
//  2. then the controller closes: queued requests are answered
//     rejected-shutting-down at once, new inference requests the same,
//     other new requests 503, and connections are no longer kept alive;
//  3. admitted requests have the grace period to finish, after which
//     their connections are closed.
//
// /metrics and the probes are served on l throughout, until serve returns:
// a scrape during the drain sees the requests finish. It returns once
// every handler has returned; l is closed.
func (g *gateway) serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// Recovered handler panics, accept errors and the like.
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	scrapeCtx, stopScraping := context.WithCancel(context.Background())
	var scraping sync.WaitGroup
	if g.scraper != nil {
		scraping.Go(func() { _ = g.scraper.Run(scrapeCtx) })
	}
	if g.fleet != nil {
		scraping.Go(func() { g.fleet.run(scrapeCtx) })
	}
	g.pool.probeAll(scrapeCtx)
	scraping.Go(func() { g.pool.watch(scrapeCtx) }) // probes the backends it cannot reach
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	g.mu.Lock()
	g.log.Info("listening", "addr", l.Addr().String(), "backends", g.cur.backendNames(),
		"gate", g.cur.gate.String(), "bands", describeBands(g.cur.flow))
	g.mu.Unlock()

	var err error
	select {
	case <-ctx.Done():
	case err = <-served: // the listener failed
	}

	g.closing.Store(true)
	if drain := time.Duration(g.drain.Load()); drain > 0 && err == nil {
		g.log.Info("draining: not ready, still serving", "drain_delay", drain, "in_flight", g.fc.InFlight())
		t := time.NewTimer(drain)
		select {
		case <-t.C:
		case err = <-served:
		}
		t.Stop()
	}

	g.refusing.Store(true)
	srv.SetKeepAlivesEnabled(false)
	grace := time.Duration(g.grace.Load())
	g.fc.Close() // before the log line, so that a request after it is refused
	g.log.Info("shutting down", "grace_period", grace, "in_flight", g.fc.InFlight())
	graceOver := time.NewTimer(grace)
	select {
	case <-g.work.zero():
	case <-graceOver.C:
		g.log.Warn("grace period over: closing the connections of the requests still running", "in_flight", g.fc.InFlight())
		srv.Close()
	}
	graceOver.Stop()
	// What may still run is a scrape or a probe: a moment to finish it
	// while the listener closes.
	lastScrape, cancel := context.WithTimeout(context.Background(), time.Second)
	if srv.Shutdown(lastScrape) != nil {
		srv.Close()
	}
	cancel()
	g.handlers.wait()
	if err == nil {
		err = <-served
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	stopScraping()
	scraping.Wait()
	g.pool.closeIdle()
	g.closeFleet()
	g.log.Info("stopped")
	return err
}

// reload reads the -config file again and applies it, or keeps the running
// configuration and returns why; see the package documentation for what a
// reload may change. It logs and counts the outcome either way.
func (g *gateway) reload() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return config.Reload(g.log, g.opts.configPath, g.apply, g.reloads.Record)
}

// apply loads the file and, when every change it makes can be made live,
// makes them, and returns them and the file's warnings. g.mu is held.
func (g *gateway) apply() (changes, warnings []string, err error) {
	next, err := load(g.opts)
	if err != nil {
		return nil, nil, err
	}
	c := diff(g.cur, next)
	if err := c.Apply(g.fc, g.metrics.WatchBand); err != nil {
		return nil, nil, err
	}
	g.pool.set(next.backends)
	if g.fleet != nil {
		g.fleet.forget() // the reload set the file's capacities: provision the fleet's parts again
	}
	if g.scraper != nil {
		if err := g.scraper.SetTargets(next.backendNames()); err != nil {
			return nil, nil, err
		}
	}
	g.grace.Store(int64(next.grace))
	g.drain.Store(int64(next.drain))
	g.cur = next
	return c.Live, next.warnings, nil
}

// describeBands formats the bands for the start-up log.
func describeBands(c flowcontrol.Config) string {
	var sb strings.Builder
	for i, b := range c.Bands {
		if i > 0 {
			sb.WriteString("; ")
		}
		// The queue-wait TTL is the smaller of the band's and the default.
		ttl := "none"
		switch {
		case b.TTL > 0 && (c.DefaultTTL == 0 || b.TTL < c.DefaultTTL):
			ttl = b.TTL.String()
		case c.DefaultTTL > 0:
			ttl = c.DefaultTTL.String()
		}
		fmt.Fprintf(&sb, "%d: maxRequests %s, ttl %s, %s", b.Priority, b.RequestCapacity, ttl, config.PolicyName(b.Policy))
	}
	return sb.String()
}

// backendCollector exports the load balancer's view of each backend.
type backendCollector struct{ pool *pool }

var backendInFlightDesc = prometheus.NewDesc("sluice_gateway_backend_requests_in_flight",
	"Requests this gateway has sent to a backend whose responses have not ended.", []string{"backend"}, nil)

func (c backendCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- backendInFlightDesc
	ch <- backendResponsesDesc
	ch <- backendEjectionsDesc
	ch <- backendEjectedDesc
}

// Collect sends each configured backend's series: their number is bounded
// by the backends, and those of a backend a reload removed go with it.
func (c backendCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.pool.clock.Now().UnixNano()
	for _, b := range c.pool.list() {
		ch <- prometheus.MustNewConstMetric(backendInFlightDesc, prometheus.GaugeValue, float64(b.inFlight.Load()), b.name)
		for i, class := range codeClasses {
			ch <- prometheus.MustNewConstMetric(backendResponsesDesc, prometheus.CounterValue, float64(b.responses[i].Load()), b.name, class)
		}
		ch <- prometheus.MustNewConstMetric(backendEjectionsDesc, prometheus.CounterValue, float64(b.ejectionsTotal.Load()), b.name)
		ejected := 0.0
		if b.ejectedAt(now) {
			ejected = 1
		}
		ch <- prometheus.MustNewConstMetric(backendEjectedDesc, prometheus.GaugeValue, ejected, b.name)
	}
}
