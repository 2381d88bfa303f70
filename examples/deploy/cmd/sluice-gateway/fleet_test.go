package main

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/sluicegate/sluice/examples/deploy/redisfleet"
	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/internal/clitest"
)

func TestBadFleetFlagsExit2(t *testing.T) {
	on := []string{"-max-inflight", "4", "-backend", "http://127.0.0.1:8001", "-fleet-redis", "127.0.0.1:6379"}
	clitest.BadArgs(t, run, map[string][]string{
		"redis without a port": {"-fleet-redis", "redis.local"},
		"redis as a URL":       {"-fleet-redis", "redis://127.0.0.1:6379/0"},
		"empty id":             append(on, "-fleet-id", ""),
		"id with a newline":    append(on, "-fleet-id", "a\nb"),
		"zero replicas":        append(on, "-fleet-replicas", "0"),
		"too many replicas":    append(on, "-fleet-replicas", "100000"),
		"zero period":          append(on, "-fleet-period", "0s"),
		"lease under period":   append(on, "-fleet-lease", "100ms", "-fleet-period", "200ms"),
		"prefix with a space":  append(on, "-fleet-prefix", "a b"),
		"negative overdraft":   append(on, "-fleet-overdraft", "-1"),
		"no budget":            {"-backend", "http://127.0.0.1:8001", "-fleet-redis", "127.0.0.1:6379"},
		"no password file":     append(on, "-fleet-redis-password-file", "/nonexistent/password"),
	})
}

func TestFleetPassword(t *testing.T) {
	path := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(path, []byte("s3cret\r\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(fleetPasswordEnv, "from-env")
	if p, err := (fleetOptions{passwordFile: path}).password(); err != nil || p != "s3cret" {
		t.Errorf("from the file: %q, %v; want s3cret", p, err)
	}
	if p, err := (fleetOptions{}).password(); err != nil || p != "from-env" {
		t.Errorf("from the environment: %q, %v; want from-env", p, err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("x", maxPasswordBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (fleetOptions{passwordFile: path}).password(); err == nil {
		t.Error("an oversized password file: want an error")
	}
}

// A gateway in fleet mode on miniredis: synced, it is ready and exports
// the view; with Redis gone it falls back to the static share, stays ready
// and says so; with Redis back it syncs again. Requests are served
// throughout.
func TestGatewayFleetFallbackOnMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.RequireAuth("pw")
	t.Setenv(fleetPasswordEnv, "pw")
	urls, _ := modelServers(t, 1, modelserver.Config{Speed: 10})
	opts, err := parseFlags([]string{"-max-inflight", "9", "-fleet-redis", mr.Addr(), "-fleet-id", "gw-a",
		"-fleet-replicas", "3", "-fleet-period", "20ms", "-fleet-prefix", "unit"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	base := testOptions()
	base.fleet, base.maxInFlight = opts.fleet, opts.maxInFlight
	base.backends = []*url.URL{urls[0]}
	g := startGateway(t, base)
	client := newClient(t)
	metric := func(series string) string {
		_, page := get(t, client, g.url+"/metrics")
		v, _ := metricValue(page, series)
		return v
	}
	readyBody := func() string {
		code, body := get(t, client, g.url+"/readyz")
		if code != http.StatusOK {
			t.Fatalf("/readyz %d %q: a fleet replica stays ready", code, body)
		}
		return strings.TrimSpace(body)
	}
	serve := func(when string) {
		t.Helper()
		if r := <-send(client, g.url, when); r.status != http.StatusOK {
			t.Fatalf("%s: %d %v %q", when, r.status, r.err, r.body)
		}
	}

	waitFor(t, "the replica to sync", func() bool { return readyBody() == "ready" })
	// Alone in the fleet, it has the whole budget.
	if s := metric(`sluice_gateway_fleet_share{replica="gw-a"}`); s != "9" {
		t.Errorf("share %s alone in the fleet, want 9", s)
	}
	if b := metric(`sluice_gateway_fleet_budget`); b != "9" {
		t.Errorf("budget %s, want 9", b)
	}
	if !mr.Exists("unit:r:gw-a") || !mr.Exists("unit:idx") {
		t.Errorf("keys in Redis: %v, want unit:r:gw-a and unit:idx", mr.Keys())
	}
	serve("synced")

	mr.Close()
	waitFor(t, "the fallback", func() bool {
		return strings.HasPrefix(readyBody(), "ready (fleet fallback (stale): static share 3 of 9") &&
			metric(`sluice_gateway_fleet_fallback{reason="stale"}`) == "1" &&
			metric(`sluice_gateway_fleet_share{replica="gw-a"}`) == "3"
	})
	serve("in fallback")
	if !strings.Contains(g.logs.String(), "fleet: falling back to the static share") {
		t.Error("no log line for the fallback")
	}

	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replica to sync again", func() bool {
		return readyBody() == "ready" && metric(`sluice_gateway_fleet_fallback{reason="stale"}`) == "0"
	})
	if age, err := time.ParseDuration(metric(`sluice_gateway_fleet_view_age_seconds`) + "s"); err != nil || age > time.Second {
		t.Errorf("view age %v (%v) once synced, want under a second", age, err)
	}
	serve("synced again")
}

// The Redis store's keys are where the deploy guide says, under the
// default prefix.
func TestFleetDefaultPrefix(t *testing.T) {
	opts, err := parseFlags([]string{"-max-inflight", "3", "-fleet-redis", "127.0.0.1:6379"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.fleet.prefix != redisfleet.DefaultPrefix || opts.fleet.period != DefaultFleetPeriod || opts.fleet.replicas != 1 {
		t.Errorf("defaults: %+v", opts.fleet)
	}
	host, _ := os.Hostname()
	if !strings.HasPrefix(opts.fleet.id, host) {
		t.Errorf("default id %q, want the host name %q and the pid", opts.fleet.id, host)
	}
}

// gateway.fleet configures the fleet; a -fleet-* flag that is given wins,
// and a value the binary cannot run is refused naming the key.
func TestFleetFromTheFile(t *testing.T) {
	path := writeConfig(t, "", `
gateway:
  fleet:
    redis: 127.0.0.1:6390
    prefix: from-file
    id: gw-file
    replicas: 4
    period: 100ms
    lease: 500ms
gate:
  maxInFlight: 8
`)
	opts, err := parseFlags([]string{"-config", path, "-fleet-id", "gw-flag", "-fleet-period", "50ms"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := load(opts)
	if err != nil {
		t.Fatal(err)
	}
	want := fleetOptions{redis: "127.0.0.1:6390", prefix: "from-file", id: "gw-flag", replicas: 4,
		period: 50 * time.Millisecond, lease: 500 * time.Millisecond}
	if s.fleet != want {
		t.Errorf("fleet %+v, want %+v", s.fleet, want)
	}

	bad := writeConfig(t, "", "gateway:\n  fleet:\n    redis: 127.0.0.1:6390\n    prefix: \"a b\"\ngate:\n  maxInFlight: 8\n")
	opts, err = parseFlags([]string{"-config", bad}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := load(opts); err == nil || !strings.Contains(err.Error(), "gateway.fleet") || !strings.Contains(err.Error(), "prefix") {
		t.Errorf("load of a bad prefix = %v, want an error naming gateway.fleet and the prefix", err)
	}
	for _, text := range []string{"gateway:\n  fleet:\n    replicas: 0\n", "gateway:\n  fleet:\n    period: -1s\n", "gateway:\n  fleet:\n    nope: 1\n"} {
		opts, err := parseFlags([]string{"-config", writeConfig(t, "", text)}, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := load(opts); err == nil || !strings.Contains(err.Error(), "gateway.fleet") {
			t.Errorf("load of %q = %v, want an error naming gateway.fleet", text, err)
		}
	}
}

// A reload that changes gateway.fleet is refused: only a restart joins or
// leaves a fleet.
func TestFleetChangeTakesARestart(t *testing.T) {
	base := "gateway:\n  fleet:\n    redis: 127.0.0.1:6390\ngate:\n  maxInFlight: 8\n"
	opts, err := parseFlags([]string{"-config", writeConfig(t, "", base)}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	old, err := load(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.configPath = writeConfig(t, "", strings.Replace(base, "6390", "6391", 1))
	next, err := load(opts)
	if err != nil {
		t.Fatal(err)
	}
	if c := diff(old, next); !slices.Contains(c.Restart, "gateway.fleet") {
		t.Errorf("diff of a changed gateway.fleet: restart %q, want gateway.fleet", c.Restart)
	}
	if c := diff(old, old); len(c.Restart) != 0 {
		t.Errorf("diff of the same file: restart %q", c.Restart)
	}
}

// Each round gives every band with a fleet-wide capacity this replica's
// part of it, a part of 0 included (the file's own capacity must not
// stay), and provisions a band again only when its part changes or a
// reload has set the file's capacities.
func TestFleetAppliesBandParts(t *testing.T) {
	mr := miniredis.RunT(t)
	urls, _ := modelServers(t, 1, modelserver.Config{Speed: 10})
	path := writeConfig(t, "", "controller:\n  bands:\n    - priority: 0\n      maxRequests: 2\n    - priority: 5\n      maxRequests: 90\ngate:\n  maxInFlight: 9\n")
	opts, err := parseFlags([]string{"-config", path, "-fleet-redis", mr.Addr(), "-fleet-id", "gw-a",
		"-fleet-replicas", "3", "-fleet-period", "1h"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	base := testOptions()
	base.configPath, base.fleet, base.fleetSet = opts.configPath, opts.fleet, opts.fleetSet
	base.backends = []*url.URL{urls[0]}
	g := startGateway(t, base)
	// Before any round the view is in fallback: ⌊Q/3⌋, so band 0 gets 0.
	g.afterFleetRound(g.fleet.view.Status())
	for p, want := range map[int]int64{0: 0, 5: 30} {
		s, err := g.fc.CapacitySnapshot(p)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := s.RequestCapacity.Value(); n != want {
			t.Errorf("band %d: capacity %d in fallback, want %d", p, n, want)
		}
	}
}

// A fleet replica with the hand-off lets a higher band past its share
// while a lower band runs (fleet.Config.PriorityScheduling), and the
// server preempts for it; without the hand-off the higher band waits for
// a slot. The fleet's budget is the server's 2 slots.
func TestFleetHandoffLetsAHigherBandPast(t *testing.T) {
	const long = `{"model":"sim","messages":[{"role":"user","content":"hi"}],"max_tokens":400}` // 2 s of decode
	for _, handoff := range []bool{true, false} {
		t.Run(map[bool]string{true: "hand-off", false: "no hand-off"}[handoff], func(t *testing.T) {
			mr := miniredis.RunT(t)
			urls, _ := modelServers(t, 1, modelserver.Config{Slots: 2, SchedulingPolicy: modelserver.PolicyPriority})
			opts, err := parseFlags([]string{"-max-inflight", "2", "-fleet-redis", mr.Addr(), "-fleet-id", "gw-a",
				"-fleet-period", "20ms", "-fleet-prefix", "unit"}, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			base := testOptions()
			base.fleet, base.maxInFlight = opts.fleet, opts.maxInFlight
			base.configPath = writeConfig(t, "", "controller:\n  bands: [{priority: 10}, {priority: 0}]\n")
			base.backends, base.priorityHandoff = urls, boolp(handoff)
			base.classifier.Objectives = map[string]int{"chat": 10, "standard": 0}
			g := startGateway(t, base)
			client := newClient(t)
			waitFor(t, "the replica to sync", func() bool {
				code, body := get(t, client, g.url+"/readyz")
				return code == http.StatusOK && strings.TrimSpace(body) == "ready"
			})
			first := sendBody(client, g.url, "standard-1", long, "x-llm-d-inference-objective", "standard")
			second := sendBody(client, g.url, "standard-2", long, "x-llm-d-inference-objective", "standard")
			waitFor(t, "both standard requests to run", func() bool {
				_, page := get(t, client, urls[0].String()+"/metrics")
				v, _ := metricValue(page, `vllm:num_requests_running{model_name="sim"}`)
				return v == "2"
			})
			chat := sendBody(client, g.url, "chat", chatBody, "x-llm-d-inference-objective", "chat")
			var r result
			var chatFirst bool
			select {
			case r = <-chat:
				chatFirst = true
			case r = <-first:
			case r = <-second:
			}
			if r.err != nil || r.status != http.StatusOK {
				t.Fatalf("first answer: %d %v %q", r.status, r.err, r.body)
			}
			if chatFirst != handoff {
				t.Errorf("chat answered before both standard requests: %v, want %v", chatFirst, handoff)
			}
		})
	}
}
