package main

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/examples/deploy/vllm"
	"github.com/sluicegate/sluice/flowcontrol"
)

// reloader applies the -config file again on SIGHUP, all or nothing: the
// changes a running controller can make (config.DiffFlow: bands added, a
// band's capacities and TTL), the backends a saturation gate scrapes, and
// the shutdown timeout. Anything else refuses the reload; see the usage.
type reloader struct {
	args    []string // the command line, parsed again with the file
	fc      *flowcontrol.FlowController
	metrics *metrics.Metrics
	scraper *vllm.Scraper // nil without a saturation gate
	reloads *metrics.Reloads
	log     *slog.Logger

	// gracePeriod and drain are the current ones, read by serve as it
	// shuts down.
	gracePeriod atomic.Int64 // time.Duration
	drain       atomic.Int64 // time.Duration

	mu  sync.Mutex // serializes reloads; guards cur
	cur options
}

func newReloader(args []string, opts options, fc *flowcontrol.FlowController, m *metrics.Metrics, tel *telemetry, log *slog.Logger) *reloader {
	r := &reloader{args: args, fc: fc, metrics: m, scraper: tel.scraper, reloads: tel.reloads, log: log, cur: opts}
	r.gracePeriod.Store(int64(opts.gracePeriod))
	r.drain.Store(int64(opts.drainDelay))
	return r
}

// timeout returns the shutdown timeout in force.
func (r *reloader) timeout() time.Duration { return time.Duration(r.gracePeriod.Load()) }

// drainDelay returns the drain delay in force.
func (r *reloader) drainDelay() time.Duration { return time.Duration(r.drain.Load()) }

// reload reads the -config file again and applies it, or keeps the running
// configuration and returns why. It logs and counts the outcome either way.
func (r *reloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return config.Reload(r.log, r.cur.configPath, r.apply, r.reloads.Record)
}

// apply parses the command line and the file again and, when every change
// can be made live, makes them. r.mu is held.
func (r *reloader) apply() (changes, warnings []string, err error) {
	next, err := parseFlags(r.args, io.Discard, io.Discard)
	if err != nil {
		return nil, nil, err
	}
	c := config.Diff(running(r.cur), running(next))
	if err := c.Apply(r.fc, r.metrics.WatchBand); err != nil {
		return nil, nil, err
	}
	if r.scraper != nil {
		if err := r.scraper.SetTargets(backendNames(next)); err != nil {
			return nil, nil, err
		}
	}
	r.gracePeriod.Store(int64(next.gracePeriod))
	r.drain.Store(int64(next.drainDelay))
	// The running gates stay: next's, built by parseFlags, are equal and unused.
	next.gates, next.controller.Gate, next.gateLimit = r.cur.gates, r.cur.controller.Gate, r.cur.gateLimit
	r.cur = next
	return c.Live, next.warnings, nil
}

// running is what o runs that a reload compares.
func running(o options) config.Running {
	return config.Running{
		Flow:           o.controller,
		Gate:           o.gate,
		Backends:       backendNames(o),
		ScrapeInterval: o.scrapeInterval,
		ScrapeTimeout:  o.scrapeTimeout,
		GracePeriod:    o.gracePeriod,
		DrainDelay:     o.drainDelay,

		PriorityHandoff: o.handoff,
	}
}

// backendNames returns the backends' URLs as written: the names the scraper
// and the saturation gate know them by.
func backendNames(o options) []string {
	names := make([]string, len(o.backends))
	for i, u := range o.backends {
		names[i] = u.String()
	}
	return names
}
