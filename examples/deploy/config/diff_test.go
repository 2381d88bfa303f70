package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/ordering"
)

func TestDiffFlow(t *testing.T) {
	base := func() flowcontrol.Config {
		return flowcontrol.Config{Bands: []flowcontrol.BandConfig{
			{Priority: 0, RequestCapacity: capacity.Bounded(10)},
			{Priority: -5, RequestCapacity: capacity.Bounded(10), Policy: ordering.EDF(),
				Fairness: flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{Weights: map[string]int64{"a": 2}})},
		}}
	}
	cases := []struct {
		name      string
		edit      func(*flowcontrol.Config)
		restart   []string
		live      []string
		provision []int // the priorities provisioned, in order
		added     []int
	}{
		{name: "same", edit: func(*flowcontrol.Config) {}},
		{name: "capacities and TTL", edit: func(c *flowcontrol.Config) {
			c.Bands[0].RequestCapacity = capacity.Bounded(20)
			c.Bands[0].CostCapacity = capacity.Bounded(1000)
			c.Bands[1].TTL = 3 * time.Second
		}, live: []string{"band 0 maxRequests 10 → 20", "band 0 maxCost unbounded → 1000", "band -5 ttl 0s → 3s"}, provision: []int{0, -5}},
		{name: "new band", edit: func(c *flowcontrol.Config) {
			c.Bands = append(c.Bands, flowcontrol.BandConfig{Priority: 7, RequestCapacity: capacity.Bounded(1)})
		}, live: []string{"band 7 added (maxRequests 1, ttl 0s, fcfs-ordering-policy)"}, provision: []int{7}, added: []int{7}},
		{name: "band removed", edit: func(c *flowcontrol.Config) { c.Bands = c.Bands[:1] }, restart: []string{"band -5 removed"}},
		{name: "ordering", edit: func(c *flowcontrol.Config) { c.Bands[0].Policy = ordering.EDF() },
			restart: []string{"band 0 ordering fcfs-ordering-policy → edf-ordering-policy", "band 0 queue fifo → heap"}},
		{name: "the default ordering named", edit: func(c *flowcontrol.Config) {
			c.Bands[0].Policy, c.Bands[0].Queue = ordering.FCFS(), ordering.QueueFIFO
		}},
		{name: "DRR weights", edit: func(c *flowcontrol.Config) {
			c.Bands[1].Fairness = flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{Weights: map[string]int64{"a": 3}})
		}, restart: []string{"band -5 fairness deficit-round-robin-fairness-policy → deficit-round-robin-fairness-policy"}},
		{name: "global strict named", edit: func(c *flowcontrol.Config) { c.Bands[0].Fairness = flowcontrol.GlobalStrict() }},
		{name: "controller-wide", edit: func(c *flowcontrol.Config) {
			c.RequestCapacity = capacity.Bounded(100)
			c.DefaultTTL = time.Second
			c.NoDisplacement = true
			c.FallbackPriority = -5
		}, restart: []string{"controller-wide maxRequests unbounded → 100", "defaultTTL 0s → 1s",
			"fallbackPriority 0 → -5", "displacement true → false"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next := base()
			tc.edit(&next)
			c := diffFlow(base(), next)
			for _, want := range tc.restart {
				if !strings.Contains(strings.Join(c.Restart, "; "), want) {
					t.Errorf("restart reasons %q lack %q", c.Restart, want)
				}
			}
			if len(tc.restart) == 0 && len(c.Restart) > 0 {
				t.Errorf("restart reasons %q, want none", c.Restart)
			}
			if diff := cmp.Diff(tc.live, c.Live); len(tc.restart) == 0 && diff != "" {
				t.Errorf("live changes (-want +got):\n%s", diff)
			}
			var provisioned []int
			for _, b := range c.Provision {
				provisioned = append(provisioned, b.Priority)
			}
			if diff := cmp.Diff(tc.provision, provisioned); len(tc.restart) == 0 && diff != "" {
				t.Errorf("provisioned bands (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.added, c.Added); diff != "" {
				t.Errorf("added bands (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGateString(t *testing.T) {
	n := 4
	for _, tc := range []struct {
		g    Gate
		want string
	}{
		{Gate{}, "none"},
		{Gate{MaxInFlight: &n}, "[maxInFlight 4]"},
		{Gate{MaxInFlight: &n, Concurrency: &Concurrency{Mode: "requests", MaxConcurrency: 8, PerEndpoint: true}},
			"[maxInFlight 4 concurrency (requests, maxConcurrency 8, maxTokenConcurrency 0 per endpoint)]"},
	} {
		if got := tc.g.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

func TestDiff(t *testing.T) {
	four, five := 4, 5
	base := func() Running {
		return Running{
			Flow:     flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}},
			Gate:     Gate{MaxInFlight: &four},
			Backends: []string{"http://127.0.0.1:8001"}, ScrapeInterval: 50 * time.Millisecond,
			ScrapeTimeout: time.Second, GracePeriod: 5 * time.Second,
		}
	}
	perEndpoint := Gate{Concurrency: &Concurrency{Mode: "requests", MaxConcurrency: 8, PerEndpoint: true}}
	cases := []struct {
		name          string
		edit          func(*Running)
		old           func(*Running) // applied to the running side too
		restart, live []string
	}{
		{name: "same", edit: func(*Running) {}},
		{name: "backends and grace", edit: func(r *Running) {
			r.Backends = append(r.Backends, "http://127.0.0.1:8002")
			r.GracePeriod = 9 * time.Second
		}, live: []string{"backends [http://127.0.0.1:8001] → [http://127.0.0.1:8001 http://127.0.0.1:8002]", "grace period 5s → 9s"}},
		{name: "drain delay", edit: func(r *Running) { r.DrainDelay = 2 * time.Second },
			live: []string{"drain delay 0s → 2s"}},
		{name: "gate threshold", edit: func(r *Running) { r.Gate = Gate{MaxInFlight: &five} },
			restart: []string{"the gate: [maxInFlight 4] → [maxInFlight 5]"}},
		{name: "scraping", edit: func(r *Running) { r.ScrapeInterval, r.ScrapeTimeout = 20*time.Millisecond, 2*time.Second },
			restart: []string{"gateway.scrapeInterval 50ms → 20ms", "gateway.scrapeTimeout 1s → 2s"}},
		{name: "backends of a per-endpoint budget", old: func(r *Running) { r.Gate = perEndpoint },
			edit:    func(r *Running) { r.Gate = perEndpoint; r.Backends = append(r.Backends, "http://127.0.0.1:8002") },
			restart: []string{"the number of backends 1 → 2, by which the concurrency gate's per-endpoint budgets are multiplied"},
			live:    []string{"backends [http://127.0.0.1:8001] → [http://127.0.0.1:8001 http://127.0.0.1:8002]"}},
		{name: "with the controller's", edit: func(r *Running) { r.Flow.DefaultTTL = time.Second; r.Gate = Gate{} },
			restart: []string{"the gate: [maxInFlight 4] → none", "defaultTTL 0s → 1s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, next := base(), base()
			if tc.old != nil {
				tc.old(&old)
			}
			tc.edit(&next)
			c := Diff(old, next)
			if diff := cmp.Diff(tc.restart, c.Restart); diff != "" {
				t.Errorf("restart reasons (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.live, c.Live); diff != "" {
				t.Errorf("live changes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChangeApply(t *testing.T) {
	fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(10)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	capacityOf := func(p int) capacity.Limit {
		t.Helper()
		s, err := fc.CapacitySnapshot(p)
		if err != nil {
			t.Fatal(err)
		}
		return s.RequestCapacity
	}
	var watched []int
	watch := func(p int) { watched = append(watched, p) }
	grow := []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(20)}, {Priority: 7, RequestCapacity: capacity.Bounded(3)}}

	refused := Change{Provision: grow, Added: []int{7}, Restart: []string{"band -5 removed", "defaultTTL 0s → 1s"}}
	if err := refused.Apply(fc, watch); err == nil || !strings.Contains(err.Error(), "band -5 removed; defaultTTL 0s → 1s") {
		t.Errorf("Apply with restart reasons: %v, want an error listing them", err)
	}
	if got := capacityOf(0); got != capacity.Bounded(10) || len(watched) > 0 {
		t.Errorf("a refused change applied: capacity %s, watched %v", got, watched)
	}

	if err := (Change{Provision: grow, Added: []int{7}}).Apply(fc, watch); err != nil {
		t.Fatal(err)
	}
	if capacityOf(0) != capacity.Bounded(20) || capacityOf(7) != capacity.Bounded(3) {
		t.Errorf("after Apply: capacities %s and %s, want 20 and 3", capacityOf(0), capacityOf(7))
	}
	if diff := cmp.Diff([]int{7}, watched); diff != "" {
		t.Errorf("watched bands (-want +got):\n%s", diff)
	}
}
