// Command crossband shows what strict priority, band ceilings, lending and
// in-flight eviction do when the requests that run must give way across
// bands: a batch backlog of long generations (120 closed-loop clients at
// priority −1, 1,000-token prompts and outputs) beside bursty interactive
// chat at priority 10 (Poisson 3 req/s for 20 s, then 12 req/s for 10 s,
// repeating; 500-token prompts, 150-token outputs, a 1 s
// time-to-first-token SLO), on 4 servers of 16 slots behind a gate of
// MaxInFlight(64), for 5 simulated minutes. Each row runs the real
// controller with its gate — strict priority, chat alone, gate.Ceiling
// with one of llm-d's usage-limit policies over MaxInFlight(64), a
// guaranteed share for chat (lending), in-flight eviction, or both — on
// the shared simulator, for each seed; every cell is the median over the
// seeds with the minimum and maximum. A revoked batch request is aborted
// on its server, its decoded tokens lost, and its client sends it again
// after the Retry-After of its 429. A second table gives the frontier:
// SLO met against batch throughput. Then a few rows run behind other
// routers: gate.Saturation over scraped metrics, and two replicas. Last,
// the previous round's traffic (random bursts, log-normal batch outputs,
// no think time) in tokens: strict priority, the default eviction, and
// servers that run vLLM's priority scheduler with the band handed to
// them (BurstsSetup).
//
//	go run ./examples/crossband                 # seeds 1–20
//	go run ./examples/crossband -from 1 -to 3
//	go run ./examples/crossband -seed 2 -detail # one seed, second by second
//
// The same flags print the same bytes.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/sluicegate/sluice/examples/internal/sim"
)

func main() {
	seeds := sim.SeedRangeFlags("crossband")
	seed := flag.Uint64("seed", 0, "with -detail: the seed shown second by second")
	detail := flag.Bool("detail", false, "show one seed (-seed) second by second instead of the tables")
	flag.Parse()
	if *detail {
		if *seed == 0 {
			fmt.Fprintln(os.Stderr, "crossband: -detail needs -seed N, N >= 1")
			os.Exit(2)
		}
		if err := PrintDetail(os.Stdout, Variants, *seed); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return
	}
	if err := run(os.Stdout, seeds()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// run prints the main comparison over seeds, then each setup's, each as
// soon as its runs have ended.
func run(out io.Writer, seeds []uint64) error {
	c, err := Compare(MainSetup, Variants, seeds)
	if err != nil {
		return err
	}
	c.Print(out)
	for _, setup := range Setups {
		c, err := Compare(setup, setup.Rows, seeds)
		if err != nil {
			return err
		}
		fmt.Fprintln(out)
		c.PrintSetup(out)
	}
	c, err = Compare(BurstsSetup, BurstsSetup.Rows, seeds)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	c.PrintTokens(out)
	return nil
}

// TokenColumns are the figures of the table in tokens, each as the
// median over the seeds with the minimum and maximum.
var TokenColumns = []struct {
	Name, Format string
	Of           func(Run) float64
}{
	{"chat SLO met %", "%.1f", func(r Run) float64 { return 100 * r.SLOMet }},
	{"chat p95 TTFT s", "%.2f", func(r Run) float64 { return r.P95.Seconds() }},
	{"batch output tokens", "%.0f", func(r Run) float64 { return float64(r.BatchTokens) }},
	{"decoded tokens lost to revocation", "%.0f", func(r Run) float64 { return float64(r.WastedTokens) }},
	{"prefill tokens recomputed", "%.0f", func(r Run) float64 { return float64(r.Recomputed) }},
	{"preemptions", "%.0f", func(r Run) float64 { return float64(r.Preemptions) }},
	{"revocations", "%.0f", func(r Run) float64 { return float64(r.Revocations) }},
}

// PrintTokens writes the table in tokens: a setup's rows with the
// columns of TokenColumns, batch's output tokens as a share of strict
// priority's, and whether each row meets the goal in tokens.
func (c *Comparison) PrintTokens(out io.Writer) {
	t := c.Setup.traffic()
	fmt.Fprintf(out, "behind %s; seeds %d–%d\n", c.Setup.Name, c.Seeds[0], c.Seeds[len(c.Seeds)-1])
	fmt.Fprintf(out, "chat: phases of %d and %d req/s, exponential lengths of mean %v and %v; batch: %d clients, think %v, outputs log-normal of mean %.0f tokens (σ %.0f)\n",
		quietRate, busyRate, quietFor, busyFor, batchClients, t.BatchThink, t.BatchOutput.Mean, t.BatchOutput.Sigma)
	fmt.Fprintf(out, "batch output tokens: of the batch requests completed within %v; goal: SLO met >= %.0f%% and batch tokens >= %.0f%% of strict priority's, on every seed\n\n",
		simDuration, 100*GoalSLO, 100*GoalBatch)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "router and servers\t")
	for _, col := range TokenColumns {
		fmt.Fprintf(tw, "%s\t", col.Name)
	}
	fmt.Fprint(tw, "batch tokens % of strict\tmeets the goal\t\n")
	for v, va := range c.Variants {
		fmt.Fprintf(tw, "%s\t", va.Name)
		for _, col := range TokenColumns {
			sp := c.Spread(v, col.Of)
			f := col.Format
			fmt.Fprintf(tw, f+" ["+f+"–"+f+"]\t", sp.Median, sp.Min, sp.Max)
		}
		share := c.TokenShare(v)
		fmt.Fprintf(tw, "%.1f [%.1f–%.1f]\t%s\t\n", 100*share.Median, 100*share.Min, 100*share.Max, yes(c.MeetsTokenGoal(v)))
	}
	tw.Flush()
}

// Columns are the figures the table prints, each as the median over the
// seeds with the minimum and maximum. A batch column is blank in the row
// without batch clients.
var Columns = []struct {
	Name, Format string
	Batch        bool
	Of           func(Run) float64
}{
	{"chat SLO met %", "%.1f", false, func(r Run) float64 { return 100 * r.SLOMet }},
	{"chat p95 TTFT s", "%.2f", false, func(r Run) float64 { return r.P95.Seconds() }},
	{"chat p99 TTFT s", "%.2f", false, func(r Run) float64 { return r.P99.Seconds() }},
	{"batch served/s", "%.2f", true, func(r Run) float64 { return r.BatchPerSecond }},
	{"wasted batch tokens", "%.0f", true, func(r Run) float64 { return float64(r.WastedTokens) }},
	{"revocations", "%.0f", true, func(r Run) float64 { return float64(r.Revocations) }},
	{"most revoked request", "%.0f", true, func(r Run) float64 { return float64(r.MostRevoked) }},
}

// Print writes the scenario, the table, then the frontier.
func (c *Comparison) Print(out io.Writer) {
	fmt.Fprintf(out, "%d servers × %d slots (%v + %v per prompt token, %v per output token), gate MaxInFlight(%d)\n",
		servers, slotsPerServer, base, perPromptToken, perOutputToken, maxInFlight)
	fmt.Fprintf(out, "chat (band %d): Poisson %d req/s for %v, then %d req/s for %v, repeating; %d-token prompts, %d-token outputs; TTFT SLO %v\n",
		chatBand, quietRate, quietFor, busyRate, busyFor, chatPrompt, chatOutput, chatSLO)
	fmt.Fprintf(out, "batch (band %d): %d closed-loop clients thinking %v on average, %d-token prompts, %d-token outputs; an evicted request is sent again after its Retry-After\n",
		batchBand, batchClients, batchThink, batchPrompt, batchOutput)
	fmt.Fprintf(out, "%v simulated per run; seeds %d–%d; cells: median [min–max] over the seeds\n\n",
		simDuration, c.Seeds[0], c.Seeds[len(c.Seeds)-1])
	c.printTable(out, false)
	c.PrintFrontier(out)
}

// PrintSetup writes the table of a setup other than the main one, with
// each row's batch throughput as a share of strict priority's and whether
// it meets the goal.
func (c *Comparison) PrintSetup(out io.Writer) {
	fmt.Fprintf(out, "behind %s; seeds %d–%d\n\n", c.Setup.Name, c.Seeds[0], c.Seeds[len(c.Seeds)-1])
	c.printTable(out, true)
}

// printTable writes the rows, with the share and goal columns if goal.
func (c *Comparison) printTable(out io.Writer, goal bool) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "gate\t")
	for _, col := range Columns {
		fmt.Fprintf(tw, "%s\t", col.Name)
	}
	if goal {
		fmt.Fprint(tw, "batch % of strict\tmeets the goal\t")
	}
	fmt.Fprintln(tw)
	for v, va := range c.Variants {
		fmt.Fprintf(tw, "%s\t", va.Name)
		for _, col := range Columns {
			if va.ChatAlone && col.Batch {
				fmt.Fprint(tw, "—\t")
				continue
			}
			sp := c.Spread(v, col.Of)
			f := col.Format
			fmt.Fprintf(tw, f+" ["+f+"–"+f+"]\t", sp.Median, sp.Min, sp.Max)
		}
		if goal {
			share := c.BatchShare(v)
			fmt.Fprintf(tw, "%.0f [%.0f–%.0f]\t%s\t", 100*share.Median, 100*share.Min, 100*share.Max, yes(c.MeetsGoal(v)))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// Frontier returns the rows that trade chat's SLO for batch throughput —
// those with a ceiling, and those that make running batch requests give
// way — in falling order of their median batch throughput as a share of
// strict priority's, each with whether another of them beats it on both
// medians (SLO met and that share): the rows not beaten are the frontier.
func (c *Comparison) Frontier() (rows []int, beaten []bool) {
	slo := func(v int) float64 { return c.Spread(v, func(r Run) float64 { return r.SLOMet }).Median }
	batch := func(v int) float64 { return c.BatchShare(v).Median }
	for v, va := range c.Variants {
		if va.Ceiling || va.Reclaims() {
			rows = append(rows, v)
		}
	}
	slices.SortStableFunc(rows, func(a, b int) int { return cmp.Compare(batch(b), batch(a)) })
	for _, v := range rows {
		out := false
		for _, w := range rows {
			if w != v && slo(w) >= slo(v) && batch(w) >= batch(v) && (slo(w) > slo(v) || batch(w) > batch(v)) {
				out = true
			}
		}
		beaten = append(beaten, out)
	}
	return rows, beaten
}

// BatchShare returns, seed by seed, variant v's batch throughput as a
// share of strict priority's (row 0).
func (c *Comparison) BatchShare(v int) sim.Spread {
	values := make([]float64, len(c.Seeds))
	for i := range c.Seeds {
		values[i] = c.Runs[v][i].BatchPerSecond / c.Runs[0][i].BatchPerSecond
	}
	return sim.SpreadOf(values)
}

// Goal is the issue's: chat meets its SLO on every seed for at least
// GoalSLO of its requests, while batch keeps at least GoalBatch of its
// strict-priority throughput on every seed.
const (
	GoalSLO   = 0.99
	GoalBatch = 0.90
)

// MeetsGoal reports whether variant v reaches the goal on every seed.
func (c *Comparison) MeetsGoal(v int) bool {
	return c.Spread(v, func(r Run) float64 { return r.SLOMet }).Min >= GoalSLO && c.BatchShare(v).Min >= GoalBatch
}

// PrintFrontier writes the trade of SLO met against batch throughput of
// the rows that make one.
func (c *Comparison) PrintFrontier(out io.Writer) {
	fmt.Fprintf(out, "\nfrontier: chat SLO met against batch throughput (%% of strict priority's, seed by seed)\n")
	fmt.Fprintf(out, "goal: SLO met >= %.0f%% on every seed with batch >= %.0f%% of strict priority's\n\n", 100*GoalSLO, 100*GoalBatch)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "gate\tchat SLO met %\tbatch % of strict\ton the frontier\tmeets the goal\t\n")
	rows, beaten := c.Frontier()
	for k, v := range rows {
		slo := c.Spread(v, func(r Run) float64 { return 100 * r.SLOMet })
		share := c.BatchShare(v)
		fmt.Fprintf(tw, "%s\t%.1f [%.1f–%.1f]\t%.0f [%.0f–%.0f]\t%s\t%s\t\n", c.Variants[v].Name,
			slo.Median, slo.Min, slo.Max, 100*share.Median, 100*share.Min, 100*share.Max, yes(!beaten[k]), yes(c.MeetsGoal(v)))
	}
	tw.Flush()
}

// PrintDetail runs every variant behind the main setup on seed and
// writes, second by second, how many batch requests were running and how
// many chat requests were waiting, under each gate.
func PrintDetail(out io.Writer, variants []Variant, seed uint64) error {
	runs := make([]Run, len(variants))
	err := sim.Parallel(len(variants), func(v int) error {
		var err error
		runs[v], err = Simulate(MainSetup, variants[v], seed)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "seed %d, second by second: batch requests running / chat requests waiting, under each gate\n", seed)
	for v, va := range variants {
		fmt.Fprintf(out, "  %c  %s\n", 'A'+v, va.Name)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "t s\tchat req/s\t")
	for v := range variants {
		fmt.Fprintf(tw, "%c\t", 'A'+v)
	}
	fmt.Fprintln(tw)
	for t := time.Duration(0); t < simDuration; t += time.Second {
		rate := quietRate
		if t%(quietFor+busyFor) >= quietFor {
			rate = busyRate
		}
		fmt.Fprintf(tw, "%d\t%d\t", int(t.Seconds()), rate)
		for _, r := range runs {
			running, waiting := 0, 0
			// The gate is the pool's 64 slots: a batch attempt runs from
			// the instant it leaves its band to its revocation or its end.
			for _, sp := range r.spans {
				if sp.from <= t && t < sp.to {
					running++
				}
			}
			// A chat request, never revoked, has one attempt.
			for _, rec := range r.records {
				if rec.Tenant == chatTenant && rec.Arrival <= t && t < rec.Arrival+rec.QueueTime {
					waiting++
				}
			}
			fmt.Fprintf(tw, "%d/%d\t", running, waiting)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
