// Command sluice-extproc runs Sluice's flow control as an Envoy external
// processor: admission on request headers, advisory band headroom on
// response headers. It reads sluice-gateway's configuration file (-config;
// Sluice's form or llm-d-router's EndpointPickerConfig), serves
// grpc.health.v1 beside ext_proc, and exports sluice-gateway's metrics
// under llm-d-router's names on -metrics-listen (/metrics, /healthz,
// /readyz; 127.0.0.1:9003 by default). Only inference requests
// (-inference-path) go through flow control. At SIGTERM its health turns
// NOT_SERVING at once and it admits for -drain-delay more before it stops
// accepting streams. SIGHUP reloads the file, all or nothing. -version
// prints its build. Run it with -h for its flags and what a reload may
// change.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit code: 0 after a clean
// shutdown, 1 when it cannot listen or serve, 2 for a bad flag or file.
func run(args []string, stdout, stderr io.Writer) int {
	// Listen for SIGHUP before anything can take time, so that one during
	// start-up is a reload once the adapter runs, not the default action
	// (exit).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

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
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: opts.logLevel}))
	for _, w := range opts.warnings {
		logger.Warn("configuration", "warning", w)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	m := metrics.New(metrics.Options{InferencePool: opts.pool, Logger: logger})
	fc, cfg, err := newController(&opts, m)
	if err != nil {
		fmt.Fprintf(stderr, "%s%v\nRun sluice-extproc -h for usage.\n", where(opts.configPath), err)
		return 2
	}
	defer fc.Close()
	tel, err := newTelemetry(ctx, fc, cfg, m, opts, logger)
	if err != nil {
		fmt.Fprintf(stderr, "%v\nRun sluice-extproc -h for usage.\n", err)
		return 2
	}
	var metricsLis net.Listener
	if opts.metricsListen != "" {
		if metricsLis, err = net.Listen("tcp", opts.metricsListen); err != nil {
			logger.Error("cannot listen for metrics", "error", err)
			return 1
		}
	}
	lis, err := net.Listen("tcp", opts.listen)
	if err != nil {
		if metricsLis != nil {
			metricsLis.Close()
		}
		logger.Error("cannot listen", "error", err)
		return 1
	}
	tel.start(metricsLis)
	rl := newReloader(args, opts, fc, m, tel, logger)
	reloading, stopReloading := context.WithCancel(ctx)
	defer stopReloading()
	go func() {
		for {
			select {
			case <-reloading.Done():
				return
			case <-hup:
				_ = rl.reload() // logged and counted
			}
		}
	}()
	err = serve(ctx, fc, opts, rl.drainDelay, rl.timeout, lis, logger)
	tel.stop()
	if err != nil {
		logger.Error("server failed", "error", err)
		return 1
	}
	return 0
}

// newController builds the controller of opts with m's hooks, and has
// opts's classifier tell m of each request's flow key (opts.enqueued). It
// returns the configuration it used, the one m's Watch needs.
func newController(opts *options, m *metrics.Metrics) (*flowcontrol.FlowController, flowcontrol.Config, error) {
	opts.enqueued = m.Enqueued
	cfg := opts.controller
	cfg.Observer, cfg.Waiting, cfg.Revocations = m.Observe, m.Waiting, m.Revocations
	fc, err := flowcontrol.New(cfg)
	return fc, cfg, err
}

// serve runs the ext_proc server over fc on lis until ctx is done, then
// shuts down as Kubernetes expects: grpc.health.v1 turns NOT_SERVING at
// once (and /readyz 503, which telemetry reads from ctx), and for
// drainDelay() the server admits and serves as before, while Envoy's
// health checks and the endpoint's removal take the adapter out of the
// cluster. Then the controller closes, so queued requests are answered
// rejected-shutting-down at once, and the server accepts no new stream;
// admitted requests get gracePeriod() to finish before their streams are
// cancelled. Both are read as shutdown begins, for a reload may have
// changed them. serve closes lis.
func serve(ctx context.Context, fc *flowcontrol.FlowController, opts options, drainDelay, gracePeriod func() time.Duration, lis net.Listener, logger *slog.Logger) error {
	inference := opts.inference
	if len(inference.Routes()) == 0 {
		inference = config.DefaultInferenceRoutes()
	}
	srv, err := extproc.NewServer(extproc.Config{
		Controller: fc,
		Classify:   announced(headerModels(opts.classifier.ClassifyHeader), opts.enqueued),
		Logger:     logger,
		IsInference: func(h http.Header) bool {
			// Pseudo-headers are keyed as Envoy names them (extproc keeps
			// them as they are); indexing spares Get's canonicalization.
			method, target := first(h[":method"]), first(h[":path"])
			// Envoy always sends both; a request without one is admitted,
			// so that nothing malformed passes unchecked.
			return method == "" || target == "" || inference.MatchRequestTarget(method, target)
		},

		EmitProvisionalHeadroom: opts.emitProvisionalHeadroom,
		PriorityHandoff:         opts.handoff,
		RequestBodyMode:         opts.requestBodyMode,
	})
	if err != nil {
		lis.Close()
		return err
	}
	// Stop waits for handlers, so every admission is released before serve
	// returns. Streams run on streamWorkers reused goroutines while one is
	// free, on a new goroutine otherwise.
	g := grpc.NewServer(grpc.WaitForHandlers(true), grpc.NumStreamWorkers(streamWorkers))
	extprocv3.RegisterExternalProcessorServer(g, srv)
	// grpc.health.v1: SERVING while the controller admits, for the
	// overall server ("") and the ext_proc service by name.
	health := grpchealth.NewServer()
	healthpb.RegisterHealthServer(g, health)
	health.SetServingStatus(extprocv3.ExternalProcessor_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)

	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	logger.Info("listening", "addr", lis.Addr().String(), "bands", describeBands(opts.controller))

	select {
	case <-ctx.Done():
	case err := <-served:
		// Serve returns early only when the listener fails.
		g.Stop()
		return err
	}

	health.Shutdown() // NOT_SERVING from now on: a health-checking Envoy stops sending
	if drain := drainDelay(); drain > 0 {
		logger.Info("draining: not serving, still admitting", "drain_delay", drain)
		t := time.NewTimer(drain)
		select {
		case <-t.C:
		case err := <-served:
			t.Stop()
			g.Stop()
			return err
		}
	}
	timeout := gracePeriod()
	fc.Close() // before the log line, so that a stream after it is refused
	logger.Info("shutting down", "timeout", timeout)
	drained := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(drained)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		logger.Warn("shutdown timeout: cancelling the remaining streams")
		g.Stop()
		<-drained
	}
	if err := <-served; err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// first returns vs's first value, or "" when it has none, as
// http.Header.Get does.
func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// streamWorkers is how many goroutines the gRPC server keeps to run
// streams on (grpc.NumStreamWorkers). A stream otherwise starts a goroutine
// of its own, whose stack starts at the minimum and is copied as it grows
// through gRPC's and the adapter's calls: under BenchmarkLoad that growth
// was about 8% of the command's CPU samples, against 2% for the no-op
// server. A worker keeps its grown stack between streams. A stream holds its worker
// for as long as the HTTP request lasts, so with more requests in flight
// than workers the rest start goroutines as before: nothing waits for a
// worker. Parked workers cost no CPU; their stacks are a few KiB each.
const streamWorkers = 64

// announced returns classify, telling enqueued, if not nil, of each
// request's flow key once it is classified, just before it is enqueued.
func announced(classify func(http.Header) (flowhttp.Classification, error), enqueued func(flowcontrol.FlowKey)) func(http.Header) (flowhttp.Classification, error) {
	if enqueued == nil {
		return classify
	}
	return func(h http.Header) (flowhttp.Classification, error) {
		class, err := classify(h)
		if err == nil {
			enqueued(class.Key)
		}
		return class, err
	}
}

// describeBands formats the configured bands for the startup log. A
// band's ttl is the queue wait it runs with: the smaller of its own TTL
// and the default (defaultRequestTTL in llm-d-router's form), "none" for
// no bound.
func describeBands(c flowcontrol.Config) string {
	s := ""
	for i, b := range c.Bands {
		if i > 0 {
			s += "; "
		}
		ttl := "none"
		if wait := config.BandWait(b, c.DefaultTTL); wait > 0 {
			ttl = wait.String()
		}
		s += fmt.Sprintf("%d: capacity=%s bytes=%s ttl=%s policy=%s", b.Priority, b.RequestCapacity, b.ByteCapacity, ttl, config.PolicyName(b.Policy))
	}
	return s
}
