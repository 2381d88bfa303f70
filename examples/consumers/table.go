package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"text/tabwriter"
)

// Comparison holds every run of a set of variants on a set of scenarios and
// seeds: Runs[scenario][variant][seed index].
type Comparison struct {
	Scenarios []Scenario
	Variants  []Variant
	Seeds     []uint64
	Runs      [][][]Run
}

// Compare runs every variant on every scenario for every seed. Runs are
// independent simulations, spread over the CPUs; each result lands in its
// own place, so the comparison is the same whatever the schedule.
func Compare(scenarios []Scenario, variants []Variant, seeds []uint64) (*Comparison, error) {
	c := &Comparison{Scenarios: scenarios, Variants: variants, Seeds: seeds}
	type job struct{ s, v, i int }
	var jobs []job
	c.Runs = make([][][]Run, len(scenarios))
	for s := range scenarios {
		c.Runs[s] = make([][]Run, len(variants))
		for v := range variants {
			c.Runs[s][v] = make([]Run, len(seeds))
			for i := range seeds {
				jobs = append(jobs, job{s, v, i})
			}
		}
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan job)
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range next {
				r, err := Simulate(scenarios[j.s], variants[j.v], seeds[j.i])
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				}
				c.Runs[j.s][j.v][j.i] = r
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return c, firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// Spread is the minimum, median and maximum of a column over the seeds.
type Spread struct{ Min, Median, Max float64 }

func spread(runs []Run, col func(Run) float64) Spread {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = col(r)
	}
	slices.Sort(vs)
	n := len(vs)
	if n == 0 {
		return Spread{}
	}
	med := vs[n/2]
	if n%2 == 0 {
		med = (vs[n/2-1] + vs[n/2]) / 2
	}
	return Spread{vs[0], med, vs[n-1]}
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
func (c *Comparison) Spread(s, v int, col Column) Spread {
	return spread(c.Runs[s][v], col.Of)
}

// Print writes one table per scenario: each cell is the median over the
// seeds, with the minimum and maximum in brackets.
func (c *Comparison) Print(out io.Writer) {
	fmt.Fprintf(out, "%d slots, mean service %v; interactive tenants %d or %d req/s in phases of mean %v; batch dispatchers with an endless backlog\n",
		slots, meanService, quietRate, busyRate, meanPhase)
	fmt.Fprintf(out, "%v simulated per run; seeds %d–%d; cells: median [min–max] over the seeds\n",
		simDuration, c.Seeds[0], c.Seeds[len(c.Seeds)-1])
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

// seedRange returns the seeds from, from+1, ..., to.
func seedRange(from, to uint64) []uint64 {
	var seeds []uint64
	for s := from; s <= to; s++ {
		seeds = append(seeds, s)
	}
	return seeds
}
