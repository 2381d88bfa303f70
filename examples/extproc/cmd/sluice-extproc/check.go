package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/flowcontrol"
)

// checkConfig is -check-config: the flags and the file are parsed and
// checked already (parseFlags); it builds the controller and the
// telemetry as a start would, prints what would run with the warnings,
// and tears them down without listening or scraping. It returns
// config.CheckOK, or config.CheckInvalid with the problem on stderr.
func checkConfig(opts options, stdout, stderr io.Writer) int {
	quiet := slog.New(slog.DiscardHandler)
	m := metrics.New(metrics.Options{InferencePool: opts.pool, Logger: quiet})
	cfg := opts.controller
	cfg.Observer, cfg.Revocations = m.Observe, m.Revocations
	fc, err := flowcontrol.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-extproc: %s%v\n", where(opts.configPath), err)
		return config.CheckInvalid
	}
	defer fc.Close()
	if _, err := newTelemetry(context.Background(), fc, cfg, m, opts, quiet); err != nil {
		fmt.Fprintf(stderr, "sluice-extproc: %v\n", err)
		return config.CheckInvalid
	}
	metricsListen := opts.metricsListen
	if metricsListen == "" {
		metricsListen = "off"
	}
	e := config.Effective{
		Binary:     "sluice-extproc",
		ConfigPath: opts.configPath,
		Form:       opts.form,
		Listen:     [][2]string{{"grpc", opts.listen}, {"metrics", metricsListen}},
		Running:    running(opts),
		Inference:  opts.inference,
		Classifier: opts.classifier,
		Cost:       costOf(opts),
		Warnings:   opts.warnings,
	}
	if err := e.Write(stdout); err != nil {
		fmt.Fprintf(stderr, "sluice-extproc: %v\n", err)
		return 1
	}
	return config.CheckOK
}

// costOf says what a request costs, for -check-config: 1, since the
// adapter admits on the request headers, before any body.
func costOf(opts options) string {
	if opts.handoff.Enabled && extproc.HandoffWorks(opts.requestBodyMode) {
		return "1 per request: admission comes before the body, which Envoy sends only for the priority hand-off"
	}
	return "1 per request: Envoy sends the adapter no body"
}
