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
			c := DiffFlow(base(), next)
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
