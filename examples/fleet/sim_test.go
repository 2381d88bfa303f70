package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/examples/internal/long"
	"github.com/sluicegate/sluice/examples/internal/sim"
)

// seeds are the seeds the comparisons are asserted on: 1–10, as the README
// prints them, with SLUICE_LONG (see examples/internal/long); by default
// seed 1.
func seeds() []uint64 {
	if long.Enabled() {
		return sim.SeedRange(1, 10)
	}
	return sim.SeedRange(1, 1)
}

// setup returns the index of the setup named name.
func setup(t *testing.T, name string) int {
	t.Helper()
	for s, st := range Setups {
		if st.Name == name {
			return s
		}
	}
	t.Fatalf("no setup %q", name)
	return -1
}

// The comparisons the README states, seed by seed.
func TestComparisons(t *testing.T) {
	c, err := Compare(seeds(), DefaultSync)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c.Print(&out)
	t.Log("\n" + out.String())

	// Nothing is lost: every slot has returned at the end of every run.
	for a := range Admissions {
		for s := range Setups {
			for i, r := range c.CrossBand[a][s] {
				if r.InFlight != 0 {
					t.Errorf("%s, %s, seed %d: %d in flight at the end", Admissions[a].Name, Setups[s].Name, c.Seeds[i], r.InFlight)
				}
			}
		}
	}
	for s := range Setups {
		for i, r := range c.Fairness[s] {
			if r.InFlight != 0 {
				t.Errorf("fairness, %s, seed %d: %d in flight at the end", Setups[s].Name, c.Seeds[i], r.InFlight)
			}
		}
	}

	const evict = 1 // Admissions: eviction (16, 800ms)
	for _, name := range []string{"2 replicas, synced", "4 replicas, synced"} {
		s := setup(t, name)
		// Synced replicas meet the goal on chat SLO attainment with
		// eviction, and on the light tenant's share, on every seed.
		for i, d := range c.SLOVsOne(evict, s) {
			if d < -Goal {
				t.Errorf("%s, eviction, seed %d: chat SLO %+.1f pp from one controller, want within %v", name, c.Seeds[i], d, Goal)
			}
		}
		for i, d := range c.LightVsOne(s) {
			if d < -Goal {
				t.Errorf("%s, seed %d: light tenant %+.1f pp from one controller, want within %v", name, c.Seeds[i], d, Goal)
			}
		}
	}
	// With the hand-off (servers that schedule by priority, and
	// fleet.Config.PriorityScheduling), synced replicas keep chat and
	// batch within the goal of one controller on every seed, and revoke
	// nothing.
	const handOff = 2 // Admissions: vLLM priority + hand-off
	for _, name := range []string{"2 replicas, synced", "4 replicas, synced"} {
		s := setup(t, name)
		slo, batch := c.SLOVsOne(handOff, s), c.BatchVsOne(handOff, s)
		for i := range c.Seeds {
			if slo[i] < -Goal || batch[i] < -Goal {
				t.Errorf("%s, hand-off, seed %d: chat %+.1f pp, batch %+.1f%% from one controller, want within %v", name, c.Seeds[i], slo[i], batch[i], Goal)
			}
			if r := c.CrossBand[handOff][s][i].Revocations; r != 0 {
				t.Errorf("%s, hand-off, seed %d: %d revocations, want none", name, c.Seeds[i], r)
			}
		}
	}
	// Against replicas that share nothing, the fleet view revokes fewer
	// batch requests on every seed, and with 4 replicas loses less batch
	// goodput on the median seed.
	for _, r := range []int{2, 4} {
		synced, unsynced := setup(t, strconv.Itoa(r)+" replicas, synced"), setup(t, strconv.Itoa(r)+" replicas, unsynced")
		for i := range c.Seeds {
			sy, un := c.CrossBand[evict][synced][i], c.CrossBand[evict][unsynced][i]
			if sy.Revocations >= un.Revocations {
				t.Errorf("%d replicas, seed %d: %d revocations synced, %d unsynced; want fewer synced", r, c.Seeds[i], sy.Revocations, un.Revocations)
			}
		}
		if r == 4 {
			sy, un := sim.SpreadOf(c.BatchVsOne(evict, synced)).Median, sim.SpreadOf(c.BatchVsOne(evict, unsynced)).Median
			if sy <= un {
				t.Errorf("4 replicas: batch goodput %+.1f%% synced, %+.1f%% unsynced on the median seed; want less lost synced", sy, un)
			}
		}
	}
	// With eviction, 2 synced replicas keep batch goodput within the goal
	// on every seed; 4, on the median seed (a claim of the ten seeds
	// together: SLUICE_LONG only; seed 1 alone is 2.0% short).
	for i, d := range c.BatchVsOne(evict, setup(t, "2 replicas, synced")) {
		if d < -Goal {
			t.Errorf("2 replicas, synced, eviction, seed %d: batch goodput %+.1f%% from one controller, want within %v", c.Seeds[i], d, Goal)
		}
	}
	if long.Enabled() {
		if d := sim.SpreadOf(c.BatchVsOne(evict, setup(t, "4 replicas, synced"))).Median; d < -Goal {
			t.Errorf("4 replicas, synced, eviction: batch goodput %+.1f%% from one controller on the median seed, want within %v", d, Goal)
		}
	}

	// The overdraft is what closes the gap: without it (replicas that never
	// pass their share) the synced replicas revoke more on every seed, and
	// lose more batch goodput on the median seed.
	none := DefaultSync
	none.Overdraft = 0
	c0, err := CompareUnder(c.Seeds, none, Admissions[:evict+1])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"2 replicas, synced", "4 replicas, synced"} {
		s := setup(t, name)
		for i := range c.Seeds {
			with, without := c.CrossBand[evict][s][i].Revocations, c0.CrossBand[evict][s][i].Revocations
			if with >= without {
				t.Errorf("%s, seed %d: %d revocations with the overdraft, %d without; want fewer with", name, c.Seeds[i], with, without)
			}
		}
		with, without := sim.SpreadOf(c.BatchVsOne(evict, s)).Median, sim.SpreadOf(c0.BatchVsOne(evict, s)).Median
		if with <= without {
			t.Errorf("%s: batch goodput %+.1f%% with the overdraft, %+.1f%% without, on the median seed; want less lost with", name, with, without)
		}
	}

	// Under strict priority, synced replicas keep chat within the goal of
	// one controller on at least 9 seeds of 10, and on more seeds than
	// unsynced ones or synced ones without the overdraft (claims of the ten
	// seeds together: SLUICE_LONG only).
	if long.Enabled() {
		within := func(vs []float64) int {
			n := 0
			for _, d := range vs {
				if d >= -Goal {
					n++
				}
			}
			return n
		}
		for _, r := range []int{2, 4} {
			synced, unsynced := setup(t, strconv.Itoa(r)+" replicas, synced"), setup(t, strconv.Itoa(r)+" replicas, unsynced")
			if sy, un := within(c.SLOVsOne(0, synced)), within(c.SLOVsOne(0, unsynced)); sy <= un || sy < 9 {
				t.Errorf("%d replicas, strict priority: chat within %v pp on %d seeds synced, %d unsynced; want at least 9, and more synced", r, Goal, sy, un)
			}
			if sy, sy0 := within(c.SLOVsOne(0, synced)), within(c0.SLOVsOne(0, synced)); sy <= sy0 {
				t.Errorf("%d replicas, strict priority: chat within %v pp on %d seeds with the overdraft, %d without; want more with", r, Goal, sy, sy0)
			}
		}
	}
	if !strings.Contains(out.String(), "within 2 pp of one controller") {
		t.Error("the summary line is missing")
	}
}
