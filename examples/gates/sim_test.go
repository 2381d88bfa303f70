package main

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicegate/sluice/examples/internal/long"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// comparisons runs Compare for seeds 1..3 with SLUICE_LONG (see
// examples/internal/long) and seed 1 otherwise (or with -short), in
// parallel, once for all the tests of the package. Every test asserts per
// seed, but TestAIMDBeatsGradient, which averages over them.
var comparisons = sync.OnceValues(func() (map[uint64]*Comparison, error) {
	seeds := []uint64{1, 2, 3}
	if !long.Enabled() || testing.Short() {
		seeds = seeds[:1]
	}
	out := map[uint64]*Comparison{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var first error
	for _, seed := range seeds {
		wg.Go(func() {
			cfg := DefaultConfig()
			cfg.Seed = seed
			c, err := Compare(cfg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			out[seed] = c
		})
	}
	wg.Wait()
	return out, first
})

func compared(t *testing.T) map[uint64]*Comparison {
	t.Helper()
	cs, err := comparisons()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// row returns the result of the variant named name with n routers.
func row(t *testing.T, c *Comparison, n int, name string) Result {
	t.Helper()
	for _, r := range c.Tables[n] {
		if r.Variant.Name == name {
			return r
		}
	}
	t.Fatalf("no row %q with %d routers", name, n)
	return Result{}
}

const (
	satDefault = "saturation, llm-d defaults"
	sat09      = "saturation, KV threshold 0.9"
	aimd       = "adaptive AIMD (gate.Adaptive)"
	gradient   = "adaptive gradient (not shipped)"
)

// worst returns r's lowest share of the best fixed limit's goodput over
// the phases.
func worst(c *Comparison, r Result) float64 {
	w := 10.0
	for ph, p := range r.Phases {
		w = min(w, c.Share(ph, p))
	}
	return w
}

// In every phase the saturation gates and the adaptive gate reach 90% of
// the goodput of the best fixed limit for that phase,
// while every fixed limit falls below 90% in some phase.
func TestGatesFollowCapacityAndFixedLimitsDoNot(t *testing.T) {
	for seed, c := range compared(t) {
		for _, name := range []string{satDefault, sat09, aimd} {
			r := row(t, c, 1, name)
			for ph, p := range r.Phases {
				if s := c.Share(ph, p); s < 0.9 {
					t.Errorf("seed %d, %s, phase %q: %.1f req/s is %.0f%% of the best fixed limit's %.1f (MaxInFlight %d), want at least 90%%",
						seed, name, Phases[ph], p.Goodput, 100*s, c.Best[ph], c.BestLimit[ph])
				}
			}
		}
		for _, r := range c.Sweep {
			if w := worst(c, r); w >= 0.9 {
				t.Errorf("seed %d, %s: at least %.0f%% of the best in every phase; want a phase below 90%%", seed, r.Variant.Name, 100*w)
			}
		}
	}
}

// The shipped adaptive gate's worst phase is better than the gradient's,
// on average over the seeds: why AIMD ships.
func TestAIMDBeatsGradient(t *testing.T) {
	var a, g float64
	cs := compared(t)
	for _, c := range cs {
		a += worst(c, row(t, c, 1, aimd))
		g += worst(c, row(t, c, 1, gradient))
	}
	a, g = a/float64(len(cs)), g/float64(len(cs))
	if a <= g {
		t.Errorf("mean worst phase: AIMD %.1f%%, gradient %.1f%%; want AIMD ahead", 100*a, 100*g)
	}
	t.Logf("mean worst phase over %d seeds: AIMD %.1f%%, gradient %.1f%%", len(cs), 100*a, 100*g)
}

// llm-d's default KV-cache threshold of 0.8 keeps a fifth of the cache
// free: in the phase where the cache bounds the servers it serves less
// than a threshold of 0.9. The tables show both.
func TestDefaultKVThresholdCostsInTheKVBoundPhase(t *testing.T) {
	const longPrompts = 1
	for seed, c := range compared(t) {
		d, n := row(t, c, 1, satDefault).Phases[longPrompts], row(t, c, 1, sat09).Phases[longPrompts]
		if d.Goodput >= n.Goodput {
			t.Errorf("seed %d: long prompts: default %.1f req/s, KV 0.9 %.1f; want the default below", seed, d.Goodput, n.Goodput)
		}
	}
}

// Behind 2 and 4 routers the saturation gates, sharing the room, keep
// every model server's waiting queue at or under the queue threshold,
// in every phase; fixed limits split across the routers do not.
func TestReplicasKeepQueuesUnderTheThreshold(t *testing.T) {
	for seed, c := range compared(t) {
		for _, n := range []int{2, 4} {
			for _, name := range []string{satDefault, sat09} {
				for ph, p := range row(t, c, n, name).Phases {
					if p.MaxQueue > gate.DefaultQueueDepthThreshold {
						t.Errorf("seed %d, %d routers, %s, phase %q: a server queued %d, over the threshold %d",
							seed, n, name, Phases[ph], p.MaxQueue, gate.DefaultQueueDepthThreshold)
					}
				}
			}
			if q := row(t, c, n, "MaxInFlight 128 (right for steady)").Phases[1].MaxQueue; q <= gate.DefaultQueueDepthThreshold {
				t.Errorf("seed %d, %d routers: MaxInFlight 128 queued at most %d with long prompts; the comparison is moot", seed, n, q)
			}
		}
	}
}

// The same seed prints the same bytes.
func TestDeterministic(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PhaseLength /= 8
	var outs [2]string
	for i := range outs {
		r, err := Run(cfg, Variant{Name: "sat", Kind: Saturation}, 2)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Run(cfg, Variant{Name: "aimd", Kind: Adaptive}, 1)
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = fmt.Sprintf("%+v\n%+v", r, a)
	}
	if d := cmp.Diff(outs[0], outs[1]); d != "" {
		t.Fatalf("two runs differ (-first +second):\n%s", d)
	}
	var b bytes.Buffer
	Print(&b, compared(t)[1])
	var again bytes.Buffer
	Print(&again, compared(t)[1])
	if b.String() != again.String() || !bytes.Contains(b.Bytes(), []byte("adaptive AIMD")) {
		t.Fatal("Print is not a function of the comparison")
	}
}
