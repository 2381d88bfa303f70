// Command dispatcher is an upstream asynchronous dispatcher that sizes its
// dispatch window for one priority band from a live router's responses
// (package github.com/sluicegate/sluice/headroom/window): it sends real
// requests over HTTP to a gateway, such as examples/gateway or
// sluice-gateway, reads the headroom, queue duration, dropped reason and
// Retry-After of every response, and prints the window once a second:
//
//	go run ./examples/dispatcher -target http://127.0.0.1:8080 -requests 500
//
// The simulated comparison of dispatchers on the real controller — a fixed
// window, AIMD with and without the headroom header, llm-d-async's gate —
// is examples/consumers.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"time"
)

func main() {
	fs := flag.NewFlagSet("dispatcher", flag.ExitOnError)
	live := liveFlags(fs)
	fs.DurationVar(&live.duration, "duration", defaultLiveDuration, "live: wall-clock limit")
	fs.DurationVar(&live.window.TargetQueueDelay, "target-delay", 2*time.Second, "live: queue delay above which the window holds its growth (0: never)")
	fs.Parse(os.Args[1:])
	if live.target == "" {
		fmt.Fprintln(os.Stderr, "dispatcher: -target is required (the gateway's base URL); the simulation is go run ./examples/consumers")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := runLive(ctx, *live, http.DefaultClient, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
