package gate_test

// Limits up to math.MaxInt and times to first token of any sign and size:
// the adaptive limit stays within its bounds (issue 21, defect 9).

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
	"pgregory.net/rapid"
)

// Defect 9: with InitialLimit = MaxLimit = MaxInt the limit wrapped to
// MinInt64 and the gate admitted nothing.
func TestAdaptiveMaxIntLimitDoesNotWrap(t *testing.T) {
	g := must(t, gate.Adaptive, gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: math.MaxInt, MaxLimit: math.MaxInt})
	if l := g.Limit(); l != math.MaxInt {
		t.Fatalf("Limit() = %d, want MaxInt", l)
	}
	for range 100 {
		if !g.TryAcquire(0) {
			t.Fatal("refused under a limit of MaxInt")
		}
	}
	for range 50 { // timely while in use: increases, capped at MaxLimit
		g.FirstToken(gate.Slot{}, 0)
	}
	if l := g.Limit(); l != math.MaxInt {
		t.Fatalf("Limit() = %d after increases, want MaxInt", l)
	}
	g.FirstToken(gate.Slot{}, time.Duration(math.MaxInt64)) // late: a decrease
	if l := g.Limit(); l <= 0 || l >= math.MaxInt {
		t.Fatalf("Limit() = %d after a decrease, want it below MaxInt and positive", l)
	}

	pinned := must(t, gate.Adaptive, gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: math.MaxInt, MinLimit: math.MaxInt, MaxLimit: math.MaxInt})
	pinned.TryAcquire(0)
	pinned.FirstToken(gate.Slot{}, time.Hour)
	if l := pinned.Limit(); l != math.MaxInt {
		t.Fatalf("Limit() = %d with MinLimit = MaxLimit = MaxInt, want MaxInt", l)
	}
}

func TestAdaptiveNegativeFirstTokenTeachesNothing(t *testing.T) {
	g := must(t, gate.Adaptive, gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: 10, Increase: 1})
	fill(g)
	for range 20 {
		g.FirstToken(gate.Slot{}, -time.Hour)
		g.FirstToken(gate.Slot{}, time.Duration(math.MinInt64))
	}
	g.Returned(gate.Usage{FirstToken: -time.Second})
	g.Returned(gate.Usage{Held: -time.Second})
	if l := g.Limit(); l != 10 {
		t.Fatalf("Limit() = %d after negative times to first token, want 10 unchanged", l)
	}
}

func TestAdaptiveConfigRefusesNonFiniteFactors(t *testing.T) {
	for _, tc := range []struct {
		cfg   gate.AdaptiveConfig
		field string
	}{
		{gate.AdaptiveConfig{TargetFirstToken: time.Second, Increase: math.Inf(1)}, "Increase"},
		{gate.AdaptiveConfig{TargetFirstToken: time.Second, Increase: math.NaN()}, "Increase"},
		{gate.AdaptiveConfig{TargetFirstToken: time.Second, Backoff: math.NaN()}, "Backoff"},
		{gate.AdaptiveConfig{TargetFirstToken: time.Second, Backoff: math.Inf(-1)}, "Backoff"},
	} {
		if _, err := gate.Adaptive(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Adaptive(%+v) = %v, want an error naming %s", tc.cfg, err, tc.field)
		}
	}
}

func TestAdaptiveProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		big := rapid.OneOf(rapid.IntRange(1, 50), rapid.IntRange(1, math.MaxInt), rapid.Just(math.MaxInt))
		lo, hi := big.Draw(t, "minLimit"), big.Draw(t, "maxLimit")
		if lo > hi {
			lo, hi = hi, lo
		}
		initial := rapid.OneOf(rapid.Just(lo), rapid.Just(hi), rapid.IntRange(lo, hi)).Draw(t, "initialLimit")
		g, err := gate.Adaptive(gate.AdaptiveConfig{
			TargetFirstToken: time.Second,
			InitialLimit:     initial, MinLimit: lo, MaxLimit: hi,
			Backoff:  rapid.Float64Range(1e-9, 1-1e-9).Draw(t, "backoff"),
			Increase: rapid.OneOf(rapid.Float64Range(1e-9, 10), rapid.Float64Range(1, math.MaxFloat64)).Draw(t, "increase"),
		})
		if err != nil {
			t.Fatal(err)
		}
		ttft := rapid.OneOf(
			rapid.Int64Range(0, int64(2*time.Second)),
			rapid.Int64Range(math.MinInt64, math.MaxInt64),
			rapid.SampledFrom([]int64{0, -1, math.MinInt64, math.MaxInt64}),
		)
		inFlight := 0
		for range rapid.IntRange(1, 80).Draw(t, "steps") {
			if l := g.Limit(); l < lo || l > hi {
				t.Fatalf("Limit() = %d outside [%d, %d]", l, lo, hi)
			}
			switch rapid.IntRange(0, 2).Draw(t, "action") {
			case 0:
				want := inFlight < g.Limit()
				if got := g.TryAcquire(0); got != want {
					t.Fatalf("TryAcquire = %v with %d in flight under a limit of %d", got, inFlight, g.Limit())
				}
				if want {
					g.Took(gate.Slot{Cost: 1})
					inFlight++
				}
			case 1:
				if inFlight > 0 {
					g.FirstToken(gate.Slot{Cost: 1}, time.Duration(ttft.Draw(t, "firstToken")))
				}
			case 2:
				if inFlight > 0 {
					g.Returned(gate.Usage{Slot: gate.Slot{Cost: 1},
						FirstToken: time.Duration(ttft.Draw(t, "firstToken")), Held: time.Duration(ttft.Draw(t, "held"))})
					inFlight--
				}
			}
		}
	})
}
