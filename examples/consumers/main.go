// Command consumers compares how upstream dispatchers read a Sluice
// router's signals, on the shared simulator with the real flow controller
// inside: Sluice's window (package headroom/window), a re-implementation of
// llm-d-async's AIMD gate from its documented behaviour, and variants that
// isolate each signal (headroom, queue duration, Retry-After).
//
// Four scenarios share one pool of 16 slots: an endless backlog beside
// interactive tenants whose load switches (one band); a batch band with a
// 2 s TTL below the interactive band; and 2 and 4 dispatchers sharing the
// band of the first. Each variant runs on each scenario for each seed, and
// every cell prints the median over the seeds with the minimum and maximum.
// A last table puts the simplest dispatchers on the first scenario: a fixed
// window of 64 against an AIMD window, with and without the headroom
// header (package headroom/window; examples/dispatcher runs it live).
//
//	go run ./examples/consumers              # seeds 1–20
//	go run ./examples/consumers -from 1 -to 5
//
// The same seeds print the same bytes.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sluicegate/sluice/examples/internal/sim"
)

func main() {
	seeds := sim.SeedRangeFlags("consumers")
	flag.Parse()
	if err := run(os.Stdout, seeds()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// run prints the comparison over seeds once every run of it has ended.
func run(out io.Writer, seeds []uint64) error {
	c, err := Compare(Scenarios, Variants, seeds)
	if err != nil {
		return err
	}
	w, err := Compare([]Scenario{WindowScenario}, Windows, seeds)
	if err != nil {
		return err
	}
	c.Print(out)
	w.PrintTables(out)
	return nil
}
