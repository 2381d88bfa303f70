package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/sluicegate/sluice/examples/internal/sim"
)

// Comparison holds every run of a set of variants on a set of scenarios and
// seeds: Runs[scenario][variant][seed index].
type Comparison struct {
	Scenarios []Scenario
	Variants  []Variant
	Seeds     []uint64
	Runs      [][][]Run
}

// Compare runs every variant on every scenario for every seed, the runs
// spread over the CPUs (see sim.Parallel).
func Compare(scenarios []Scenario, variants []Variant, seeds []uint64) (*Comparison, error) {
	c := &Comparison{Scenarios: scenarios, Variants: variants, Seeds: seeds}
	c.Runs = make([][][]Run, len(scenarios))
	for s := range scenarios {
		c.Runs[s] = make([][]Run, len(variants))
		for v := range variants {
			c.Runs[s][v] = make([]Run, len(seeds))
		}
	}
	perScenario := len(variants) * len(seeds)
	err := sim.Parallel(len(scenarios)*perScenario, func(j int) error {
		s, v, i := j/perScenario, j%perScenario/len(seeds), j%len(seeds)
		var err error
		c.Runs[s][v][i], err = Simulate(scenarios[s], variants[v], seeds[i])
		return err
	})
	return c, err
}

// Column reads one figure of a run.
type Column struct {
	Name   string
	Format string // for each of min, median and max
	Of     func(Run) float64
}

// Columns are the figures the tables print.
var Columns = []Column{
	{"goodput req/s", "%.1f", func(r Run) float64 { return r.Goodput }},
	{"band goodput req/s", "%.1f", func(r Run) float64 { return r.BandGoodput }},
	{"saturated", "%.0f", func(r Run) float64 { return float64(r.Saturated) }},
	{"expired", "%.0f", func(r Run) float64 { return float64(r.Expired) }},
	{"p95 latency s", "%.1f", func(r Run) float64 { return r.P95.Seconds() }},
	{"interactive served %", "%.1f", func(r Run) float64 { return 100 * r.InteractiveServed }},
	{"interactive p95 s", "%.2f", func(r Run) float64 { return r.InteractiveP95.Seconds() }},
}

// Spread returns column col of variant v on scenario s over the seeds.
func (c *Comparison) Spread(s, v int, col Column) sim.Spread {
	values := make([]float64, len(c.Runs[s][v]))
	for i, r := range c.Runs[s][v] {
		values[i] = col.Of(r)
	}
	return sim.SpreadOf(values)
}

// Print writes one table per scenario: each cell is the median over the
// seeds, with the minimum and maximum in brackets.
func (c *Comparison) Print(out io.Writer) {
	fmt.Fprintf(out, "%d slots, mean service %v; interactive tenants %d or %d req/s in phases of mean %v; batch dispatchers with an endless backlog\n",
		slots, meanService, quietRate, busyRate, meanPhase)
	fmt.Fprintf(out, "%v simulated per run; seeds %d–%d; cells: median [min–max] over the seeds\n",
		simDuration, c.Seeds[0], c.Seeds[len(c.Seeds)-1])
	c.PrintTables(out)
}

// PrintTables writes the tables of Print without its description of the
// pool and the seeds, each after a blank line and the scenario's name.
func (c *Comparison) PrintTables(out io.Writer) {
	for s, sc := range c.Scenarios {
		fmt.Fprintf(out, "\n%s\n", sc.Name)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "dispatcher\t")
		for _, col := range Columns {
			fmt.Fprintf(tw, "%s\t", col.Name)
		}
		fmt.Fprintln(tw)
		for v, va := range c.Variants {
			fmt.Fprintf(tw, "%s\t", va.Name)
			for _, col := range Columns {
				sp := c.Spread(s, v, col)
				f := col.Format
				fmt.Fprintf(tw, f+" ["+f+"–"+f+"]\t", sp.Median, sp.Min, sp.Max)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
}
