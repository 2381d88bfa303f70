// Command fake-vllm runs simulated vLLM model servers on loopback, for
// trying a gateway by hand: each speaks OpenAI's completions and chat
// completions API and serves vLLM's load metrics on /metrics.
//
//	go run ./examples/modelserver/cmd/fake-vllm -n 3 -listen 127.0.0.1:8001
//	curl -sS http://127.0.0.1:8001/v1/completions -d '{"prompt":"hello","max_tokens":8}'
//	curl -sS http://127.0.0.1:8001/metrics
//	go run ./examples/modelserver/cmd/fake-vllm -scheduling-policy priority  # vLLM's priority scheduling
//
// The n servers listen on consecutive ports from -listen's. It prints their
// URLs, then serves until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, nil)
	stop()
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintln(os.Stderr, "fake-vllm:", err)
		os.Exit(2)
	}
}

// run parses args, starts the servers and serves until ctx ends. If ready
// is not nil it receives the servers' URLs once they listen.
func run(ctx context.Context, args []string, stdout io.Writer, ready chan<- []string) error {
	fs := flag.NewFlagSet("fake-vllm", flag.ContinueOnError)
	fs.SetOutput(stdout)
	n := fs.Int("n", 1, "number of servers")
	listen := fs.String("listen", "127.0.0.1:8001", "loopback `address` of the first server; each next one listens on the next port (port 0: any free ports)")
	cfg := modelserver.Config{}
	fs.StringVar(&cfg.Model, "model", modelserver.DefaultModel, "served model name")
	fs.IntVar(&cfg.Slots, "slots", modelserver.DefaultSlots, "requests each server runs at once (vLLM's --max-num-seqs)")
	fs.StringVar(&cfg.SchedulingPolicy, "scheduling-policy", modelserver.PolicyFCFS,
		`vLLM's scheduling policy: "fcfs", or "priority" (by the request body's "priority", lower first, with preemption by recompute)`)
	fs.IntVar(&cfg.KVCacheTokens, "kv-cache-tokens", modelserver.DefaultKVCacheTokens, "KV cache of each server, in tokens")
	fs.IntVar(&cfg.MaxModelLen, "max-model-len", modelserver.DefaultMaxModelLen, "context length, in tokens")
	fs.IntVar(&cfg.ReplyTokens, "reply-tokens", 0, "length of the model's natural answer (0: every answer runs to max_tokens)")
	fs.Float64Var(&cfg.Speed, "speed", 1, "speed factor: 2 serves twice as fast as the default 10ms + 40µs/prompt token prefill and 5ms decode step")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case *n < 1 || *n > 256:
		return fmt.Errorf("-n %d: must be between 1 and 256", *n)
	case cfg.Slots < 1:
		return fmt.Errorf("-slots %d: must be positive", cfg.Slots)
	case !(cfg.Speed > 0):
		return fmt.Errorf("-speed %v: must be positive", cfg.Speed)
	}
	host, portText, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("-listen %q: %w", *listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-listen %q: only loopback addresses (127.0.0.1:PORT, [::1]:PORT, localhost:PORT)", *listen)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port+*n-1 > 65535 {
		return fmt.Errorf("-listen %q: the ports must lie between 0 and 65535", *listen)
	}

	var (
		servers []*http.Server
		serving sync.WaitGroup
		urls    []string
	)
	defer func() {
		for _, srv := range servers {
			srv.Close()
		}
		serving.Wait()
	}()
	for i := range *n {
		c := cfg
		c.Name = "fake-vllm-" + strconv.Itoa(i)
		ms, err := modelserver.New(c)
		if err != nil {
			return err
		}
		p := port
		if port != 0 {
			p += i
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: ms, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		serving.Go(func() { _ = srv.Serve(l) })
		url := "http://" + l.Addr().String()
		urls = append(urls, url)
		fmt.Fprintf(stdout, "%s  model %s, %d slots, %d KV tokens, scheduling %s\n", url, ms.Config().Model, ms.Config().Slots, ms.Config().KVCacheTokens, ms.Config().SchedulingPolicy)
	}
	if ready != nil {
		ready <- urls
	}
	<-ctx.Done()
	return nil
}
