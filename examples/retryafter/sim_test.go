package main

import (
	"bytes"
	"testing"
	"time"
)

func detail(t *testing.T, seed uint64) string {
	t.Helper()
	results, err := Run(seed, Designs())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	PrintDetail(&b, results)
	return b.String()
}

func TestDeterministic(t *testing.T) {
	first, second := detail(t, 1), detail(t, 1)
	if first != second {
		t.Fatalf("same seed, different tables:\n%s\n%s", first, second)
	}
	if detail(t, 2) == first {
		t.Fatal("seeds 1 and 2 printed the same table")
	}
}

func byName(t *testing.T, designs []Design, name string) int {
	t.Helper()
	for i, d := range designs {
		if d.Name == name {
			return i
		}
	}
	t.Fatalf("no design %q", name)
	return -1
}

// The comparison the README prints, over seeds 1–10. The winner among
// whole-second Retry-After values is (d), spread over the busy-time drain
// rate: it wastes less than half the retries of no Retry-After, of the old
// queue ÷ rate projection and of llm-d #2487's 1/rate, gives up on fewer
// requests, and serves at least as much as every other whole-second design.
// It pays in the latency of the requests it serves (which the others serve
// fewer of, giving the rest up). Sent to the millisecond, (e), it wastes
// fewer retries still. The controller's own Retry-After does as well as (d).
func TestSpreadOverBusyRateWins(t *testing.T) {
	designs := Designs()
	aggs, err := Compare(10, designs)
	if err != nil {
		t.Fatal(err)
	}
	d := aggs[byName(t, designs, "(d) spread, busy rate")]
	for _, a := range aggs {
		t.Logf("%-24s wasted %v goodput %v p95 %v give-ups %v", a.Design, a.Wasted, a.Goodput, a.P95, a.GiveUps)
	}
	for _, name := range []string{"none", "(a) queue ÷ rate", "(b) 1/rate, llm-d #2487"} {
		o := aggs[byName(t, designs, name)]
		if 2*d.Wasted.Median >= o.Wasted.Median {
			t.Errorf("wasted retries, median: (d) %v, %s %v: want less than half", d.Wasted.Median, name, o.Wasted.Median)
		}
		if d.GiveUps.Median >= o.GiveUps.Median {
			t.Errorf("give-ups, median: (d) %v, %s %v: want fewer", d.GiveUps.Median, name, o.GiveUps.Median)
		}
	}
	for _, name := range []string{"none", "(a) queue ÷ rate", "(b) 1/rate, llm-d #2487", "(c) spread"} {
		o := aggs[byName(t, designs, name)]
		if d.Goodput.Median < o.Goodput.Median || d.Goodput.Min < o.Goodput.Min {
			t.Errorf("goodput: (d) %v, %s %v: want at least as much", d.Goodput, name, o.Goodput)
		}
	}
	if e := aggs[byName(t, designs, "(e) (d) in ms")]; e.Wasted.Median >= d.Wasted.Median {
		t.Errorf("wasted retries, median: (e) %v, (d) %v: want fewer to the millisecond", e.Wasted.Median, d.Wasted.Median)
	}
	c := aggs[byName(t, designs, "controller")]
	if c.Wasted.Median > 1.1*d.Wasted.Median || c.Goodput.Median < 0.99*d.Goodput.Median {
		t.Errorf("controller: wasted %v, goodput %v; (d): %v, %v: want the controller to do as well",
			c.Wasted.Median, c.Goodput.Median, d.Wasted.Median, d.Goodput.Median)
	}
}

// The defect that started it: after the batch band idles for 45 s, the old
// projection answers the first rejection of the next burst with 30 s, and
// spread over a wall-clock rate with several seconds; spread over the
// busy-time rate with 1 s, as does the controller.
func TestIdleDoesNotInflate(t *testing.T) {
	designs := Designs()
	results, err := Run(1, designs)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, ok func(time.Duration) bool, want string) {
		r := results[byName(t, designs, name)]
		if len(r.AfterIdle) == 0 {
			t.Errorf("%s: no rejection after an idle stretch: the scenario lost its idle gaps", name)
		}
		for _, ra := range r.AfterIdle {
			if !ok(ra) {
				t.Errorf("%s: first Retry-After after idle %v, want %s", name, r.AfterIdle, want)
				return
			}
		}
	}
	check("(a) queue ÷ rate", func(d time.Duration) bool { return d == maxRetryAfter }, "30s (the defect)")
	check("(d) spread, busy rate", func(d time.Duration) bool { return d <= time.Second }, "at most 1s")
	check("controller", func(d time.Duration) bool { return d <= time.Second }, "at most 1s")
	check("(c) spread", func(d time.Duration) bool { return d > 2*time.Second }, "more than 2s (the wall-clock rate)")
}
