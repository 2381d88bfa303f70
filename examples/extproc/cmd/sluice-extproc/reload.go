package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
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

	// shutdownTimeout is the current one, read by serve as it shuts down.
	shutdownTimeout atomic.Int64 // time.Duration

	mu  sync.Mutex // serializes reloads; guards cur
	cur options
}

func newReloader(args []string, opts options, fc *flowcontrol.FlowController, m *metrics.Metrics, tel *telemetry, log *slog.Logger) *reloader {
	r := &reloader{args: args, fc: fc, metrics: m, scraper: tel.scraper, reloads: tel.reloads, log: log, cur: opts}
	r.shutdownTimeout.Store(int64(opts.shutdownTimeout))
	return r
}

// timeout returns the shutdown timeout in force.
func (r *reloader) timeout() time.Duration { return time.Duration(r.shutdownTimeout.Load()) }

// reload reads the -config file again and applies it, or keeps the running
// configuration and returns why. It logs and counts the outcome either way.
func (r *reloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := config.Reload(r.log, r.cur.configPath, r.apply)
	if !errors.Is(err, config.ErrNoConfigFile) {
		r.reloads.Record(err)
	}
	return err
}

// apply parses the command line and the file again and, when every change
// can be made live, makes them. r.mu is held.
func (r *reloader) apply() (changes, warnings []string, err error) {
	next, err := parseFlags(r.args, io.Discard, io.Discard)
	if err != nil {
		return nil, nil, err
	}
	c := diff(r.cur, next)
	if len(c.Restart) > 0 {
		return nil, nil, fmt.Errorf("it changes what only a restart can change: %s", strings.Join(c.Restart, "; "))
	}
	for _, bc := range c.Provision {
		if err := r.fc.ProvisionBand(bc); err != nil {
			return nil, nil, err
		}
	}
	for _, p := range c.Added {
		r.metrics.WatchBand(p)
	}
	if r.scraper != nil {
		if err := r.scraper.SetTargets(backendNames(next)); err != nil {
			return nil, nil, err
		}
	}
	r.shutdownTimeout.Store(int64(next.shutdownTimeout))
	// The running gates stay: next's, built by parseFlags, are equal and unused.
	next.gates, next.controller.Gate, next.gateLimit = r.cur.gates, r.cur.controller.Gate, r.cur.gateLimit
	r.cur = next
	return c.Live, next.warnings, nil
}

// diff compares the running options with those of a reloaded file: the
// controller's changes (config.DiffFlow), and the adapter's own.
func diff(old, next options) config.FlowChange {
	var restart []string
	restartf := func(format string, args ...any) { restart = append(restart, fmt.Sprintf(format, args...)) }
	if old.scrapeInterval != next.scrapeInterval {
		restartf("gateway.scrapeInterval %s → %s", old.scrapeInterval, next.scrapeInterval)
	}
	if old.scrapeTimeout != next.scrapeTimeout {
		restartf("gateway.scrapeTimeout %s → %s", old.scrapeTimeout, next.scrapeTimeout)
	}
	if !reflect.DeepEqual(old.gate, next.gate) {
		restartf("the gate: %s → %s", old.gate, next.gate)
	} else if c := next.gate.Concurrency; c != nil && c.PerEndpoint && len(old.backends) != len(next.backends) {
		restartf("the number of backends %d → %d, by which the concurrency gate's per-endpoint budgets are multiplied",
			len(old.backends), len(next.backends))
	}

	c := config.DiffFlow(old.controller, next.controller)
	c.Restart = append(restart, c.Restart...)
	if a, b := backendNames(old), backendNames(next); !slices.Equal(a, b) {
		c.Live = append(c.Live, fmt.Sprintf("backends %v → %v", a, b))
	}
	if old.shutdownTimeout != next.shutdownTimeout {
		c.Live = append(c.Live, fmt.Sprintf("shutdown timeout %s → %s", old.shutdownTimeout, next.shutdownTimeout))
	}
	return c
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
