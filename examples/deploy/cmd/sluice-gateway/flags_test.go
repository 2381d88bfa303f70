package main

import (
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/clitest"
)

func TestHelpPrintsUsageAndReloadRules(t *testing.T) {
	clitest.Usage(t, run,
		"Usage: sluice-gateway", "-config", "-listen", "-backend", "-max-inflight", "-log-level", "-grace-period",
		"/readyz", "SIGHUP", "A reload may change", "Only a restart changes", "gateway.listen", "rejected-shutting-down",
		"fewest requests in flight",
	)
}

func TestBadFlagsExit2(t *testing.T) {
	cases := map[string][]string{
		"unknown flag":        {"-nope"},
		"bad backend":         {"-backend", "127.0.0.1:8000"},
		"backend twice":       {"-backend", "http://127.0.0.1:8000", "-backend", "http://127.0.0.1:8000"},
		"bad listen":          {"-listen", "8080"},
		"zero inflight":       {"-max-inflight", "0"},
		"negative grace":      {"-grace-period", "-1s"},
		"bad log level":       {"-log-level", "loud"},
		"bad objective":       {"-objective", "chat"},
		"stray argument":      {"serve"},
		"missing file":        {"-config", "/nonexistent/gateway.yaml"},
		"bad priority header": {"-priority-header", "bad header", "-max-inflight", "1"},
	}
	clitest.BadArgs(t, run, cases)
}

func TestFlagsWinOverTheFile(t *testing.T) {
	path := writeConfig(t, "", `
gateway:
  listen: 127.0.0.1:9000
  backends: [http://127.0.0.1:8001, http://127.0.0.1:8002]
  gracePeriod: 20s
gate:
  maxInFlight: 4
`)
	opts, err := parseFlags([]string{"-config", path, "-listen", "127.0.0.1:9100", "-backend", "http://127.0.0.1:8002",
		"-backend", "http://127.0.0.1:8003", "-max-inflight", "2", "-grace-period", "3s"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := load(opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.listen != "127.0.0.1:9100" || s.grace.String() != "3s" || s.gate.MaxInFlight == nil || *s.gate.MaxInFlight != 2 {
		t.Errorf("listen %s, grace %s, gate %s; want the flags'", s.listen, s.grace, s.gate)
	}
	// The flags' backends first, then the file's, each once.
	want := "http://127.0.0.1:8002 http://127.0.0.1:8003 http://127.0.0.1:8001"
	if got := strings.Join(s.backendNames(), " "); got != want {
		t.Errorf("backends %s, want %s", got, want)
	}
}

func TestDefaultsWithoutFile(t *testing.T) {
	opts, err := parseFlags(nil, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := load(opts)
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := net.SplitHostPort(s.listen)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Errorf("default listen %q: want a loopback address", s.listen)
	}
	if len(s.flow.Bands) != 1 || s.flow.Bands[0].Priority != 0 || s.flow.Bands[0].RequestCapacity.String() != "5000" {
		t.Errorf("bands %+v, want one band of priority 0 and 5000 places", s.flow.Bands)
	}
	if s.gate.Saturation == nil || s.gate.MaxInFlight != nil || s.gate.Concurrency != nil {
		t.Errorf("gate %s, want the saturation gate alone", s.gate)
	}
}

func TestObjectivesProvisionLLMDBands(t *testing.T) {
	path := writeConfig(t, "", `
kind: EndpointPickerConfig
flowControl:
  defaultPriorityBand:
    maxRequests: 30
  defaultNegativePriorityBand:
    maxRequests: 3
  priorityBands:
    - priority: 10
      maxRequests: 100
`)
	opts, err := parseFlags([]string{"-config", path, "-objective", "chat=10", "-objective", "batch=-10", "-objective", "bulk=5"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := load(opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{10: "100", 0: "30", -10: "3", 5: "30"}
	got := map[int]string{}
	for _, b := range s.flow.Bands {
		got[b.Priority] = b.RequestCapacity.String()
	}
	if len(got) != len(want) {
		t.Errorf("bands %v, want %v", got, want)
	}
	for p, c := range want {
		if got[p] != c {
			t.Errorf("band %d: capacity %q, want %s (all: %v)", p, got[p], c, got)
		}
	}
	if _, err := flowcontrol.New(s.flow); err != nil {
		t.Errorf("the controller refuses the bands: %v", err)
	}
}

func TestPickLeastInFlight(t *testing.T) {
	var urls []*url.URL
	for _, raw := range []string{"http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"} {
		u, _ := url.Parse(raw)
		urls = append(urls, u)
	}
	p := newPool(urls, poolConfig{log: slog.New(slog.DiscardHandler)})
	b := p.list()
	b[0].inFlight.Store(2)
	b[1].inFlight.Store(1)
	b[2].inFlight.Store(1)
	b[1].waiting.Store(4)
	for range 6 {
		if got := p.pick(); got != b[2] {
			t.Fatalf("picked %s, want %s: fewest in flight, then fewest waiting", got.name, b[2].name)
		}
	}
	b[2].failing.Store(true)
	if got := p.pick(); got != b[1] {
		t.Errorf("picked %s, want %s: the others' scrapes fail", got.name, b[1].name)
	}
	for _, x := range b {
		x.failing.Store(true)
		x.inFlight.Store(0)
		x.waiting.Store(0)
	}
	seen := map[*backend]int{}
	for range 30 {
		seen[p.pick()]++
	}
	for _, x := range b {
		if seen[x] != 10 {
			t.Errorf("when every scrape fails and all are idle, %s got %d of 30 picks, want 10", x.name, seen[x])
		}
	}
	// A reload keeps the counts of the backends that stay.
	p.set(urls[1:])
	if got := p.list(); len(got) != 2 || got[0] != b[1] || got[1] != b[2] {
		t.Errorf("after set, backends %v", got)
	}
	p.set(nil)
	if got := p.pick(); got != nil {
		t.Errorf("picked %s from no backend", got.name)
	}
}

// Issue 21, defect 11: a scrape interval at or over the default gate's
// staleness, which only the file can set, is refused with the file's line.
func TestSlowScrapeIntervalNamesItsLine(t *testing.T) {
	path := writeConfig(t, "", "# no gate: the default saturation gate\ngateway:\n  scrapeInterval: 200ms\n")
	opts, err := parseFlags([]string{"-config", path}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, err = load(opts)
	want := path + ":3:3: gateway.scrapeInterval: 200ms is not below"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("load: %v, want an error containing %q", err, want)
	}
}
