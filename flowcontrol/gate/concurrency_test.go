package gate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// take acquires a slot and, if granted, reports a request of cost on it.
func take(g gate.MeteredGate, cost int64) bool {
	if !g.TryAcquire(0) {
		return false
	}
	g.Took(gate.Slot{Cost: cost})
	return true
}

// takes offers one request of each cost in turn and returns, per offer,
// "y" if it was admitted and "n" if refused.
func takes(g gate.MeteredGate, costs ...int64) string {
	var b []byte
	for _, c := range costs {
		if take(g, c) {
			b = append(b, 'y')
		} else {
			b = append(b, 'n')
		}
	}
	return string(b)
}

func TestConcurrencyModes(t *testing.T) {
	done := func(g gate.MeteredGate, cost int64) {
		g.Returned(gate.Usage{Slot: gate.Slot{Cost: cost}})
	}

	// requests: cost is counted but bounds nothing.
	g := must(t, gate.Concurrency, gate.ConcurrencyConfig{MaxConcurrency: 2, MaxTokenConcurrency: 10})
	if got := takes(g, 500, 500, 1); got != "yyn" {
		t.Fatalf("requests mode: %s, want two admitted, the third refused", got)
	}
	if n, c := g.InFlight(); n != 2 || c != 1000 || g.Mode() != gate.ModeRequests {
		t.Fatalf("InFlight = %d, %d; mode %q", n, c, g.Mode())
	}
	done(g, 500)
	if !take(g, 1) {
		t.Fatal("requests mode: refused after a slot came back")
	}

	// tokens: admits while the cost in flight is under the bound; the last
	// admitted may overshoot it by its own cost.
	g = must(t, gate.Concurrency, gate.ConcurrencyConfig{Mode: gate.ModeTokens, MaxConcurrency: 1, MaxTokenConcurrency: 100})
	if got := takes(g, 60, 60, 1); got != "yyn" {
		t.Fatalf("tokens mode: %s, want 60 and 60 admitted (120 in flight), then refused", got)
	}
	done(g, 60)
	if !take(g, 40) || take(g, 1) {
		t.Fatal("tokens mode: want 40 admitted at 60 in flight, then refused at 100")
	}

	// hybrid: the more constraining bound refuses.
	g = must(t, gate.Concurrency, gate.ConcurrencyConfig{Mode: gate.ModeHybrid, MaxConcurrency: 3, MaxTokenConcurrency: 100})
	if got := takes(g, 10, 10, 10, 1); got != "yyyn" {
		t.Fatalf("hybrid: %s, want the request bound (3) to refuse", got)
	}
	done(g, 10)
	done(g, 10)
	done(g, 10)
	if !take(g, 150) || take(g, 1) {
		t.Fatal("hybrid: want the token bound to refuse after 150 in flight")
	}

	// A slot handed back unused carries no cost.
	g = must(t, gate.Concurrency, gate.ConcurrencyConfig{MaxConcurrency: 1})
	if !g.TryAcquire(0) {
		t.Fatal("refused the first")
	}
	g.Release(0)
	if n, c := g.InFlight(); n != 0 || c != 0 {
		t.Fatalf("after Release: %d, %d in flight", n, c)
	}
}

func TestConcurrencyDefaultsAreLLMDs(t *testing.T) {
	g := must(t, gate.Concurrency, gate.ConcurrencyConfig{})
	n := 0
	for take(g, 20_000) {
		n++
	}
	if n != 100 {
		t.Fatalf("default requests mode admitted %d, want maxConcurrency 100", n)
	}
	g = must(t, gate.Concurrency, gate.ConcurrencyConfig{Mode: gate.ModeTokens})
	n = 0
	for take(g, 20_000) {
		n++
	}
	if n != 50 {
		t.Fatalf("default tokens mode admitted %d requests of 20,000 tokens, want 50 (maxTokenConcurrency 1,000,000)", n)
	}
}

func TestConcurrencyCostThroughAController(t *testing.T) {
	g := must(t, gate.Concurrency, gate.ConcurrencyConfig{Mode: gate.ModeTokens, MaxTokenConcurrency: 1000})
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	var adms []*flowcontrol.Admission
	for _, cost := range []int64{600, 600} {
		adm, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "a"}, Cost: cost})
		if err != nil {
			t.Fatal(err)
		}
		adms = append(adms, adm)
	}
	waiting := submit(fc, "b", 0)
	if waiting.done {
		t.Fatal("started with 1200 tokens in flight over a budget of 1000")
	}
	adms[0].Done()
	if waiting.outcome(t) != flowcontrol.OutcomeDispatched {
		t.Fatal(waiting.err)
	}
	if n, c := g.InFlight(); n != 2 || c != 601 {
		t.Fatalf("InFlight = %d, %d; want 2 requests, 601 tokens (a cost of 0 counts 1)", n, c)
	}
	adms[1].Done()
	waiting.adm.Done()
	if n, c := g.InFlight(); n != 0 || c != 0 {
		t.Fatalf("InFlight = %d, %d after every Done", n, c)
	}
}

func TestConcurrencyConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg  gate.ConcurrencyConfig
		want string
	}{
		{gate.ConcurrencyConfig{Mode: "bytes"}, `gate: Mode (llm-d concurrencyMode) "bytes"`},
		{gate.ConcurrencyConfig{MaxConcurrency: -1}, "gate: MaxConcurrency (llm-d maxConcurrency) -1"},
		{gate.ConcurrencyConfig{MaxTokenConcurrency: -5}, "gate: MaxTokenConcurrency (llm-d maxTokenConcurrency) -5"},
	} {
		_, err := gate.Concurrency(tc.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Concurrency(%+v) = %v, want an error starting %q", tc.cfg, err, tc.want)
		}
	}
}

func TestConcurrencyServesOneController(t *testing.T) {
	g := must(t, gate.Concurrency, gate.ConcurrencyConfig{})
	mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	if _, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g}); err == nil {
		t.Fatal("a second controller was accepted")
	}
}
