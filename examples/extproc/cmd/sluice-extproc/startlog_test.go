package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/clitest"
)

// Issue 31, item 11: the start-up log gives each band the queue wait it
// runs with. A band of llm-d-router's form has no TTL of its own and
// waits defaultRequestTTL, which the log said was 0s.
func TestStartLogGivesEachBandItsEffectiveTTL(t *testing.T) {
	opts, err := parseFlags([]string{"-config", "../../../deploy/config/testdata/llmd.yaml", "-backend", "http://127.0.0.1:8001"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := describeBands(opts.controller)
	if strings.Contains(got, "ttl=0s") || strings.Count(got, "ttl=45s") != len(opts.controller.Bands) {
		t.Errorf("bands %q: want each at defaultRequestTTL, ttl=45s", got)
	}

	c := flowcontrol.Config{DefaultTTL: time.Minute, Bands: []flowcontrol.BandConfig{
		{Priority: 0}, {Priority: 1, TTL: 10 * time.Second}, {Priority: 2, TTL: 2 * time.Minute},
	}}
	if got, want := describeBands(c), "0: capacity=unbounded bytes=unbounded ttl=1m0s policy=fcfs-ordering-policy; "+
		"1: capacity=unbounded bytes=unbounded ttl=10s policy=fcfs-ordering-policy; "+
		"2: capacity=unbounded bytes=unbounded ttl=1m0s policy=fcfs-ordering-policy"; got != want {
		t.Errorf("describeBands = %q, want %q", got, want)
	}
	c.DefaultTTL = 0
	if got := describeBands(c); !strings.HasPrefix(got, "0: capacity=unbounded bytes=unbounded ttl=none ") {
		t.Errorf("describeBands without a default TTL = %q, want band 0 with ttl=none", got)
	}
}

// Issue 31, item 11: behind Envoy, Envoy picks each request's endpoint
// and sends the adapter no body. The file's warnings say so, not what
// sluice-gateway does; and -check-config prints the drain delay, the
// inference routes and the classification.
func TestCheckConfigSpeaksOfEnvoy(t *testing.T) {
	code, stdout, stderr := runCheck(t, "-check-config", "-config", "../../../deploy/config/testdata/llmd-datalayer.yaml",
		"-max-inflight", "8", "-drain-delay", "2s", "-objective", "chat=10", "-objective-header", "x-objective")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, gone := range []string{"fewest requests in flight", "Sluice reads a body only"} {
		if strings.Contains(stdout, gone) {
			t.Errorf("the output says %q, which does not happen behind Envoy:\n%s", gone, stdout)
		}
	}
	clitest.Holds(t, "the output", stdout,
		`plugins[0]: plugin \"queue-scorer\" (type queue-scorer): not read: a scheduling scorer, which weighs endpoints for each request: Sluice picks no endpoint: Envoy sends each admitted request to an endpoint of its cluster`,
		`plugins[4]: plugin \"openai-parser\" (type openai-parser): not read: a request parser: Envoy sends sluice-extproc no body`,
		`dataLayer: llm-d-router's data layer (its sources, extractors and endpoint discovery) is not read: Envoy's cluster is the endpoints`,
		"drainDelay: 2s\n",
		"inference: # admitted through flow control; every other request passes at once, neither queued nor gated\n  - \"POST /v1/completions\"\n",
		"  objectiveHeader: \"x-objective\"\n  objectives:\n    \"chat\": 10\n",
		"  cost: \"1 per request: Envoy sends the adapter no body\"\n",
	)
}
