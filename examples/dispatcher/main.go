// Command dispatcher is an upstream asynchronous dispatcher that sizes its
// dispatch window for one priority band from the router's response feedback
// (see package github.com/sluicegate/sluice/headroom/window).
//
// With no flags it runs a deterministic simulation of one band shared with
// other tenants and compares three dispatchers on the same workload: fixed
// concurrency, AIMD without the headroom header, and AIMD with it.
//
//	go run ./examples/dispatcher
//	go run ./examples/dispatcher -seed 7 -duration 10m
//
// With -target it dispatches real requests to a gateway, such as
// examples/gateway, and prints the window once a second:
//
//	go run ./examples/dispatcher -target http://127.0.0.1:8080 -requests 500
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
)

func main() {
	cfg := DefaultSimConfig()
	fs := flag.NewFlagSet("dispatcher", flag.ExitOnError)
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "simulation: random seed")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "simulation: simulated time; live: wall-clock limit (default 1m)")
	fs.IntVar(&cfg.Servers, "servers", cfg.Servers, "simulation: requests the band serves at once")
	fs.DurationVar(&cfg.MeanService, "service", cfg.MeanService, "simulation: mean service time")
	fs.IntVar(&cfg.QueueCapacity, "queue", cfg.QueueCapacity, "simulation: band request capacity (queued requests)")
	fs.Float64Var(&cfg.QuietRate, "quiet", cfg.QuietRate, "simulation: other tenants' rate in quiet phases, req/s")
	fs.Float64Var(&cfg.BusyRate, "busy", cfg.BusyRate, "simulation: other tenants' rate in busy phases, req/s")
	fs.DurationVar(&cfg.MeanPhase, "phase", cfg.MeanPhase, "simulation: mean length of a quiet or busy phase")
	fs.DurationVar(&cfg.Latency, "latency", cfg.Latency, "simulation: one-way network latency")
	fs.BoolVar(&cfg.RetryAfter, "retry-after", cfg.RetryAfter, "simulation: the band sends Retry-After on capacity rejections")
	fs.IntVar(&cfg.FixedConcurrency, "fixed", cfg.FixedConcurrency, "simulation: window of the fixed-concurrency dispatcher")
	fs.DurationVar(&cfg.TargetQueueDelay, "target-delay", cfg.TargetQueueDelay, "queue delay above which AIMD holds growth (0: never)")
	live := liveFlags(fs)
	fs.Parse(os.Args[1:])

	if live.target == "" {
		results, err := Simulate(cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		printSimHeader(os.Stdout, cfg)
		PrintTable(os.Stdout, results)
		return
	}

	fs.Visit(func(f *flag.Flag) {
		if f.Name == "duration" {
			live.duration = cfg.Duration
		}
	})
	live.window.TargetQueueDelay = cfg.TargetQueueDelay
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := runLive(ctx, *live, http.DefaultClient, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
