package main

import (
	"bytes"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/examples/internal/long"
	"github.com/sluicegate/sluice/examples/internal/simtest"
	"github.com/sluicegate/sluice/flowcontrol"
)

func TestSimulationIsDeterministic(t *testing.T) {
	simtest.SameSeedSameBytes(t, DefaultConfig().Seed, func(seed uint64) []byte {
		cfg := DefaultConfig()
		cfg.Seed = seed
		results, err := Simulate(cfg, Variants())
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		PrintScenario(&b, cfg)
		PrintTable(&b, cfg, results)
		return b.Bytes()
	})
}

// variant returns the result of the variant named name with fair admission
// fair.
func variant(t *testing.T, results []Result, name string, fair bool) Result {
	t.Helper()
	for _, r := range results {
		if r.Variant.Name == name && r.Variant.FairAdmission == fair {
			return r
		}
	}
	t.Fatalf("no variant %s with fair admission %v", name, fair)
	return Result{}
}

// light returns the success rate of the light tenants together.
func light(cfg Config, r Result) float64 {
	var served, requests int
	for i, t := range r.Tenants {
		if cfg.Tenants[i].Rate > 0 {
			served, requests = served+t.Served, requests+t.Requests
		}
	}
	return float64(served) / float64(requests)
}

// heavy returns the heavy tenant's result.
func heavy(cfg Config, r Result) TenantResult {
	for i, t := range r.Tenants {
		if cfg.Tenants[i].Rate == 0 {
			return t
		}
	}
	panic("no heavy tenant")
}

// The comparisons of the issue, on the default scenario over seeds 1–10
// with SLUICE_LONG (see examples/internal/long), 1–2 by default or with
// -short:
//   - round-robin and DRR with fair admission serve every light tenant at
//     least 95% of its requests, while the heavy tenant absorbs the
//     overload: it takes every drop;
//   - global-strict without fair admission is the single queue of old: the
//     light tenants are served at the heavy tenant's rate, within a few
//     points per seed and within 1.5 on average — the band's overload is
//     shared in proportion to rates.
func TestFairnessProtectsLightTenants(t *testing.T) {
	cfg := DefaultConfig()
	seeds := 2
	if long.Enabled() && !testing.Short() {
		seeds = 10
	}
	var sumDiff float64 // light − heavy success under global-strict without fair admission
	for seed := 1; seed <= seeds; seed++ {
		cfg.Seed = uint64(seed)
		results, err := Simulate(cfg, Variants())
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"round-robin", "drr (prompt tokens)"} {
			r := variant(t, results, name, true)
			h := heavy(cfg, r)
			drops := 0
			for i, tr := range r.Tenants {
				drops += tr.Requests - tr.Served
				if cfg.Tenants[i].Rate > 0 && tr.Success() < 0.95 {
					t.Errorf("seed %d, %s with fair admission: %s served %.1f%%, want at least 95%%",
						seed, name, cfg.Tenants[i].Name, 100*tr.Success())
				}
			}
			if h.Requests-h.Served != drops || h.Success() > 0.8 {
				t.Errorf("seed %d, %s with fair admission: heavy tenant served %.1f%% and took %d of %d drops; want it to absorb the overload",
					seed, name, 100*h.Success(), h.Requests-h.Served, drops)
			}
		}
		strict := variant(t, results, "global-strict", false)
		h, l := heavy(cfg, strict).Success(), light(cfg, strict)
		if math.Abs(h-l) > 0.05 {
			t.Errorf("seed %d, global-strict without fair admission: light tenants served %.1f%%, heavy %.1f%%: want within 5 points",
				seed, 100*l, 100*h)
		}
		sumDiff += l - h
	}
	// Per seed the two differ by noise (up to 4 points in seeds 1–20);
	// on average they agree.
	if mean := sumDiff / float64(seeds); math.Abs(mean) > 0.015 {
		t.Errorf("global-strict without fair admission: light tenants served %.1f points more than the heavy one on average; want within 1.5",
			100*mean)
	}
}

// Global-strict is the default: configured or not, the band keeps one queue
// and every request gets the same outcome.
func TestGlobalStrictIsTheSingleQueue(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = 30 * time.Second
	for _, fair := range []bool{false, true} {
		results, err := Simulate(cfg, []Variant{
			{Name: "default", FairAdmission: fair},
			{Name: "global-strict", Fairness: flowcontrol.GlobalStrict(), FairAdmission: fair},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(results[0].Tenants, results[1].Tenants) {
			t.Errorf("fair admission %v: no policy %+v, global-strict %+v", fair, results[0].Tenants, results[1].Tenants)
		}
	}
}

// Every request has exactly one outcome: served, rejected, displaced or
// expired; and without fair admission nothing is displaced.
func TestEveryRequestAccountedFor(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = 30 * time.Second
	results, err := Simulate(cfg, Variants())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		for i, tr := range r.Tenants {
			if n := tr.Served + tr.Rejected + tr.Displaced + tr.Expired; n != tr.Requests {
				t.Errorf("%s/%v %s: %d outcomes for %d requests", r.Variant.Name, r.Variant.FairAdmission, cfg.Tenants[i].Name, n, tr.Requests)
			}
			if !r.Variant.FairAdmission && tr.Displaced != 0 {
				t.Errorf("%s without fair admission: %s had %d displaced", r.Variant.Name, cfg.Tenants[i].Name, tr.Displaced)
			}
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"Duration", func(c *Config) { c.Duration = 0 }},
		{"Servers", func(c *Config) { c.Servers = 0 }},
		{"Overload", func(c *Config) { c.Overload = math.NaN() }},
		{"Capacity", func(c *Config) { c.Capacity = -1 }},
		{"Tenants[1]", func(c *Config) { c.Tenants[1].Prompt = 0 }},
		{"exactly one heavy tenant", func(c *Config) { c.Tenants[1].Rate = 0 }},
		{"light tenants alone", func(c *Config) { c.Overload = 0.01 }},
	} {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		if _, err := Simulate(cfg, Variants()); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: got error %v, want one naming it", tc.name, err)
		}
	}
}

// Thirty seconds of the default scenario.
func Example() {
	cfg := DefaultConfig()
	cfg.Duration = 30 * time.Second
	results, err := Simulate(cfg, Variants())
	if err != nil {
		panic(err)
	}
	PrintTable(os.Stdout, cfg, results)
	// Output:
	// fairness  fair admission  tenant  sent  served  rejected  evicted  expired  p95 queue  served tok/s
	//         global-strict             off   batch   986   71.8%       278        0        0     2711ms        100629
	//                                        chat-a    71   70.4%        21        0        0     2739ms           642
	//                                        chat-b    62   69.4%        19        0        0     2673ms           537
	//                                        chat-c    50   72.0%        14        0        0     2681ms           490
	//         global-strict              on   batch   986   70.9%       249       38        0     2549ms         97696
	//                                        chat-a    71  100.0%         0        0        0     2574ms           935
	//                                        chat-b    62  100.0%         0        0        0     2570ms           798
	//                                        chat-c    50  100.0%         0        0        0     2541ms           669
	//           round-robin             off   batch   986   72.9%       267        0        0     3021ms        100915
	//                                        chat-a    71   71.8%        20        0        0      200ms           685
	//                                        chat-b    62   72.6%        17        0        0      179ms           567
	//                                        chat-c    50   74.0%        13        0        0      230ms           478
	//           round-robin              on   batch   986   71.2%       242       42        0     3255ms         99271
	//                                        chat-a    71  100.0%         0        0        0      190ms           935
	//                                        chat-b    62  100.0%         0        0        0      189ms           798
	//                                        chat-c    50  100.0%         0        0        0      213ms           669
	//   drr (prompt tokens)             off   batch   986   72.7%       269        0        0     3092ms        101147
	//                                        chat-a    71   84.5%        11        0        0      265ms           791
	//                                        chat-b    62   72.6%        17        0        0      273ms           570
	//                                        chat-c    50   76.0%        12        0        0      451ms           514
	//   drr (prompt tokens)              on   batch   986   70.1%       252       43        0     3290ms         97983
	//                                        chat-a    71  100.0%         0        0        0      356ms           935
	//                                        chat-b    62  100.0%         0        0        0      313ms           798
	//                                        chat-c    50  100.0%         0        0        0      323ms           669
}
