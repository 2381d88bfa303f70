package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Print writes the comparison: the scenario, the best fixed limit of each
// phase, then for each number of routers a summary of goodput against that
// best and a table per phase.
func Print(out io.Writer, c *Comparison) {
	cfg := c.Config
	fmt.Fprintf(out, "Gates on a pool whose capacity changes (seed %d)\n", cfg.Seed)
	fmt.Fprintf(out, "%d servers × %d slots, KV cache %d tokens; %.0f req/s of %.0f prompt + %.0f output tokens;\n",
		cfg.Servers, cfg.Slots, cfg.KVCacheTokens, cfg.Rate, cfg.Prompt.Mean, cfg.Output.Mean)
	fmt.Fprintf(out, "good = first token within %v of arrival; queue TTL %v; phases of %v; metrics scraped every %v.\n",
		cfg.SLO, cfg.TTL, cfg.PhaseLength, cfg.ScrapeInterval)
	fmt.Fprintf(out, "Phases: %s.\n", strings.Join(Phases, ", "))
	var best []string
	for ph, name := range Phases {
		best = append(best, fmt.Sprintf("%s %d (%.1f/s)", name, c.BestLimit[ph], c.Best[ph]))
	}
	fmt.Fprintf(out, "Best fixed MaxInFlight per phase, in hindsight (swept %v): %s.\n", SweepLimits, strings.Join(best, ", "))

	for _, n := range Replicas {
		rows := c.Tables[n]
		fmt.Fprintf(out, "\n== %d router%s", n, plural(n))
		if n > 1 {
			fmt.Fprint(out, " (fixed limits split evenly; each saturation gate starts its share of the room)")
		}
		fmt.Fprint(out, "\n\ngoodput as a share of the best fixed limit's:\n")
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "variant\t")
		for _, name := range Phases {
			fmt.Fprintf(tw, "%s\t", name)
		}
		fmt.Fprint(tw, "worst\t\n")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t", r.Variant.Name)
			worst := 10.0
			for ph, p := range r.Phases {
				s := c.Share(ph, p)
				worst = min(worst, s)
				fmt.Fprintf(tw, "%.0f%%\t", 100*s)
			}
			fmt.Fprintf(tw, "%.0f%%\t\n", 100*worst)
		}
		tw.Flush()
		for ph, name := range Phases {
			from := time.Duration(ph) * cfg.PhaseLength
			fmt.Fprintf(out, "\nphase %q (%v–%v), %d router%s:\n", name, from, from+cfg.PhaseLength, n, plural(n))
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprint(tw, "variant\tgoodput req/s\tp95 TTFT\tserver queue max\tmean\tshed\tlimit\t\n")
			for _, r := range rows {
				p := r.Phases[ph]
				limit := "-"
				if p.Limit > 0 {
					limit = fmt.Sprintf("%.0f", p.Limit)
				}
				fmt.Fprintf(tw, "%s\t%.1f\t%.2fs\t%d\t%.1f\t%d\t%s\t\n",
					r.Variant.Name, p.Goodput, p.P95TTFT.Seconds(), p.MaxQueue, p.MeanQueue, p.Shed, limit)
			}
			tw.Flush()
		}
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
