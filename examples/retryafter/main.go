// Command retryafter compares ways of choosing the Retry-After of a
// refusal, on the simulator of examples/internal/sim: the real
// FlowController on a virtual clock, clients that retry like the OpenAI
// SDKs and honour Retry-After, and traffic with idle gaps and bursts.
//
// Each design is computed on the client side, from what a client-side
// policy can observe of the controller (its snapshots, its Observer events
// and the rejection itself), so the comparison does not depend on what the
// controller ships; the row "controller" honours the controller's own
// RejectionError.RetryAfter. It prints the designs over seeds 1..n
// (minimum / median / maximum), then seed 1 in detail, then two more
// comparisons over the same seeds: the prior sent before a drain rate is
// measured, on a cold start with a burst (BurstScenario), and the
// Retry-After of rejected-ttl-expired (ExpiryScenario):
//
//	go run ./examples/retryafter
//	go run ./examples/retryafter -seeds 5 -seed 3
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	seeds := flag.Int("seeds", defaultSeeds, "compare over seeds 1..n")
	seed := flag.Uint64("seed", 1, "the seed shown in detail")
	flag.Parse()
	if *seeds < 1 {
		fmt.Fprintln(os.Stderr, "retryafter: -seeds must be at least 1")
		os.Exit(2)
	}
	designs := Designs()
	aggs, err := Compare(*seeds, designs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	detail, err := Run(*seed, designs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	printHeader(os.Stdout, designs)
	fmt.Printf("seeds 1–%d, min / median / max:\n", *seeds)
	PrintAggregates(os.Stdout, aggs)
	fmt.Printf("\nseed %d:\n", *seed)
	PrintDetail(os.Stdout, detail)

	priors := PriorDesigns()
	aggs, err = CompareScenario(BurstScenario, *seeds, priors)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println()
	printPriorHeader(os.Stdout, priors)
	fmt.Printf("seeds 1–%d, min / median / max:\n", *seeds)
	PrintAggregates(os.Stdout, aggs)

	expiries := ExpiryDesigns()
	aggs, err = CompareScenario(ExpiryScenario, *seeds, expiries)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println()
	printExpiryHeader(os.Stdout, expiries)
	fmt.Printf("seeds 1–%d, min / median / max:\n", *seeds)
	PrintAggregates(os.Stdout, aggs)

	aggs, err = CompareScenario(DeepExpiryScenario, *seeds, expiries)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println()
	fmt.Println("Expiries in a deep band: DeepExpiryScenario, batch TTL 10 s, up to 300 queued, 20 req/s throughout")
	fmt.Printf("seeds 1–%d, min / median / max:\n", *seeds)
	PrintAggregates(os.Stdout, aggs)
}
