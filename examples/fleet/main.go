// Command fleet compares one flow controller with the whole capacity C
// against 2 and 4 router replicas that share one view of the fleet
// (flowcontrol/fleet: each replica's gate enforces its share of C, divided
// by demand in strict priority, synced every 100 ms over a store 5 ms
// away, with an overdraft of 2 for a higher band while a lower one holds
// a slot), and against replicas that share nothing (each with the static
// C/R); a fleet of one synced replica shows the comparisons' noise.
// Requests, and each retry, go to the replicas in turn.
//
// Two scenarios run on the shared simulator with the real controllers:
// examples/crossband's — bursty chat at priority 10 (1 s TTFT SLO, Poisson
// 3 req/s for 20 s then 12 req/s for 10 s) beside 120 closed-loop batch
// clients at −1 (log-normal outputs of mean 1,000 tokens, σ 1), on 4
// servers × 16 slots, C = 64, under strict priority, with in-flight
// eviction, and with the band handed to servers that schedule by it — and
// a fairness scenario: a heavy and a light tenant in one
// band of 64 places (fleet-wide) at 1.5× overload of 4 × 8 slots, deficit
// round robin with fair admission.
//
//	go run ./examples/fleet                # seeds 1–10
//	go run ./examples/fleet -from 1 -to 3
//	go run ./examples/fleet -period 50ms -delay 20ms
//	go run ./examples/fleet -overdraft 0   # replicas that never pass their share
//
// Every cell is the median over the seeds with the minimum and maximum;
// the "vs one" columns are each seed's difference from one controller on
// the same seed. The same flags print the same bytes.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sluicegate/sluice/examples/internal/sim"
)

func main() {
	from := flag.Uint64("from", 1, "first seed")
	to := flag.Uint64("to", 10, "last seed")
	period := flag.Duration("period", DefaultSync.Period, "each synced replica's round")
	delay := flag.Duration("delay", DefaultSync.Delay, "the store's delay, from a publish to when reads see it")
	overdraft := flag.Int64("overdraft", DefaultSync.Overdraft, "each synced replica's overdraft (fleet.Config.Overdraft)")
	flag.Parse()
	if *from == 0 || *to < *from {
		fmt.Fprintf(os.Stderr, "fleet: -from %d and -to %d: want 1 <= from <= to\n", *from, *to)
		os.Exit(2)
	}
	if *period < time.Millisecond || *delay < 0 || *overdraft < 0 {
		fmt.Fprintf(os.Stderr, "fleet: -period %v, -delay %v and -overdraft %d: want a period of at least 1ms, a delay and an overdraft of at least 0\n", *period, *delay, *overdraft)
		os.Exit(2)
	}
	c, err := Compare(sim.SeedRange(*from, *to), Sync{Period: *period, Delay: *delay, Overdraft: *overdraft})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c.Print(os.Stdout)
}
