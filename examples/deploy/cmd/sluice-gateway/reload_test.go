package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/modelserver"
)

// bandConfig is a file with one band of priority 0 of capacity places,
// the gate maxInFlight 4 and the given backends.
func bandConfig(capacity int, backends ...*url.URL) string {
	return bandFile(capacity, 4, backends...)
}

// bandFile is a file with one band of priority 0 of capacity places, the
// gate maxInFlight inFlight and the given backends.
func bandFile[U fmt.Stringer](capacity, inFlight int, backends ...U) string {
	var sb strings.Builder
	sb.WriteString("gateway:\n  gracePeriod: 10s\n  backends:\n")
	for _, u := range backends {
		fmt.Fprintf(&sb, "    - %s\n", u)
	}
	fmt.Fprintf(&sb, "controller:\n  bands:\n    - priority: 0\n      maxRequests: %d\ngate:\n  maxInFlight: %d\n", capacity, inFlight)
	return sb.String()
}

// headroomOf sends a request and returns its headroom header.
func headroomOf(t *testing.T, client *http.Client, base string, headers ...string) string {
	t.Helper()
	r := <-send(client, base, "probe", headers...)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("probe: %d %v %q", r.status, r.err, r.body)
	}
	return r.header.Get("x-llm-d-flow-band-headroom-requests")
}

func TestReload(t *testing.T) {
	urls, _ := modelServers(t, 2, modelserver.Config{Speed: 10})
	path := writeConfig(t, "", bandConfig(3, urls[0]))
	opts := testOptions()
	opts.configPath = path
	opts.classifier.PriorityHeader = "x-priority"
	g := startGateway(t, opts)
	client := newClient(t)
	if got := headroomOf(t, client, g.url); got != "3" {
		t.Fatalf("headroom %q, want 3", got)
	}

	// Live changes: a band's capacity, a new band, a second backend.
	writeConfig(t, path, fmt.Sprintf(`gateway:
  gracePeriod: 10s
  backends: [%s, %s]
controller:
  bands:
    - priority: 0
      maxRequests: 7
    - priority: 10
      maxRequests: 2
      ttl: 5s
gate:
  maxInFlight: 4
`, urls[0], urls[1]))
	if err := g.reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := headroomOf(t, client, g.url); got != "7" {
		t.Errorf("after reload: headroom %q, want 7", got)
	}
	if got := headroomOf(t, client, g.url, "x-priority", "10"); got != "2" {
		t.Errorf("new band 10: headroom %q, want 2", got)
	}
	if n := len(g.pool.list()); n != 2 {
		t.Errorf("%d backends after reload, want 2", n)
	}
	_, page := get(t, client, g.url+"/metrics")
	for series, want := range map[string]string{
		`sluice_gateway_config_reloads_total{result="success"}`:                         "1",
		`sluice_gateway_config_last_reload_successful`:                                  "1",
		`llm_d_epp_flow_control_capacity_utilization_requests{priority="10"}`:           "0", // band 10 is watched
		`sluice_gateway_backend_requests_in_flight{backend="` + urls[1].String() + `"}`: "0",
	} {
		if got, _ := metricValue(page, series); got != want {
			t.Errorf("%s = %q, want %s", series, got, want)
		}
	}
	if logs := g.logs.String(); !strings.Contains(logs, "configuration reloaded") || !strings.Contains(logs, "band 0 maxRequests 3 → 7") {
		t.Errorf("the reload's changes were not logged:\n%s", logs)
	}

	// A file that does not parse: refused, with its line.
	writeConfig(t, path, "controller:\n  bands:\n    - priority: 0\n      maxRequests: lots\n")
	err := g.reload()
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), ":4:") {
		t.Errorf("bad file: reload error %v, want one naming %s line 4", err, path)
	}
	if got := headroomOf(t, client, g.url); got != "7" {
		t.Errorf("after a bad file: headroom %q, want 7 still", got)
	}
	_, page = get(t, client, g.url+"/metrics")
	for series, want := range map[string]string{
		`sluice_gateway_config_reloads_total{result="failure"}`: "1",
		`sluice_gateway_config_last_reload_successful`:          "0",
	} {
		if got, _ := metricValue(page, series); got != want {
			t.Errorf("%s = %q, want %s", series, got, want)
		}
	}
	if !strings.Contains(g.logs.String(), "configuration reload refused") {
		t.Errorf("the refusal was not logged:\n%s", g.logs.String())
	}

	// A file that changes what only a restart can change: refused whole,
	// so its live change (capacity 9) is not made either.
	writeConfig(t, path, fmt.Sprintf(`gateway:
  listen: 127.0.0.1:9999
  gracePeriod: 10s
  backends: [%s, %s]
controller:
  bands:
    - priority: 0
      maxRequests: 9
      ordering: edf-ordering-policy
gate:
  maxInFlight: 4
`, urls[0], urls[1]))
	err = g.reload()
	for _, want := range []string{"only a restart", "listen address", "band 0 ordering fcfs-ordering-policy → edf-ordering-policy", "band 10 removed"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("restart-only change: reload error %v, want it to say %q", err, want)
		}
	}
	if got := headroomOf(t, client, g.url); got != "7" {
		t.Errorf("after a refused reload: headroom %q, want 7 still", got)
	}
}

func TestReloadWithoutConfigFile(t *testing.T) {
	opts := testOptions()
	opts.maxInFlight = intp(1)
	g := startGateway(t, opts)
	if err := g.reload(); !errors.Is(err, config.ErrNoConfigFile) {
		t.Errorf("reload: %v, want config.ErrNoConfigFile", err)
	}
}

func TestReloadKeepsAdmittedAndQueuedRequests(t *testing.T) {
	hb := newHoldBackend(t)
	urls, _ := modelServers(t, 1, modelserver.Config{Speed: 10})
	path := writeConfig(t, "", bandFile(2, 1, hb.url))
	opts := testOptions()
	opts.configPath = path
	g := startGateway(t, opts)
	client := newClient(t)
	a, b := runningAndQueued(t, g, client, hb)

	// The held backend leaves the pool and another joins; the band shrinks
	// to one place, which b already takes.
	writeConfig(t, path, bandFile(1, 1, urls[0]))
	if err := g.reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if s, _ := g.fc.CapacitySnapshot(0); s.QueuedRequests != 1 {
		t.Fatalf("%d queued after the reload, want b still", s.QueuedRequests)
	}
	hb.release <- struct{}{}
	if r := <-a; r.err != nil || r.status != http.StatusOK || !strings.HasSuffix(r.body, "[DONE]\n\n") {
		t.Errorf("a, admitted on the backend the reload removed: %d %v %q", r.status, r.err, r.body)
	}
	r := <-b
	if r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, "chatcmpl-backend-0") {
		t.Errorf("b, queued across the reload: %d %v %q; want a completion of the new backend", r.status, r.err, r.body)
	}
	if got := r.header.Get("x-llm-d-flow-band-headroom-requests"); got != "1" {
		t.Errorf("b: headroom %q, want the new capacity 1", got)
	}
}

func TestDiff(t *testing.T) {
	base := `
gateway:
  backends: [http://127.0.0.1:8001]
controller:
  bands:
    - priority: 0
      maxRequests: 10
    - priority: -5
      maxRequests: 10
      fairness:
        type: deficit-round-robin-fairness-policy
        weights: {a: 2}
gate:
  maxInFlight: 4
`
	cases := []struct {
		name     string
		edit     func(string) string
		restart  []string // each is found in the restart reasons
		live     []string
		provided int // bands provisioned
	}{
		{name: "same file", edit: func(s string) string { return s }},
		{name: "band capacity and TTL", edit: func(s string) string {
			return strings.Replace(s, "maxRequests: 10\n    - priority: -5", "maxRequests: 20\n      ttl: 3s\n    - priority: -5", 1)
		}, live: []string{"band 0 maxRequests 10 → 20", "band 0 ttl 0s → 3s"}, provided: 1},
		{name: "new band", edit: func(s string) string {
			return strings.Replace(s, "  bands:\n", "  bands:\n    - priority: 7\n      maxRequests: 1\n", 1)
		}, live: []string{"band 7 added"}, provided: 1},
		{name: "backends", edit: func(s string) string {
			return strings.Replace(s, "[http://127.0.0.1:8001]", "[http://127.0.0.1:8001, http://127.0.0.1:8002]", 1)
		}, live: []string{"backends"}},
		{name: "DRR weights", edit: func(s string) string { return strings.Replace(s, "{a: 2}", "{a: 3}", 1) },
			restart: []string{"band -5 fairness"}},
		{name: "band removed", edit: func(s string) string {
			return s[:strings.Index(s, "    - priority: -5")] + "gate:\n  maxInFlight: 4\n"
		}, restart: []string{"band -5 removed"}},
		{name: "gate threshold", edit: func(s string) string { return strings.Replace(s, "maxInFlight: 4", "maxInFlight: 5", 1) },
			restart: []string{"the gate: [maxInFlight 4] → [maxInFlight 5]"}},
		{name: "controller-wide", edit: func(s string) string {
			return strings.Replace(s, "controller:\n", "controller:\n  maxRequests: 100\n  defaultTTL: 1s\n  displacement: false\n", 1)
		}, restart: []string{"controller-wide maxRequests unbounded → 100", "defaultTTL 0s → 1s", "displacement true → false"}},
		{name: "scrape interval", edit: func(s string) string {
			return strings.Replace(s, "gateway:\n", "gateway:\n  scrapeInterval: 20ms\n", 1)
		}, restart: []string{"gateway.scrapeInterval 50ms → 20ms"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := loadText(t, base)
			next := loadText(t, tc.edit(base))
			c := diff(old, next)
			joined := strings.Join(c.Restart, "; ")
			for _, want := range tc.restart {
				if !strings.Contains(joined, want) {
					t.Errorf("restart reasons %q lack %q", joined, want)
				}
			}
			if len(tc.restart) == 0 && len(c.Restart) > 0 {
				t.Errorf("restart reasons %q, want none", joined)
			}
			live := strings.Join(c.Live, "; ")
			for _, want := range tc.live {
				if !strings.Contains(live, want) {
					t.Errorf("live changes %q lack %q", live, want)
				}
			}
			if len(tc.restart) == 0 && len(c.Provision) != tc.provided {
				t.Errorf("%d bands provisioned, want %d", len(c.Provision), tc.provided)
			}
		})
	}
}

// loadText loads a configuration given as text, with no flags.
func loadText(t *testing.T, text string) *settings {
	t.Helper()
	opts := testOptions()
	opts.gracePeriod = nil
	opts.configPath = writeConfig(t, "", text)
	s, err := load(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
