// Command goodput simulates a pool of model servers under overload and
// compares the order in which Sluice releases waiting requests: the real
// FlowController, with its one band ordered by FCFS, EDF or SLO-deadline,
// runs on the virtual clock of examples/internal/sim. Requests carry a
// tight, a loose or no time-to-first-token SLO in x-llm-d-slo-ttft-ms.
//
// For each policy it prints the share of requests that met their SLO, the
// goodput (requests per second that met their SLO, or were served if they had
// none), how many requests expired in the queue, and the longest wait of a
// request without an SLO: the starvation SLO-deadline trades for goodput.
//
// The simulation runs on virtual time from a seeded generator, so the same
// flags always print the same table:
//
//	go run ./examples/goodput
//	go run ./examples/goodput -seed 7 -overload 1.5
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	cfg := DefaultConfig()
	flag.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "simulated arrival period")
	flag.IntVar(&cfg.Servers, "servers", cfg.Servers, "servers in the pool")
	flag.Float64Var(&cfg.Overload, "overload", cfg.Overload, "arrival rate as a multiple of the pool's service rate")
	flag.Parse()

	results, err := Simulate(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("%d servers, mean service %v, %.2fx overload, %v of arrivals, seed %d\n",
		cfg.Servers, cfg.MeanPrefill+cfg.MeanDecode, cfg.Overload, cfg.Duration, cfg.Seed)
	for _, c := range cfg.Classes {
		slo, ttl := "none", "band TTL"
		if c.SLO > 0 {
			slo = c.SLO.String()
		}
		if c.TTL > 0 {
			ttl = c.TTL.String()
		}
		fmt.Printf("  %-5s %3.0f%% of requests, TTFT SLO %s, gives up after %s\n", c.Name, 100*c.Share, slo, ttl)
	}
	fmt.Printf("  band TTL %v\n\n", cfg.BandTTL)
	PrintTable(os.Stdout, cfg, results)
}
