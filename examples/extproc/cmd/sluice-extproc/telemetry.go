package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/examples/deploy/probe"
	"github.com/sluicegate/sluice/examples/deploy/vllm"
	"github.com/sluicegate/sluice/flowcontrol"
)

// telemetry is what runs beside the ext_proc server: the metrics of the
// controller, the HTTP server of /metrics, /healthz and /readyz, and the
// scraper that feeds a saturation gate with the backends' load.
type telemetry struct {
	// shutdown is done once shutdown has begun: /readyz turns 503.
	shutdown context.Context
	opts     options
	log      *slog.Logger
	handler  http.Handler
	scraper  *vllm.Scraper // nil without a saturation gate
	reloads  *metrics.Reloads

	srv         *http.Server // nil until start, or when -metrics-listen is off
	served      chan error
	stopScraper context.CancelFunc
	scraping    sync.WaitGroup
}

// newTelemetry registers fc's metrics with m (cfg is fc's configuration,
// whose Observer is m.Observe) and builds the scraper of the saturation
// gate, if any. Nothing runs until start.
func newTelemetry(shutdown context.Context, fc *flowcontrol.FlowController, cfg flowcontrol.Config, m *metrics.Metrics, opts options, log *slog.Logger) (*telemetry, error) {
	t := &telemetry{shutdown: shutdown, opts: opts, log: log}
	m.Watch(fc, cfg)
	if limit := opts.gateLimit; limit > 0 {
		m.GateLimit(func() float64 { return float64(limit) })
	}
	if sat := opts.gates.Saturation; sat != nil {
		m.SaturationGate(sat)
		var err error
		t.scraper, err = vllm.New(vllm.Config{
			Targets:  backendNames(opts),
			Sink:     sat,
			Interval: opts.scrapeInterval,
			Timeout:  opts.scrapeTimeout,
			OnError:  func(string, error) { m.PollError(metrics.SourceMetrics) },
			Logger:   log,
		})
		if err != nil {
			return nil, err
		}
	}

	build := config.ReadBuildInfo()
	exporter := metrics.NewExporter("sluice_extproc", m, build.Version, build.Revision, build.GoVersion)
	t.reloads = exporter.Reloads
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", exporter.Handler(log))
	mux.Handle("GET /healthz", probe.Alive())
	mux.Handle("GET /readyz", probe.Ready(t.readiness))
	t.handler = mux
	return t, nil
}

// readiness returns nil while the adapter admits requests, or why not.
func (t *telemetry) readiness() error {
	if t.shutdown.Err() != nil {
		return errors.New("shutting down")
	}
	if sat := t.opts.gates.Saturation; sat != nil {
		return sat.Ready()
	}
	return nil
}

// start starts the scraper, and the HTTP server on l unless l is nil.
func (t *telemetry) start(l net.Listener) {
	scrapeCtx, cancel := context.WithCancel(context.Background())
	t.stopScraper = cancel
	if t.scraper != nil {
		t.scraping.Go(func() { _ = t.scraper.Run(scrapeCtx) })
	}
	if l == nil {
		return
	}
	t.srv = &http.Server{
		Handler:           t.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(t.log.Handler(), slog.LevelWarn),
	}
	t.served = make(chan error, 1)
	go func() { t.served <- t.srv.Serve(l) }()
	t.log.Info("serving metrics", "addr", l.Addr().String())
}

// stop closes the HTTP server, after letting the scrapes in progress
// finish for a moment, and stops the scraper; it returns once both have.
func (t *telemetry) stop() {
	if t.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if t.srv.Shutdown(ctx) != nil {
			t.srv.Close()
		}
		cancel()
		if err := <-t.served; !errors.Is(err, http.ErrServerClosed) {
			t.log.Warn("metrics server failed", "error", err)
		}
	}
	t.stopScraper()
	t.scraping.Wait()
}
