package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/examples/extproc/internal/procbench"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

const (
	// beNoop makes the test binary serve procbench.Noop, the no-op ext_proc
	// server, on its -listen address.
	beNoop = "SLUICE_EXTPROC_TEST_BE_NOOP"
	// answerCPU makes a child acting as the command answer each line on
	// its standard input with its CPU time so far (answerCPUTime).
	answerCPU = "SLUICE_EXTPROC_TEST_ANSWER_CPU"
)

// BenchmarkLoad drives sluice-extproc, as an operator runs it, and the
// no-op ext_proc server, its baseline, each in its own process on
// loopback, at fixed rates of requests, open loop: request i to each
// server is sent at start + i/rate whether or not the earlier ones are
// answered, each on a stream of its own over one gRPC connection per
// server, as Envoy's ext_proc filter does (procbench.Request: request
// headers, response headers, close). Both servers are driven at once,
// their schedules half an interval apart, so that whatever else the
// machine runs weighs on both alike. A sub-benchmark's b.N is its number
// of requests per server, so -benchtime 5s runs each rate for about five
// seconds; ns/op is 1/rate.
//
// The baseline is server=noop in the same window: procbench.Noop, which
// answers every message with a bare CONTINUE. sluice-extproc runs with
// -max-inflight 100000, so flow control is on and the gate never queues,
// and its metrics server on. For each server the benchmark reports the
// process's CPU time per request (cpu-ns/req, user and system, read from
// the process itself before and after) and the latency of a request from
// the moment it was due (p50-ns, p99-ns, p999-ns), then cpu-ratio and
// p99-ratio, sluice-extproc's over the no-op server's. The budget is a
// cpu-ratio of at most 1.05 and a p99-ratio of at most 1.3. Every request
// must be answered as Envoy expects, or the benchmark fails. Run rounds
// as separate runs of the test binary (each starts both servers afresh)
// and take medians:
//
//	go test -c -o extproc.test ./cmd/sluice-extproc
//	for i in 1 2 3; do ./extproc.test -test.run '^$' -test.bench Load -test.benchtime 5s; done | tee load.txt
//	go run golang.org/x/perf/cmd/benchstat@latest load.txt
func BenchmarkLoad(b *testing.B) {
	noop := startLoadChild(b, "noop", beNoop)
	sluice := startLoadChild(b, "sluice-extproc", beMain, "-max-inflight", "100000", "-metrics-listen", "127.0.0.1:0")
	for _, rate := range []int{500, 1000, 2000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			r := driveTogether(b, rate, noop, sluice)
			base, adapter := r[0], r[1]
			base.report(b, "noop-")
			adapter.report(b, "sluice-")
			b.ReportMetric(float64(adapter.cpuPerRequest)/float64(base.cpuPerRequest), "cpu-ratio")
			b.ReportMetric(float64(adapter.p99)/float64(base.p99), "p99-ratio")
		})
	}
}

// loadResult is what one server did under one run of driveTogether.
type loadResult struct {
	cpuPerRequest, p50, p99, p999 time.Duration
}

// report reports r's figures, their units prefixed with prefix.
func (r loadResult) report(b *testing.B, prefix string) {
	b.ReportMetric(float64(r.cpuPerRequest), prefix+"cpu-ns/req")
	b.ReportMetric(float64(r.p50), prefix+"p50-ns")
	b.ReportMetric(float64(r.p99), prefix+"p99-ns")
	b.ReportMetric(float64(r.p999), prefix+"p999-ns")
}

// driveTogether sends b.N requests at rate per second to each of children,
// open loop, the schedules of the children spread evenly over an
// interval, and returns what each did, in the order given.
func driveTogether(b *testing.B, rate int, children ...*loadChild) []loadResult {
	interval := time.Second / time.Duration(rate)
	latency := make([][]time.Duration, len(children))
	cpu := make([]time.Duration, len(children))
	for k, c := range children {
		latency[k] = make([]time.Duration, b.N)
		cpu[k] = c.cpu(b)
	}
	var (
		failed   atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		for k, c := range children {
			due := start.Add(time.Duration(i)*interval + time.Duration(k)*interval/time.Duration(len(children)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				err := procbench.Request(ctx, c.client, nil)
				latency[k][i] = time.Since(due)
				if err != nil && failed.Add(1) == 1 {
					firstErr.Store(fmt.Errorf("%s: %w", c.name, err))
				}
			})
		}
	}
	wg.Wait()
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed; the first: %v", n, b.N*len(children), firstErr.Load())
	}
	results := make([]loadResult, len(children))
	for k, c := range children {
		used := c.cpu(b) - cpu[k]
		slices.Sort(latency[k])
		results[k] = loadResult{
			cpuPerRequest: used / time.Duration(b.N),
			p50:           percentile(latency[k], 0.50),
			p99:           percentile(latency[k], 0.99),
			p999:          percentile(latency[k], 0.999),
		}
	}
	return results
}

// loadChild is a server under load in its own process: the test binary,
// acting as the command or as the no-op server.
type loadChild struct {
	name   string
	cmd    *exec.Cmd
	ask    io.Writer      // a line asks for the child's CPU time
	answer *bufio.Scanner // which comes back as one line, in nanoseconds
	client extprocv3.ExternalProcessorClient
}

// startLoadChild starts the test binary with env set to 1 and args, and
// waits until it listens and has answered one request.
func startLoadChild(b *testing.B, name, env string, args ...string) *loadChild {
	b.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env+"=1", answerCPU+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listeningAddr.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	a, ok := <-addr
	if !ok {
		b.Fatalf("%s exited before listening", name)
	}
	conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	c := &loadChild{name: name, cmd: cmd, ask: stdin, answer: bufio.NewScanner(stdout),
		client: extprocv3.NewExternalProcessorClient(conn)}
	if err := procbench.Request(context.Background(), c.client, nil); err != nil {
		b.Fatalf("%s: first request: %v", name, err)
	}
	return c
}

// cpu returns the child's CPU time so far.
func (c *loadChild) cpu(b *testing.B) time.Duration {
	b.Helper()
	if _, err := io.WriteString(c.ask, "cpu\n"); err != nil {
		b.Fatalf("%s: asking for its CPU time: %v", c.name, err)
	}
	if !c.answer.Scan() {
		b.Fatalf("%s: no CPU time: %v", c.name, c.answer.Err())
	}
	ns, err := strconv.ParseInt(c.answer.Text(), 10, 64)
	if err != nil {
		b.Fatalf("%s: CPU time %q: %v", c.name, c.answer.Text(), err)
	}
	return time.Duration(ns)
}

// percentile returns the q quantile of sorted, by the nearest rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(float64(len(sorted))*q+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// answerCPUTime answers each line read from r with the process's CPU time
// so far, in nanoseconds, on a line of w, until r ends.
func answerCPUTime(r io.Reader, w io.Writer) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		ns, _ := procbench.CPUTime()
		fmt.Fprintln(w, int64(ns))
	}
}

// serveNoop is the no-op server's program: it serves procbench.Noop on
// -listen and logs its address as the command does, until it is killed
// or its listener fails.
func serveNoop(args []string) int {
	fs := flag.NewFlagSet("noop", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "gRPC listen address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		logger.Error("cannot listen", "error", err)
		return 1
	}
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, procbench.Noop{})
	logger.Info("listening", "addr", lis.Addr().String())
	if err := g.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		logger.Error("server failed", "error", strings.TrimSpace(err.Error()))
		return 1
	}
	return 0
}

// BenchmarkExtProcCommand is the command's ext_proc server as run builds
// it, in-process: flags parsed (-max-inflight 100000, so flow control is
// on and the gate never queues), the controller's metrics hooks wired
// (newController) and serve on an in-memory listener, driven as
// procbench.Bench drives it (one stream per request, request headers,
// response headers, close; mode=serial and mode=parallel; cpu-ns/op is the
// process's CPU time per request, client included). It adds to
// BenchmarkExtProc (in the adapter's package) what the command runs per
// request: the inference-route match, the model label, the metrics.
//
// The baseline is BenchmarkNoopExtProcCommand in the same run: the same
// streams against procbench.Noop. The budget is 1.05 times its CPU per
// request.
//
//	go test -run '^$' -bench 'ExtProcCommand' -benchmem -count 6 ./cmd/sluice-extproc
func BenchmarkExtProcCommand(b *testing.B) {
	opts, err := parseFlags([]string{"-max-inflight", "100000", "-metrics-listen", "off"}, io.Discard, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	m := metrics.New(metrics.Options{InferencePool: opts.pool, Logger: logger})
	fc, cfg, err := newController(&opts, m)
	if err != nil {
		b.Fatal(err)
	}
	defer fc.Close()
	m.Watch(fc, cfg)
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, fc, opts, func() time.Duration { return 0 }, func() time.Duration { return 0 }, lis, logger)
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			b.Errorf("serve: %v", err)
		}
	}()
	benchClient(b, lis, func(resp *extprocv3.ProcessingResponse) error {
		if _, ok := procbench.SetRawValue(resp.GetResponseHeaders().GetResponse().GetHeaderMutation(), flowhttp.QueueDurationHeader); !ok {
			return fmt.Errorf("response_headers reply sets no queue duration: %v", resp)
		}
		return nil
	})
}

// BenchmarkNoopExtProcCommand is the baseline of BenchmarkExtProcCommand:
// the same streams against procbench.Noop, served on the same kind of
// listener.
func BenchmarkNoopExtProcCommand(b *testing.B) {
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, procbench.Noop{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = g.Serve(lis)
	}()
	defer func() {
		g.Stop()
		<-served
	}()
	benchClient(b, lis, nil)
}

// benchClient dials lis, sends one request to bring the connection up,
// and runs procbench.Bench over it.
func benchClient(b *testing.B, lis *bufconn.Listener, check func(*extprocv3.ProcessingResponse) error) {
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := extprocv3.NewExternalProcessorClient(conn)
	if err := procbench.Request(context.Background(), client, check); err != nil {
		b.Fatal(err)
	}
	procbench.Bench(b, client, check)
}
