// Command fairness simulates tenants of very different rates and prompt
// sizes sharing one band at 1.5× overload, and compares how the band
// shares its service and its places among them: the real FlowController,
// on the virtual clock of examples/internal/sim, under the
// global-strict (one queue for the band), round-robin and deficit round
// robin fairness policies, each without and with fair admission
// (displacement of the heaviest flow's newest request when the band is
// full).
//
// For each tenant it prints the share of its requests served, how many were
// rejected at the door, displaced or expired, the 95th percentile of the
// served requests' queue time, and the tokens served per second. Then the
// heavy tenant's and the worst light tenant's success rates over seeds
// 1..n, minimum / median / maximum.
//
// The simulation runs on virtual time from a seeded generator, so the same
// flags always print the same tables:
//
//	go run ./examples/fairness
//	go run ./examples/fairness -seed 7 -overload 2 -seeds 5
//	go run ./examples/fairness -light-ttl 2s
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	cfg := DefaultConfig()
	flag.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed of the detailed table")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "simulated arrival period")
	flag.Float64Var(&cfg.Overload, "overload", cfg.Overload, "offered work as a multiple of the pool's")
	lightTTL := flag.Duration("light-ttl", 0, "the light tenants' own timeout, if shorter than the band's TTL (0: none)")
	seeds := flag.Int("seeds", 20, "summarize seeds 1..n (0: none)")
	flag.Parse()
	for i := range cfg.Tenants {
		if cfg.Tenants[i].Rate > 0 {
			cfg.Tenants[i].TTL = *lightTTL
		}
	}
	if *seeds < 0 {
		fmt.Fprintln(os.Stderr, "fairness: -seeds must not be negative")
		os.Exit(2)
	}

	variants := Variants()
	results, err := Simulate(cfg, variants)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	PrintScenario(os.Stdout, cfg)
	fmt.Println()
	PrintTable(os.Stdout, cfg, results)
	if *seeds == 0 {
		return
	}
	sums, err := Seeds(cfg, variants, *seeds)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("\nseeds 1–%d, success rate min / median / max:\n", *seeds)
	PrintSeeds(os.Stdout, sums)
}
