package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/sluicegate/sluice/examples/internal/sim"
)

// Goal is the judged distance from one controller: synced replicas come
// within 2 percentage points of it on chat SLO attainment, batch goodput
// (as a percentage of one controller's on the same seed) and the light
// tenant's share of its requests served.
const Goal = 2.0

// Comparison holds every run: CrossBand[admission][setup][seed], the
// admission an index into Admissions, and Fairness[setup][seed].
type Comparison struct {
	Seeds      []uint64
	Sync       Sync
	Admissions []Admission
	CrossBand  [][][]CrossBand
	Fairness   [][]Fairness
}

// Compare runs both scenarios behind every setup on every seed, the
// cross-band one under every admission (Admissions), spread over the
// CPUs.
func Compare(seeds []uint64, sync Sync) (*Comparison, error) {
	return CompareUnder(seeds, sync, Admissions)
}

// CompareUnder is Compare with the cross-band scenario under admissions
// only.
func CompareUnder(seeds []uint64, sync Sync, admissions []Admission) (*Comparison, error) {
	c := &Comparison{Seeds: seeds, Sync: sync, Admissions: admissions,
		CrossBand: make([][][]CrossBand, len(admissions)), Fairness: make([][]Fairness, len(Setups))}
	for a := range admissions {
		c.CrossBand[a] = make([][]CrossBand, len(Setups))
		for s := range Setups {
			c.CrossBand[a][s] = make([]CrossBand, len(seeds))
		}
	}
	for s := range Setups {
		c.Fairness[s] = make([]Fairness, len(seeds))
	}
	n := len(seeds)
	cross := len(admissions) * len(Setups) * n
	err := sim.Parallel(cross+len(Setups)*n, func(j int) error {
		var err error
		if j < cross {
			a, s, i := j/(len(Setups)*n), j/n%len(Setups), j%n
			c.CrossBand[a][s][i], err = RunCrossBand(Setups[s], admissions[a], sync, seeds[i])
			return err
		}
		j -= cross
		s, i := j/n, j%n
		c.Fairness[s][i], err = RunFairness(Setups[s], sync, seeds[i])
		return err
	})
	return c, err
}

// BatchVsOne returns, per seed, setup s's batch goodput under admission
// a as a difference from one controller's, in percent of it.
func (c *Comparison) BatchVsOne(a, s int) []float64 {
	out := make([]float64, len(c.Seeds))
	for i, r := range c.CrossBand[a][s] {
		one := c.CrossBand[a][0][i].BatchPerSecond
		out[i] = 100 * (r.BatchPerSecond - one) / one
	}
	return out
}

// SLOVsOne returns, per seed, setup s's chat SLO attainment under
// admission a less one controller's, in percentage points.
func (c *Comparison) SLOVsOne(a, s int) []float64 {
	out := make([]float64, len(c.Seeds))
	for i, r := range c.CrossBand[a][s] {
		out[i] = r.SLOMet - c.CrossBand[a][0][i].SLOMet
	}
	return out
}

// LightVsOne returns, per seed, setup s's light-tenant success less one
// controller's, in percentage points.
func (c *Comparison) LightVsOne(s int) []float64 {
	out := make([]float64, len(c.Seeds))
	for i, r := range c.Fairness[s] {
		out[i] = r.Light - c.Fairness[0][i].Light
	}
	return out
}

func of[T any](runs []T, f func(T) float64) sim.Spread {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	return sim.SpreadOf(v)
}

func spread(s sim.Spread, format string) string {
	return fmt.Sprintf(format+" ["+format+" – "+format+"]", s.Median, s.Min, s.Max)
}

// Print writes the tables.
func (c *Comparison) Print(out io.Writer) {
	fmt.Fprintf(out, "seeds %d–%d; synced replicas: a round every %v, the store %v away, an overdraft of %d; requests to the replicas in turn\n",
		c.Seeds[0], c.Seeds[len(c.Seeds)-1], c.Sync.Period, c.Sync.Delay, c.Sync.Overdraft)
	for a, adm := range c.Admissions {
		fmt.Fprintf(out, "\ncross-band, %s: C = %d (4 servers × 16 slots)\n", adm.Name, budget)
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "router\tchat SLO met %\tvs one, pp\tbatch served/s\tvs one, %\trevocations\ttokens lost, k\tpool busy %\tbeyond C\t")
		for s, setup := range Setups {
			runs := c.CrossBand[a][s]
			vsSLO, vsBatch := "—", "—"
			if s > 0 {
				vsSLO = spread(sim.SpreadOf(c.SLOVsOne(a, s)), "%+.1f")
				vsBatch = spread(sim.SpreadOf(c.BatchVsOne(a, s)), "%+.1f")
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", setup.Name,
				spread(of(runs, func(r CrossBand) float64 { return r.SLOMet }), "%.1f"), vsSLO,
				spread(of(runs, func(r CrossBand) float64 { return r.BatchPerSecond }), "%.2f"), vsBatch,
				spread(of(runs, func(r CrossBand) float64 { return float64(r.Revocations) }), "%.0f"),
				spread(of(runs, func(r CrossBand) float64 { return float64(r.WastedTokens) / 1000 }), "%.0f"),
				spread(of(runs, func(r CrossBand) float64 { return r.Busy }), "%.1f"),
				spread(of(runs, func(r CrossBand) float64 { return r.Queued }), "%.1f"))
		}
		w.Flush()
	}
	fmt.Fprintf(out, "\nfairness: a heavy and a light tenant in one band of %d places (fleet-wide), C = %d\n", fairCapacity, fairBudget)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "router\tlight served %\tvs one, pp\theavy served %\t")
	for s, setup := range Setups {
		vs := "—"
		if s > 0 {
			vs = spread(sim.SpreadOf(c.LightVsOne(s)), "%+.1f")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", setup.Name,
			spread(of(c.Fairness[s], func(r Fairness) float64 { return r.Light }), "%.1f"), vs,
			spread(of(c.Fairness[s], func(r Fairness) float64 { return r.Heavy }), "%.1f"))
	}
	w.Flush()
	fmt.Fprintf(out, "\nwithin %.0f pp of one controller on every seed (chat SLO, batch goodput under each admission; light tenant):\n", Goal)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for s, setup := range Setups[1:] {
		s++
		met := func(vs []float64) int {
			n := 0
			for _, d := range vs {
				if d >= -Goal {
					n++
				}
			}
			return n
		}
		fmt.Fprintf(w, "%s\t", setup.Name)
		for a, adm := range c.Admissions {
			fmt.Fprintf(w, "%s: SLO %d/%d, batch %d/%d\t", adm.Name, met(c.SLOVsOne(a, s)), len(c.Seeds), met(c.BatchVsOne(a, s)), len(c.Seeds))
		}
		fmt.Fprintf(w, "light %d/%d\t\n", met(c.LightVsOne(s)), len(c.Seeds))
	}
	w.Flush()
}
