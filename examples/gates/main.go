// Command gates compares the gates of package gate with fixed in-flight
// limits on the simulator of examples/internal/sim: the real
// FlowController on a virtual clock, in front of four model servers with
// their own queues and paged KV caches, whose capacity changes from phase
// to phase — prompts double, then one server fails, then it returns.
//
// Rows: MaxInFlight too low, right for the first phase and too high; the
// saturation gate (llm-d's utilization-detector) with llm-d's defaults and
// with a KV-cache threshold of 0.9; the adaptive gate Sluice ships (AIMD on
// time to first token) and the gradient design it was chosen over. Then the
// same pool behind 2 and 4 routers: fixed limits split across them
// against saturation gates that share the room. Per phase it prints
// goodput (requests whose first token came within the SLO, per second),
// p95 time to first token, the model servers' waiting queues, and the
// requests Sluice shed, with goodput also as a share of the best fixed
// limit for that phase (swept, in hindsight).
//
//	go run ./examples/gates
//	go run ./examples/gates -seed 2
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	seed := flag.Uint64("seed", 1, "the seed of every random draw")
	flag.Parse()
	cfg := DefaultConfig()
	cfg.Seed = *seed
	c, err := Compare(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gates:", err)
		os.Exit(1)
	}
	Print(os.Stdout, c)
}
