package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
)

// reloadFile is a configuration with band 0 of the given capacity, the
// gate maxInFlight gate, a grace period and the extra text.
func reloadFile(capacity, gate int, grace time.Duration, extra string) string {
	return fmt.Sprintf(`
gateway:
  gracePeriod: %s
controller:
  bands:
    - priority: 0
      maxRequests: %d
%sgate:
  maxInFlight: %d
`, grace, capacity, extra, gate)
}

// startReloader runs what run builds around a reloader, without listening:
// the controller and the telemetry of the options args give.
func startReloader(t *testing.T, args ...string) (*reloader, *flowcontrol.FlowController, *bytes.Buffer) {
	t.Helper()
	opts, err := parseFlags(args, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := metrics.New(metrics.Options{Logger: log})
	cfg := opts.controller
	cfg.Observer = m.Observe
	fc, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	tel, err := newTelemetry(context.Background(), fc, cfg, m, opts, log)
	if err != nil {
		t.Fatal(err)
	}
	return newReloader(args, opts, fc, m, tel, log), fc, &logs
}

func bandCapacity(t *testing.T, fc *flowcontrol.FlowController, priority int) capacity.Limit {
	t.Helper()
	s, err := fc.CapacitySnapshot(priority)
	if err != nil {
		t.Fatalf("band %d: %v", priority, err)
	}
	return s.RequestCapacity
}

// reloadCounts returns the success and failure counts of the reload metrics.
func reloadCounts(t *testing.T, r *reloader) (success, failure float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r.reloads)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "sluice_extproc_config_reloads_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			switch m.GetLabel()[0].GetValue() {
			case "success":
				success = m.GetCounter().GetValue()
			case "failure":
				failure = m.GetCounter().GetValue()
			}
		}
	}
	return success, failure
}

func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadFile(10, 4, 5*time.Second, ""))
	r, fc, logs := startReloader(t, "-config", path)

	// Live: a band's capacity, a new band, the grace period.
	write(reloadFile(20, 4, 9*time.Second, "    - priority: 7\n      maxRequests: 3\n"))
	if err := r.reload(); err != nil {
		t.Fatalf("reload: %v\n%s", err, logs)
	}
	if got := bandCapacity(t, fc, 0); got != capacity.Bounded(20) {
		t.Errorf("band 0 capacity %s after reload, want 20", got)
	}
	if got := bandCapacity(t, fc, 7); got != capacity.Bounded(3) {
		t.Errorf("band 7 capacity %s after reload, want 3", got)
	}
	if got := r.timeout(); got != 9*time.Second {
		t.Errorf("shutdown timeout %s after reload, want 9s", got)
	}
	if !strings.Contains(logs.String(), `msg="configuration reloaded"`) || !strings.Contains(logs.String(), "band 0 maxRequests 10 → 20") {
		t.Errorf("the reload is not logged with its changes:\n%s", logs)
	}

	// Refused, whole: a new gate threshold beside a capacity change.
	write(reloadFile(30, 5, 9*time.Second, "    - priority: 7\n      maxRequests: 3\n"))
	err := r.reload()
	if err == nil || !strings.Contains(err.Error(), "the gate: [maxInFlight 4] → [maxInFlight 5]") {
		t.Errorf("reload with a new gate: %v, want a refusal naming the gate", err)
	}
	if got := bandCapacity(t, fc, 0); got != capacity.Bounded(20) {
		t.Errorf("band 0 capacity %s after a refused reload, want 20 still", got)
	}

	// Refused: a file that does not parse, and a band removed.
	write("controller: [")
	if err := r.reload(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("reload of a broken file: %v, want an error naming the file", err)
	}
	write(reloadFile(20, 4, 9*time.Second, ""))
	if err := r.reload(); err == nil || !strings.Contains(err.Error(), "band 7 removed") {
		t.Errorf("reload removing a band: %v, want a refusal", err)
	}
	if success, failure := reloadCounts(t, r); success != 1 || failure != 3 {
		t.Errorf("reloads counted: %v successes, %v failures; want 1 and 3", success, failure)
	}

	// Back to what runs: nothing changes, and it succeeds.
	write(reloadFile(20, 4, 9*time.Second, "    - priority: 7\n      maxRequests: 3\n"))
	if err := r.reload(); err != nil {
		t.Errorf("reload of the running configuration: %v", err)
	}
}

func TestReloadFlagsStillWin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(reloadFile(10, 4, 5*time.Second, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	r, fc, _ := startReloader(t, "-config", path, "-band", "priority=0,capacity=2", "-grace-period", "1s")
	if err := os.WriteFile(path, []byte(reloadFile(30, 4, 8*time.Second, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.reload(); err != nil {
		t.Fatal(err)
	}
	if got := bandCapacity(t, fc, 0); got != capacity.Bounded(2) {
		t.Errorf("band 0 capacity %s, want -band's 2", got)
	}
	if got := r.timeout(); got != time.Second {
		t.Errorf("shutdown timeout %s, want -grace-period's 1s", got)
	}
}

func TestReloadWithoutConfigFile(t *testing.T) {
	r, _, _ := startReloader(t, "-max-inflight", "1")
	if err := r.reload(); !errors.Is(err, config.ErrNoConfigFile) {
		t.Errorf("reload: %v, want config.ErrNoConfigFile", err)
	}
	if success, failure := reloadCounts(t, r); success != 0 || failure != 0 {
		t.Errorf("reloads counted without a file: %v, %v", success, failure)
	}
}

// TestBinaryReloadsOnSIGHUP: the running program takes a new band capacity
// from its file on SIGHUP, stamps headroom from it, and counts the reload
// on /metrics.
func TestBinaryReloadsOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(reloadFile(10, 4, 5*time.Second, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0", "-config", path)
	if err := os.WriteFile(path, []byte(reloadFile(20, 4, 5*time.Second, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for reloaded := false; !reloaded; {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("the program exited on SIGHUP:\n%s", strings.Join(c.log, "\n"))
			}
			c.log = append(c.log, line)
			reloaded = strings.Contains(line, `msg="configuration reloaded"`) && strings.Contains(line, "band 0 maxRequests 10 → 20")
		case <-deadline:
			t.Fatalf("no reload logged within 10s:\n%s", strings.Join(c.log, "\n"))
		}
	}
	if got := c.oneStream(t); got != "20" {
		t.Errorf("headroom after the reload = %q, want 20 (band 0's new capacity, empty)", got)
	}
	if _, body := get(t, c.metrics, "/metrics"); !strings.Contains(body, `sluice_extproc_config_reloads_total{result="success"} 1`) {
		t.Errorf("/metrics does not count the reload:\n%s", body)
	}
	c.stop(t)
}
