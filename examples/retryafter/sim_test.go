package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluicegate/sluice/examples/internal/long"
	"github.com/sluicegate/sluice/examples/internal/sim"
)

// comparedSeeds is how many seeds the comparisons run over: 10, as the
// README prints them, with SLUICE_LONG (see examples/internal/long); by
// default fewer, on which the same comparisons of medians hold.
func comparedSeeds() int {
	if long.Enabled() {
		return 10
	}
	return 3
}

// detail prints the one-seed table of seed: of Scenario's five minutes with
// SLUICE_LONG, and by default of its first 100 s, one cycle of the batch
// tenant (busy, idle, burst).
func detail(t *testing.T, seed uint64) string {
	t.Helper()
	scenario := Scenario
	if !long.Enabled() {
		scenario = func(seed uint64) sim.Config {
			cfg := Scenario(seed)
			cfg.Duration = 100 * time.Second
			return cfg
		}
	}
	results, err := RunScenario(scenario, seed, Designs())
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

// The comparison the README prints, over seeds 1–10 (1–3 by default: see
// comparedSeeds). The winner among whole-second Retry-After values is (d),
// spread over the busy-time drain rate: it wastes less than half the
// retries of no Retry-After, of the old queue ÷ rate projection and of
// llm-d #2487's 1/rate, gives up on fewer requests, and serves at least as
// much as every other whole-second design. It pays in the latency of the
// requests it serves (which the others serve fewer of, giving the rest
// up). Sent to the millisecond, (e), it wastes fewer retries still. The
// controller's own Retry-After does as well as (d).
func TestSpreadOverBusyRateWins(t *testing.T) {
	designs := Designs()
	aggs, err := Compare(comparedSeeds(), designs)
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

// The prior, on a cold start with a burst (BurstScenario), over seeds 1–10
// (1–3 by default): spreading the first refusals at the requests in flight
// per 1 s, (p4), wastes fewer retries than no prior, than a constant 1 s
// or 5 s and than capacity ÷ TTL, and serves at least as much as no prior;
// capacity ÷ TTL, the next best on waste, serves less than no prior. A
// 0.5 s service time wastes more; a 2 s one wastes about as little and
// serves less. The controller's own value does as well as (p4).
func TestInFlightPriorWins(t *testing.T) {
	designs := PriorDesigns()
	aggs, err := CompareScenario(BurstScenario, comparedSeeds(), designs)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range aggs {
		t.Logf("%-24s wasted %v goodput %v p95 %v give-ups %v", a.Design, a.Wasted, a.Goodput, a.P95, a.GiveUps)
	}
	get := func(name string) Aggregate { return aggs[byName(t, designs, name)] }
	p4, none := get("(p4) in-flight ÷ 1 s"), get("(d), no prior")
	for _, name := range []string{"(d), no prior", "(p1) 1 s", "(p2) 5 s", "(p3) capacity ÷ TTL", "(p5) in-flight ÷ 0.5 s"} {
		if o := get(name); p4.Wasted.Median >= o.Wasted.Median {
			t.Errorf("wasted retries, median: (p4) %v, %s %v: want fewer", p4.Wasted.Median, name, o.Wasted.Median)
		}
	}
	if 2*p4.Wasted.Median >= none.Wasted.Median {
		t.Errorf("wasted retries, median: (p4) %v, no prior %v: want less than half", p4.Wasted.Median, none.Wasted.Median)
	}
	if p4.Goodput.Median < none.Goodput.Median {
		t.Errorf("goodput, median: (p4) %v, no prior %v: want no loss", p4.Goodput.Median, none.Goodput.Median)
	}
	if p6 := get("(p6) in-flight ÷ 2 s"); p6.Goodput.Median >= p4.Goodput.Median {
		t.Errorf("goodput, median: (p6) %v, (p4) %v: the table says a 2 s service time serves less", p6.Goodput.Median, p4.Goodput.Median)
	}
	if p3 := get("(p3) capacity ÷ TTL"); p3.Goodput.Median >= none.Goodput.Median {
		t.Errorf("goodput, median: (p3) %v, no prior %v: the table says capacity ÷ TTL serves less", p3.Goodput.Median, none.Goodput.Median)
	}
	c := get("controller")
	if c.Wasted.Median > 1.1*p4.Wasted.Median || c.Goodput.Median < 0.99*p4.Goodput.Median {
		t.Errorf("controller: wasted %v, goodput %v; (p4): %v, %v: want the controller to do as well",
			c.Wasted.Median, c.Goodput.Median, p4.Wasted.Median, p4.Goodput.Median)
	}
}

// An expiry's Retry-After, on ExpiryScenario over seeds 1–10 (1–3 by
// default): the band's next promise ("expired: spread") wastes at most
// three quarters of the retries of none, gives up on fewer requests, and
// serves as much (within 1%); the queue ÷ the rate and one drain interval
// waste more than it. The controller does as well as the spread.
func TestExpirySpreadWins(t *testing.T) {
	designs := ExpiryDesigns()
	aggs, err := CompareScenario(ExpiryScenario, comparedSeeds(), designs)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range aggs {
		t.Logf("%-24s wasted %v goodput %v p95 %v give-ups %v", a.Design, a.Wasted, a.Goodput, a.P95, a.GiveUps)
	}
	get := func(name string) Aggregate { return aggs[byName(t, designs, name)] }
	sp, none := get("expired: spread"), get("expired: none")
	if sp.Wasted.Median > 0.75*none.Wasted.Median {
		t.Errorf("wasted retries, median: spread %v, none %v: want at most three quarters", sp.Wasted.Median, none.Wasted.Median)
	}
	if sp.GiveUps.Median >= none.GiveUps.Median {
		t.Errorf("give-ups, median: spread %v, none %v: want fewer", sp.GiveUps.Median, none.GiveUps.Median)
	}
	if sp.Goodput.Median < 0.99*none.Goodput.Median {
		t.Errorf("goodput, median: spread %v, none %v: want as much", sp.Goodput.Median, none.Goodput.Median)
	}
	for _, name := range []string{"expired: queue ÷ rate", "expired: one interval"} {
		if o := get(name); sp.Wasted.Median >= o.Wasted.Median {
			t.Errorf("wasted retries, median: spread %v, %s %v: want fewer", sp.Wasted.Median, name, o.Wasted.Median)
		}
	}
	behindWins(t, aggs, designs)
}

// behindWins checks, on one scenario's aggregates, that the promise behind
// the queue does at least as well as the promise alone (no more wasted
// retries or give-ups, as much goodput within 1%), and that the
// controller, which ships it, does exactly what its client-side replica
// does. The first is a claim of the ten seeds' medians, which some of
// their subsets do not bear out, so it is checked with SLUICE_LONG only;
// the second holds on any seeds.
func behindWins(t *testing.T, aggs []Aggregate, designs []Design) (behind, sp Aggregate) {
	t.Helper()
	get := func(name string) Aggregate { return aggs[byName(t, designs, name)] }
	behind, sp = get("expired: behind the queue"), get("expired: spread")
	if long.Enabled() && (behind.Wasted.Median > sp.Wasted.Median || behind.GiveUps.Median > sp.GiveUps.Median || behind.Goodput.Median < 0.99*sp.Goodput.Median) {
		t.Errorf("behind the queue: wasted %v, goodput %v, give-ups %v; spread: %v, %v, %v: want it to do at least as well",
			behind.Wasted.Median, behind.Goodput.Median, behind.GiveUps.Median, sp.Wasted.Median, sp.Goodput.Median, sp.GiveUps.Median)
	}
	if c := get("controller"); c.Wasted != behind.Wasted || c.Goodput != behind.Goodput || c.GiveUps != behind.GiveUps {
		t.Errorf("controller: wasted %v, goodput %v, give-ups %v; its replica: %v, %v, %v", c.Wasted, c.Goodput, c.GiveUps,
			behind.Wasted, behind.Goodput, behind.GiveUps)
	}
	return behind, sp
}

// TestExpiryBehindTheQueueWinsWhenDeep: in a band that stays deeper than
// it drains in its TTL, clients that honour the expiry's Retry-After
// waste fewer retries when it waits behind the queue than when it takes
// the band's next place alone, which is almost always 1s there. Over
// seeds 1–10 (1–3 by default).
func TestExpiryBehindTheQueueWinsWhenDeep(t *testing.T) {
	designs := ExpiryDesigns()
	aggs, err := CompareScenario(DeepExpiryScenario, comparedSeeds(), designs)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range aggs {
		t.Logf("%-26s wasted %v goodput %v p95 %v give-ups %v", a.Design, a.Wasted, a.Goodput, a.P95, a.GiveUps)
	}
	if behind, sp := behindWins(t, aggs, designs); behind.Wasted.Median >= sp.Wasted.Median {
		t.Errorf("wasted retries, median: behind the queue %v, spread %v: want fewer", behind.Wasted.Median, sp.Wasted.Median)
	}
}
