package main

import (
	"bytes"
	"testing"

	"github.com/sluicegate/sluice/examples/internal/long"
	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/examples/internal/simtest"
)

// columnByName returns the column the tables print under name.
func columnByName(t *testing.T, name string) Column {
	t.Helper()
	for _, c := range Columns {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no column %q", name)
	return Column{}
}

// The comparison the README prints: on every scenario, over seeds 1–20,
// Sluice's window is refused for capacity less often than the
// llm-d-async-style gate (fewer in total, unless neither is refused at
// all, and a median and maximum no higher), and the band does no less work: the minimum, median and maximum
// of the band's goodput are at least 99% of the gate's. Alone on the band,
// the dispatcher's own median goodput is no lower either. (With several
// dispatchers the gate's own goodput is higher — taken from the interactive
// tenants, whose served share the table prints.)
//
// Seeds 1–20 with SLUICE_LONG (see examples/internal/long), 1–5 with it
// under the race detector (ten times slower) or -short; by default seeds
// 1–3: the same comparison. (On seed 1 alone the dispatcher's goodput is
// a hair under the gate's: the medians need more than one seed.)
func TestWindowBeatsAsyncGate(t *testing.T) {
	last := uint64(3)
	switch {
	case long.Enabled() && !raceEnabled && !testing.Short():
		last = 20
	case long.Enabled():
		last = 5
	}
	c, err := Compare(Scenarios, Variants[:2], sim.SeedRange(1, last))
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	c.Print(&table)
	t.Logf("\n%s", table.String())

	var allWin, allGate int
	sat, band, own := columnByName(t, "saturated"), columnByName(t, "band goodput req/s"), columnByName(t, "goodput req/s")
	for s, sc := range c.Scenarios {
		win, gate := c.Spread(s, 0, sat), c.Spread(s, 1, sat)
		var winTotal, gateTotal int
		for i := range c.Seeds {
			winTotal += c.Runs[s][0][i].Saturated
			gateTotal += c.Runs[s][1][i].Saturated
		}
		allWin += winTotal
		allGate += gateTotal
		// A scenario where the gate too is never refused can only tie.
		if winTotal > gateTotal || (gateTotal > 0 && winTotal == gateTotal) || win.Median > gate.Median || win.Max > gate.Max {
			t.Errorf("%s: capacity rejections: window %d in total, %v; gate %d, %v: want fewer",
				sc.Name, winTotal, win, gateTotal, gate)
		}
		wb, gb := c.Spread(s, 0, band), c.Spread(s, 1, band)
		if wb.Min < 0.99*gb.Min || wb.Median < 0.99*gb.Median || wb.Max < 0.99*gb.Max {
			t.Errorf("%s: band goodput: window %v, gate %v: want no lower", sc.Name, wb, gb)
		}
		if sc.Dispatchers == 1 {
			if wo, go_ := c.Spread(s, 0, own), c.Spread(s, 1, own); wo.Median < go_.Median {
				t.Errorf("%s: the dispatcher's goodput: window %v, gate %v: want no lower", sc.Name, wo, go_)
			}
		}
	}
	if allWin >= allGate {
		t.Errorf("capacity rejections over every scenario and seed: window %d, gate %d: want fewer", allWin, allGate)
	}
}

// Same seed, same bytes: the whole printout, twice, with the runs spread
// over goroutines in whatever order they finish. By default the first two
// scenarios only (one band shared, and a band of its own); every one with
// SLUICE_LONG.
func TestSameSeedSameBytes(t *testing.T) {
	scenarios := Scenarios[:2]
	if long.Enabled() {
		scenarios = Scenarios
	}
	simtest.SameSeedSameBytes(t, 7, func(seed uint64) []byte {
		c, err := Compare(scenarios, Variants[:3], []uint64{seed})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		c.Print(&b)
		return b.Bytes()
	})
}
