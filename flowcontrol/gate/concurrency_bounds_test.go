package gate_test

// Costs up to math.MaxInt64, as a client sends them: the cost in flight
// never wraps, and returns to 0 (issue 21, defect 2).

import (
	"context"
	"math"
	"math/big"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"pgregory.net/rapid"
)

// Defect 2: a cost of math.MaxInt64 wrapped the cost in flight negative
// and the gate admitted everything: 5 requests over a 1,000-token budget
// that allows 2.
func TestConcurrencyHugeCostsDoNotWrapTheBudget(t *testing.T) {
	for _, mode := range []string{gate.ModeTokens, gate.ModeHybrid} {
		t.Run(mode, func(t *testing.T) {
			g := must(t, gate.Concurrency, gate.ConcurrencyConfig{Mode: mode, MaxTokenConcurrency: 1000})
			// Costlier than the whole budget, with nothing in flight: admitted
			// (the cost in flight is under the budget), and then nothing more.
			if got := takes(g, math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, 1); got != "ynnnn" {
				t.Fatalf("offers after a cost of MaxInt64: %s, want only the first admitted", got)
			}
			if n, c := g.InFlight(); n != 1 || c != math.MaxInt64 {
				t.Fatalf("InFlight = %d, %d; want 1, MaxInt64", n, c)
			}
			g.Returned(gate.Usage{Slot: gate.Slot{Cost: math.MaxInt64}})
			if n, c := g.InFlight(); n != 0 || c != 0 {
				t.Fatalf("InFlight after the return = %d, %d; want 0, 0", n, c)
			}

			// The gateway's case: requests of 600 tokens, two fit; then one of
			// MaxInt64 while 600 are in flight is the last admitted.
			if got := takes(g, 600, 600, 600); got != "yyn" {
				t.Fatalf("600-token offers: %s, want two admitted", got)
			}
			g.Returned(gate.Usage{Slot: gate.Slot{Cost: 600}})
			if got := takes(g, math.MaxInt64, 1, math.MaxInt64); got != "ynn" {
				t.Fatalf("offers with 600 in flight: %s, want the huge one admitted, then none", got)
			}
			// Several huge costs Took without the gate's say (a misbehaving
			// composer) still sum exactly, and come back to 0.
			g.Took(gate.Slot{Cost: math.MaxInt64})
			g.Took(gate.Slot{Cost: math.MaxInt64})
			if _, c := g.InFlight(); c != math.MaxInt64 {
				t.Fatalf("cost in flight %d over MaxInt64, want it reported as MaxInt64", c)
			}
			if g.TryAcquire(0) {
				t.Fatal("admitted with 3×MaxInt64+600 tokens in flight")
			}
			for _, c := range []int64{600, math.MaxInt64, math.MaxInt64, math.MaxInt64} {
				g.Returned(gate.Usage{Slot: gate.Slot{Cost: c}})
			}
			if n, c := g.InFlight(); n != 0 || c != 0 {
				t.Fatalf("InFlight after every return = %d, %d; want 0, 0", n, c)
			}
		})
	}
}

func TestConcurrencyCostsBelowOneCountAsOne(t *testing.T) {
	g := must(t, gate.Concurrency, gate.ConcurrencyConfig{Mode: gate.ModeTokens, MaxTokenConcurrency: 2})
	if got := takes(g, math.MinInt64, -5, 0); got != "yyn" {
		t.Fatalf("offers of negative and zero costs: %s, want two admitted, as costs of 1", got)
	}
	if _, c := g.InFlight(); c != 2 {
		t.Fatalf("cost in flight %d, want 2", c)
	}
	for _, c := range []int64{math.MinInt64, -5} {
		g.Returned(gate.Usage{Slot: gate.Slot{Cost: c}})
	}
	if n, c := g.InFlight(); n != 0 || c != 0 {
		t.Fatalf("InFlight = %d, %d; want 0, 0", n, c)
	}
	// More handed back than was taken leaves nothing negative.
	g.Returned(gate.Usage{Slot: gate.Slot{Cost: 7}})
	g.Release(0)
	if n, c := g.InFlight(); n != 0 || c != 0 {
		t.Fatalf("InFlight after extra returns = %d, %d; want 0, 0", n, c)
	}
}

func TestConcurrencyRequestsModeIgnoresHugeCosts(t *testing.T) {
	g := must(t, gate.Concurrency, gate.ConcurrencyConfig{MaxConcurrency: 3})
	if got := takes(g, math.MaxInt64, math.MaxInt64, math.MaxInt64, 1); got != "yyyn" {
		t.Fatalf("requests mode: %s, want the request bound alone to decide", got)
	}
}

// Through a controller: huge costs in tokens mode put one request in
// flight, not all of them.
func TestConcurrencyHugeCostsThroughAController(t *testing.T) {
	g := must(t, gate.Concurrency, gate.ConcurrencyConfig{Mode: gate.ModeTokens, MaxTokenConcurrency: 1000})
	fc := mustNew(t, flowcontrol.Config{Gate: g, Bands: []flowcontrol.BandConfig{{Priority: 0}}})
	var adms []*flowcontrol.Admission
	for range 5 {
		fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "x"}, Cost: math.MaxInt64},
			func(a *flowcontrol.Admission, err error) {
				if err == nil {
					adms = append(adms, a)
				}
			})
	}
	if len(adms) != 1 {
		t.Fatalf("%d requests of MaxInt64 tokens in flight over a 1000-token budget, want 1", len(adms))
	}
	for len(adms) > 0 {
		a := adms[0]
		adms = adms[1:]
		a.Done() // may dispatch the next, appending to adms
	}
	if n, c := g.InFlight(); n != 0 || c != 0 {
		t.Fatalf("InFlight after every request = %d, %d; want 0, 0", n, c)
	}
}

// concurrencyModel is the plain model of a ConcurrencyGate: exact counts.
type concurrencyModel struct {
	maxRequests int64
	maxCost     *big.Int // nil when the mode does not bound cost
	requests    int64
	cost        big.Int
	inFlight    []int64 // the costs taken, in order
}

func TestConcurrencyProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mode := rapid.SampledFrom([]string{gate.ModeRequests, gate.ModeTokens, gate.ModeHybrid}).Draw(t, "mode")
		maxReq := rapid.OneOf(rapid.IntRange(1, 8), rapid.Just(math.MaxInt)).Draw(t, "maxConcurrency")
		maxCost := rapid.OneOf(rapid.Int64Range(1, 5000), rapid.Int64Range(1, math.MaxInt64), rapid.Just(int64(math.MaxInt64))).Draw(t, "maxTokenConcurrency")
		g, err := gate.Concurrency(gate.ConcurrencyConfig{Mode: mode, MaxConcurrency: maxReq, MaxTokenConcurrency: maxCost})
		if err != nil {
			t.Fatal(err)
		}
		m := concurrencyModel{maxRequests: math.MaxInt64}
		if mode != gate.ModeTokens {
			m.maxRequests = int64(maxReq)
		}
		if mode != gate.ModeRequests {
			m.maxCost = big.NewInt(maxCost)
		}
		costGen := rapid.OneOf(
			rapid.Int64Range(1, 2000),
			rapid.Int64Range(1, math.MaxInt64),
			rapid.Int64Range(math.MaxInt64-10, math.MaxInt64),
			rapid.Int64Range(math.MinInt64, 0),
		)
		check := func() {
			n, c := g.InFlight()
			if int64(n) != m.requests {
				t.Fatalf("requests in flight %d, model %d", n, m.requests)
			}
			want := new(big.Int).Set(&m.cost)
			if want.Cmp(big.NewInt(math.MaxInt64)) > 0 {
				want.SetInt64(math.MaxInt64)
			}
			if c < 0 || c != want.Int64() {
				t.Fatalf("cost in flight %d, model %s", c, &m.cost)
			}
		}
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			if len(m.inFlight) > 0 && rapid.Bool().Draw(t, "return") {
				i := rapid.IntRange(0, len(m.inFlight)-1).Draw(t, "which")
				cost := m.inFlight[i]
				m.inFlight = append(m.inFlight[:i], m.inFlight[i+1:]...)
				g.Returned(gate.Usage{Slot: gate.Slot{Cost: cost}})
				m.requests--
				m.cost.Sub(&m.cost, big.NewInt(max(cost, 1)))
				check()
				continue
			}
			cost := costGen.Draw(t, "cost")
			// Admitted exactly while under the bounds: so the cost in flight
			// less the last admitted one stays under the budget.
			want := m.requests < m.maxRequests && (m.maxCost == nil || m.cost.Cmp(m.maxCost) < 0)
			if got := g.TryAcquire(0); got != want {
				t.Fatalf("TryAcquire = %v with %d requests and %s tokens in flight, want %v", got, m.requests, &m.cost, want)
			}
			if want {
				g.Took(gate.Slot{Cost: cost})
				m.requests++
				m.cost.Add(&m.cost, big.NewInt(max(cost, 1)))
				m.inFlight = append(m.inFlight, cost)
			}
			check()
		}
		for _, cost := range m.inFlight {
			g.Returned(gate.Usage{Slot: gate.Slot{Cost: cost}})
		}
		if n, c := g.InFlight(); n != 0 || c != 0 {
			t.Fatalf("InFlight after every return = %d, %d; want 0, 0", n, c)
		}
	})
}
