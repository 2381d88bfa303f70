package main

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/examples/internal/simtest"
	"github.com/sluicegate/sluice/ordering"
)

func TestSimulationIsDeterministic(t *testing.T) {
	simtest.SameSeedSameBytes(t, DefaultConfig().Seed, func(seed uint64) []byte {
		cfg := DefaultConfig()
		cfg.Seed = seed
		results, err := Simulate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		PrintTable(&b, cfg, results)
		return b.Bytes()
	})
}

func byPolicy(t *testing.T, results []Result) map[string]Result {
	t.Helper()
	m := map[string]Result{}
	for _, r := range results {
		m[r.Policy] = r
	}
	if len(m) != 3 {
		t.Fatalf("got results for %d policies, want 3", len(m))
	}
	return m
}

// The comparison the README prints: on the seeded default workload,
// SLO-deadline meets more SLOs and has more goodput than FCFS, and pays for
// it with the wait of requests that have no SLO.
func TestSLODeadlineBeatsFCFS(t *testing.T) {
	results, err := Simulate(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	m := byPolicy(t, results)
	fcfs, slo := m[ordering.FCFSPolicyName], m[ordering.SLODeadlinePolicyName]
	t.Logf("SLO met: fcfs %.3f, slo-deadline %.3f; goodput %.2f vs %.2f; no-SLO worst wait %v vs %v",
		fcfs.SLOShare(), slo.SLOShare(), fcfs.Goodput, slo.Goodput, fcfs.NoSLOWorstWait, slo.NoSLOWorstWait)
	if slo.SLOShare() <= fcfs.SLOShare() {
		t.Errorf("slo-deadline met %.3f of SLOs, fcfs %.3f: want slo-deadline ahead", slo.SLOShare(), fcfs.SLOShare())
	}
	if slo.Goodput <= fcfs.Goodput {
		t.Errorf("slo-deadline goodput %.2f, fcfs %.2f: want slo-deadline ahead", slo.Goodput, fcfs.Goodput)
	}
	if slo.NoSLOWorstWait <= fcfs.NoSLOWorstWait {
		t.Errorf("no-SLO worst wait: slo-deadline %v, fcfs %v: want the starvation to show", slo.NoSLOWorstWait, fcfs.NoSLOWorstWait)
	}
}

// Every request gets exactly one outcome, and the pool serves no more than
// it can.
func TestEveryRequestAccountedFor(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = time.Minute
	results, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	capacity := float64(cfg.Servers) / (cfg.MeanPrefill + cfg.MeanDecode).Seconds()
	for _, r := range results {
		n := 0
		for _, c := range r.PerClass {
			n += c.Requests
		}
		if n != r.Requests {
			t.Errorf("%s: %d outcomes for %d requests", r.Policy, n, r.Requests)
		}
		if r.Goodput > 1.1*capacity {
			t.Errorf("%s: goodput %.2f above the pool's capacity %.2f", r.Policy, r.Goodput, capacity)
		}
		if r.NoSLOWorstWait > cfg.BandTTL {
			t.Errorf("%s: a request without SLO waited %v, beyond the band TTL %v", r.Policy, r.NoSLOWorstWait, cfg.BandTTL)
		}
	}
}

// Without overload every policy serves everything and the order hardly
// matters.
func TestNoOverloadServesAll(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = time.Minute
	cfg.Overload = 0.3
	results, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Expired != 0 {
			t.Errorf("%s: %d requests expired at 0.3x load", r.Policy, r.Expired)
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"Servers", func(c *Config) { c.Servers = 0 }},
		{"Duration", func(c *Config) { c.Duration = 0 }},
		{"Overload", func(c *Config) { c.Overload = 0 }},
		{"BandTTL", func(c *Config) { c.BandTTL = -1 }},
		{"Classes", func(c *Config) { c.Classes = nil }},
		{"Classes[1]", func(c *Config) { c.Classes[1].Share = math.NaN() }},
		{"Share", func(c *Config) { c.Classes = []Class{{Name: "x"}} }},
		// An arrival rate whose gaps round to zero microseconds would stall
		// the generator's clock.
		{"Overload", func(c *Config) { c.Overload = math.Inf(1) }},
		{"Overload", func(c *Config) { c.Overload = 1e12 }},
	} {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		done := make(chan error, 1)
		go func() {
			_, err := Simulate(cfg)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.name) {
				t.Errorf("%s: got error %v, want one naming the field", tc.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Simulate with Overload %v still running after 10s, want an error", tc.name, cfg.Overload)
		}
	}
}

// A three-minute run of the default workload.
func Example() {
	cfg := DefaultConfig()
	cfg.Duration = 3 * time.Minute
	results, err := Simulate(cfg)
	if err != nil {
		panic(err)
	}
	PrintTable(os.Stdout, cfg, results)
	// Output:
	// policy  SLO met  tight met  loose met  none served  goodput req/s  expired  worst wait, no SLO
	//           fcfs-ordering-policy    10.5%       0.4%      20.6%       100.0%           5.08      527                6.8s
	//            edf-ordering-policy    43.3%      50.3%      36.4%        90.2%           6.46      193               60.0s
	//   slo-deadline-ordering-policy    97.5%      94.9%     100.0%        61.3%           9.92      299               60.0s
}
