//go:build linux

// Command sluice-loadbench measures what sluice-gateway adds to a request
// over a bare reverse proxy, as an operator would: on loopback, each in
// its own process, under an open-loop load at fixed rates.
//
//	cd examples/deploy
//	go run ./cmd/sluice-loadbench                  # about 8 minutes
//	go run ./cmd/sluice-loadbench -duration 3s -rounds 2
//
// It starts a zero-cost backend (it answers a chat completion at once,
// and serves an idle vLLM's /metrics), a bare httputil.ReverseProxy in
// front of it, sluice-gateway -max-inflight 100000 (flow control on, a
// gate that never queues) and sluice-gateway with its default saturation
// gate, which scrapes the backend's metrics every 50 ms (with a
// queue-depth threshold that the idle backend never reaches: the default
// threshold, 5, is also the gate's start budget between two scrapes,
// which caps one backend at 100 requests a second). The gateway is
// built from this module with go build, unless -gateway names a binary.
// github.com/tsenart/vegeta/v12 drives each target in turn at every rate
// (-rates) for -duration, the targets in a different order each round,
// for -rounds interleaved rounds; then does the same for a streamed
// completion from a slow backend (-sse-rate; its first event comes after
// -sse-delay).
//
// For each rate and target it prints the medians over the rounds of: p50,
// p99 and p99.9 latency, and the same added over the backend alone in the
// same round (for a stream, the time to the first body byte); the
// process's CPU time per request (user and system, from /proc); its heap
// allocations per request (go_memstats_mallocs_total, less its own
// scrapes); the requests not answered 200. A ratio compares each gateway
// with its reference, round by round (the median, then the range): the
// -max-inflight gateway with the bare proxy, the saturation-gated one
// with the -max-inflight one.
//
// -profile DIR builds the gateway with the sluice_pprof tag and, after
// the rounds, takes a CPU profile of the proxy and of each gateway at
// -profile-rate into DIR, for go tool pprof.
//
// It exits 1 when a request was not answered 200, 2 for a bad flag. The
// processes it starts listen on 127.0.0.1 only, and die with it. Linux
// only: CPU time is read from /proc.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if js := os.Getenv(childEnv); js != "" {
		var cfg childConfig
		if err := json.Unmarshal([]byte(js), &cfg); err != nil {
			fmt.Fprintf(os.Stderr, "sluice-loadbench: %s: %v\n", childEnv, err)
			os.Exit(2)
		}
		os.Exit(runChild(cfg))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the parsed command line.
type config struct {
	rates       []int
	duration    time.Duration
	rounds      int
	warmup      time.Duration
	sseRate     int
	sseDelay    time.Duration
	sseInterval time.Duration
	sseEvents   int
	saturation  bool
	gateway     string
	profile     string
	profileRate int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("sluice-loadbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rates := fs.String("rates", "500,1000,2000", "comma-separated `rates` in requests a second")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each target is driven at each rate in each round")
	fs.IntVar(&c.rounds, "rounds", 3, "interleaved `rounds`")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "how long each target is driven before the rounds, unmeasured")
	fs.IntVar(&c.sseRate, "sse-rate", 200, "`rate` of the streamed case in requests a second; 0 skips it")
	fs.DurationVar(&c.sseDelay, "sse-delay", 50*time.Millisecond, "the slow backend's time to the first event of a stream")
	fs.DurationVar(&c.sseInterval, "sse-interval", 5*time.Millisecond, "the time between the stream's next events")
	fs.IntVar(&c.sseEvents, "sse-events", 5, "events in a stream, before [DONE]")
	fs.BoolVar(&c.saturation, "saturation", true, "also measure the gateway with its default saturation gate")
	fs.StringVar(&c.gateway, "gateway", "", "sluice-gateway `binary` to measure; empty builds it from this module")
	fs.StringVar(&c.profile, "profile", "", "`dir` to write CPU profiles of the proxy and the gateways to, after the rounds")
	fs.IntVar(&c.profileRate, "profile-rate", 1000, "`rate` of the profiled runs")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q", fs.Arg(0))
		fmt.Fprintf(stderr, "sluice-loadbench: %v\n", err)
		return c, err
	}
	var err error
	for f := range strings.SplitSeq(*rates, ",") {
		n, perr := strconv.Atoi(strings.TrimSpace(f))
		if perr != nil || n <= 0 {
			err = fmt.Errorf("-rates: %q is not a positive number of requests a second", f)
			break
		}
		c.rates = append(c.rates, n)
	}
	switch {
	case err != nil:
	case c.duration <= 0:
		err = errors.New("-duration must be positive")
	case c.rounds <= 0:
		err = errors.New("-rounds must be positive")
	case c.warmup < 0:
		err = errors.New("-warmup must not be negative")
	case c.sseRate < 0:
		err = errors.New("-sse-rate must not be negative")
	case c.sseDelay < 0 || c.sseInterval < 0:
		err = errors.New("-sse-delay and -sse-interval must not be negative")
	case c.sseEvents <= 0:
		err = errors.New("-sse-events must be positive")
	case c.profileRate <= 0:
		err = errors.New("-profile-rate must be positive")
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice-loadbench: %v\n", err)
	}
	return c, err
}

// The bodies the benchmark sends: a small chat completion, and the same
// streamed.
var (
	chatBody   = []byte(`{"model":"loadbench","messages":[{"role":"user","content":"Say ok."}],"max_tokens":16}`)
	streamBody = []byte(`{"model":"loadbench","messages":[{"role":"user","content":"Say ok."}],"max_tokens":16,"stream":true}`)
)

const chatPath = "/v1/chat/completions"

// saturationConfig is the saturation-gated gateway's file: the default
// gate, llm-d-router's utilization-detector scraped every 50 ms with a
// 200 ms staleness threshold, but with a queue-depth threshold no idle
// backend reaches. The default's (5) is also its start budget between two
// scrapes (see gate.SaturationGate): 5 starts per backend per 50 ms, 100
// requests a second from one backend, which the rates here exceed; the
// case measures what the gate and its scrapes cost a request, not that
// budget.
const saturationConfig = `gate:
  saturation:
    queueDepthThreshold: 1000000
`

// The names of the targets.
const (
	nameBackend    = "backend alone"
	nameProxy      = "bare proxy"
	nameGateway    = "sluice-gateway -max-inflight"
	nameSaturation = "sluice-gateway saturation gate"
)

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	failed, err := bench(cfg, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-loadbench: %v\n", err)
		return 1
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "sluice-loadbench: %d requests were not answered 200\n", failed)
		return 1
	}
	return 0
}

// bench starts the processes, runs the rounds and prints the tables; it
// returns the number of requests not answered 200.
func bench(cfg config, stdout, stderr io.Writer) (int, error) {
	dir, err := os.MkdirTemp("", "sluice-loadbench")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	saturationFile := filepath.Join(dir, "saturation.yaml")
	if err := os.WriteFile(saturationFile, []byte(saturationConfig), 0o644); err != nil {
		return 0, err
	}
	bin := cfg.gateway
	if bin == "" {
		bin = filepath.Join(dir, "sluice-gateway")
		build := []string{"build", "-o", bin}
		if cfg.profile != "" {
			build = append(build, "-tags", "sluice_pprof")
		}
		cmd := exec.Command("go", append(build, "github.com/sluicegate/sluice/examples/deploy/cmd/sluice-gateway")...)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("building sluice-gateway (run from within examples/deploy, or give -gateway): %w", err)
		}
	}

	backend, err := startChild(childConfig{Role: "backend", SSEDelay: cfg.sseDelay, SSEInterval: cfg.sseInterval, SSEEvents: cfg.sseEvents})
	if err != nil {
		return 0, err
	}
	defer backend.stop()
	proxy, err := startChild(childConfig{Role: "proxy", Backend: backend.addr})
	if err != nil {
		return 0, err
	}
	defer proxy.stop()
	proxy.name = nameProxy
	backend.name = nameBackend
	targets := []*process{backend, proxy}
	pprofAddrs := map[string]string{nameProxy: strings.TrimPrefix(proxy.stats, "http://")}
	gateways := []struct {
		name  string
		flags []string
	}{{nameGateway, []string{"-max-inflight", "100000"}}}
	if cfg.saturation {
		gateways = append(gateways, struct {
			name  string
			flags []string
		}{nameSaturation, []string{"-config", saturationFile}})
	}
	for _, gw := range gateways {
		var pp string
		if cfg.profile != "" {
			port, err := freePort()
			if err != nil {
				return 0, err
			}
			pp = "127.0.0.1:" + strconv.Itoa(port)
			pprofAddrs[gw.name] = pp
		}
		g, err := startGateway(gw.name, bin, backend.addr, pp, gw.flags...)
		if err != nil {
			return 0, err
		}
		defer g.stop()
		targets = append(targets, g)
	}
	clients := map[*process]*http.Client{}
	for _, t := range targets {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 10000
		defer tr.CloseIdleConnections()
		clients[t] = &http.Client{Transport: tr}
	}

	fmt.Fprintf(stderr, "warming up: %v per target\n", cfg.warmup)
	if cfg.warmup > 0 {
		for _, t := range targets {
			if _, err := attack(t, clients[t], chatPath, chatBody, slices.Min(cfg.rates), cfg.warmup, false); err != nil {
				return 0, err
			}
		}
	}

	type key struct {
		stream bool
		rate   int
		target string
	}
	results := map[key][]sample{}
	measure := func(stream bool, rate, round int) error {
		body := chatBody
		if stream {
			body = streamBody
		}
		n := len(targets)
		for i := range n {
			t := targets[(i+round)%n] // a different order each round
			s, err := attack(t, clients[t], chatPath, body, rate, cfg.duration, stream)
			if err != nil {
				return fmt.Errorf("%s at %d/s: %w", t.name, rate, err)
			}
			k := key{stream, rate, t.name}
			results[k] = append(results[k], s)
		}
		return nil
	}
	for round := range cfg.rounds {
		fmt.Fprintf(stderr, "round %d of %d\n", round+1, cfg.rounds)
		for _, rate := range cfg.rates {
			if err := measure(false, rate, round); err != nil {
				return 0, err
			}
		}
		if cfg.sseRate > 0 {
			if err := measure(true, cfg.sseRate, round); err != nil {
				return 0, err
			}
		}
	}

	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
	}
	failed := 0
	for _, ss := range results {
		for _, s := range ss {
			failed += s.non200
		}
	}
	fmt.Fprintf(stdout, "Non-streamed chat completions: %v per target and rate, %d interleaved rounds, medians of the rounds.\n\n", cfg.duration, cfg.rounds)
	printTable(stdout, "", cfg.rates, names, func(rate int, name string) []sample { return results[key{false, rate, name}] })
	if cfg.sseRate > 0 {
		fmt.Fprintf(stdout, "\nStreamed chat completions (SSE; first event after %v, then %d more every %v): latency is the time to the first body byte.\n\n",
			cfg.sseDelay, cfg.sseEvents-1, cfg.sseInterval)
		printTable(stdout, "TTFB ", []int{cfg.sseRate}, names, func(rate int, name string) []sample { return results[key{true, rate, name}] })
	}

	if cfg.profile != "" {
		if err := os.MkdirAll(cfg.profile, 0o755); err != nil {
			return failed, err
		}
		for _, t := range targets[1:] {
			file := filepath.Join(cfg.profile, strings.NewReplacer(" ", "-", "/", "").Replace(t.name)+".pprof")
			fmt.Fprintf(stderr, "profiling %s at %d/s into %s\n", t.name, cfg.profileRate, file)
			if err := profile(t, clients[t], pprofAddrs[t.name], cfg.profileRate, cfg.duration, file); err != nil {
				return failed, err
			}
		}
	}
	return failed, nil
}

// profile takes a CPU profile of t, served by pprof at addr, while
// driving it at rate for d, into file.
func profile(t *process, client *http.Client, addr string, rate int, d time.Duration, file string) error {
	secs := max(int(d/time.Second), 1)
	got := make(chan error, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
		if err != nil {
			got <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			got <- fmt.Errorf("pprof of %s: %s", t.name, resp.Status)
			return
		}
		f, err := os.Create(file)
		if err != nil {
			got <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		got <- err
	}()
	if _, err := attack(t, client, chatPath, chatBody, rate, time.Duration(secs)*time.Second, false); err != nil {
		return err
	}
	return <-got
}
