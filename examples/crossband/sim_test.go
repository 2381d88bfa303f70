package main

import (
	"bytes"
	"testing"

	"github.com/sluicegate/sluice/examples/internal/sim"
)

// variant returns the index of the row named name.
func variant(t *testing.T, c *Comparison, name string) int {
	t.Helper()
	for v, va := range c.Variants {
		if va.Name == name {
			return v
		}
	}
	t.Fatalf("no row %q", name)
	return -1
}

// metSLO counts the seeds on which row v met the goal's SLO share.
func metSLO(c *Comparison, v int) int {
	n := 0
	for _, r := range c.Runs[v] {
		if r.SLOMet >= GoalSLO {
			n++
		}
	}
	return n
}

// The table the README prints, seeds 1–20, and what it shows: every
// ceiling that tells the bands apart protects chat better than strict
// priority on every seed, and costs batch throughput, more as it
// tightens; llm-d's static ceiling, the same for both bands, protects
// neither; and no ceiling reaches the goal.
func TestCeilingsTradeBatchForChat(t *testing.T) {
	c, err := Compare(Variants, sim.SeedRange(1, 20))
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	c.Print(&table)
	t.Logf("\n%s", table.String())

	strict := variant(t, c, "strict priority")
	alone := variant(t, c, "chat alone (the bound)")
	static75, static50 := variant(t, c, "static-usage-limit 0.75"), variant(t, c, "static-usage-limit 0.5")
	hold75, hold50, hold25 := variant(t, c, "priority-holdback min 0.75"), variant(t, c, "priority-holdback min 0.5"), variant(t, c, "priority-holdback min 0.25")
	soft := variant(t, c, "soft-reflective-ceiling")

	// Chat alone never waits: each first token comes one prefill after
	// the request.
	prefill := base + chatPrompt*perPromptToken
	for i, r := range c.Runs[alone] {
		if r.SLOMet != 1 || r.P99 != prefill {
			t.Errorf("chat alone, seed %d: SLO met %.3f, p99 %v; want 1 and the bare prefill %v", c.Seeds[i], r.SLOMet, r.P99, prefill)
		}
	}

	for i, seed := range c.Seeds {
		at := func(v int) Run { return c.Runs[v][i] }
		// A ceiling below the chat band only protects chat better than
		// strict priority; one that caps both bands alike protects it
		// worse, since chat too must wait under it for batch to end.
		for _, v := range []int{hold75, hold50, hold25, soft} {
			if at(v).SLOMet <= at(strict).SLOMet {
				t.Errorf("seed %d: %s meets the SLO for %.3f of chat, strict priority %.3f: want more",
					seed, c.Variants[v].Name, at(v).SLOMet, at(strict).SLOMet)
			}
		}
		for _, v := range []int{static75, static50} {
			if at(v).SLOMet >= at(strict).SLOMet {
				t.Errorf("seed %d: %s meets the SLO for %.3f of chat, strict priority %.3f: want less",
					seed, c.Variants[v].Name, at(v).SLOMet, at(strict).SLOMet)
			}
		}
		// Batch throughput falls as the ceiling tightens; soft-reflective
		// keeps more of it than the loosest holdback.
		for _, chain := range [][]int{{strict, soft, hold75, hold50, hold25}, {strict, static75, static50}} {
			for k := 1; k < len(chain); k++ {
				if hi, lo := at(chain[k-1]).BatchPerSecond, at(chain[k]).BatchPerSecond; lo >= hi {
					t.Errorf("seed %d: batch %.2f/s under %s, %.2f/s under %s: want less under the second",
						seed, hi, c.Variants[chain[k-1]].Name, lo, c.Variants[chain[k]].Name)
				}
			}
		}
		// Nothing is revoked yet, so nothing is wasted.
		for v := range c.Variants {
			if r := at(v); r.WastedTokens != 0 || r.Revocations != 0 {
				t.Errorf("seed %d: %s: %d wasted tokens, %d revocations; want none", seed, c.Variants[v].Name, r.WastedTokens, r.Revocations)
			}
		}
	}

	// The SLO met on every seed, or nearly, costs half the batch
	// throughput or more; the looser ceilings keep more and miss it.
	for _, want := range []struct {
		v          int
		atLeast    int
		atMost     int
		maxOfBatch float64
	}{
		{hold25, 20, 20, 0.25},
		{hold50, 19, 19, 0.50},
		{hold75, 0, 1, 0.80},
		{soft, 0, 0, 0.90},
	} {
		n, share := metSLO(c, want.v), c.BatchShare(want.v)
		if n < want.atLeast || n > want.atMost || share.Max > want.maxOfBatch {
			t.Errorf("%s: SLO met on %d of 20 seeds, batch %v of strict priority's; want %d–%d seeds and at most %.2f",
				c.Variants[want.v].Name, n, share, want.atLeast, want.atMost, want.maxOfBatch)
		}
	}

	// The goal needs what runs to give way: no ceiling reaches it.
	for v, va := range c.Variants {
		if va.Ceiling && c.MeetsGoal(v) {
			t.Errorf("%s meets the goal: the README says no ceiling does", va.Name)
		}
	}
	// The frontier: the static ceilings are beaten on both medians; the
	// others trade one for the other.
	rows, beaten := c.Frontier()
	for k, v := range rows {
		wantBeaten := v == static75 || v == static50 || v == hold25
		if beaten[k] != wantBeaten {
			t.Errorf("%s: beaten on the frontier %v, want %v", c.Variants[v].Name, beaten[k], wantBeaten)
		}
	}
}

// Same seed, same bytes: the table and the detail, twice, with the runs
// spread over goroutines in whatever order they finish.
func TestSameSeedSameBytes(t *testing.T) {
	table := func(seed uint64) []byte {
		c, err := Compare(Variants, []uint64{seed})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		c.Print(&b)
		return b.Bytes()
	}
	if first := table(7); !bytes.Equal(first, table(7)) {
		t.Fatal("seed 7 printed two different tables")
	} else if bytes.Equal(first, table(8)) {
		t.Fatal("seeds 7 and 8 printed the same table")
	}
	detail := func() []byte {
		var b bytes.Buffer
		if err := PrintDetail(&b, Variants, 3); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if !bytes.Equal(detail(), detail()) {
		t.Fatal("seed 3 printed two different details")
	}
}
