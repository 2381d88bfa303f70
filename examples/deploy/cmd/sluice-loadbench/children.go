//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// childEnv names the environment variable that makes this program one of
// the processes the benchmark starts (a childConfig in JSON) rather than
// the benchmark itself.
const childEnv = "SLUICE_LOADBENCH_CHILD"

// childConfig is what a child process is told.
type childConfig struct {
	// Role is "backend" or "proxy".
	Role string
	// Backend is the proxy's backend URL.
	Backend string
	// SSEDelay is how long the backend waits before the first event of
	// a streamed completion, SSEInterval the time between the next
	// ones, SSEEvents how many events it sends before [DONE].
	SSEDelay    time.Duration
	SSEInterval time.Duration
	SSEEvents   int
}

// childAddrs is the line a child prints once it listens: its address,
// and that of its statistics (/metrics with the Go runtime's and the
// process's collectors, and /debug/pprof/).
type childAddrs struct {
	Addr  string
	Stats string
}

// completion is the zero-cost backend's answer to a chat completion that
// is not streamed, as vLLM shapes it.
const completion = `{"id":"chatcmpl-loadbench","object":"chat.completion","created":0,"model":"loadbench",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`

// vllmMetrics is the backend's /metrics page: an idle vLLM, which the
// gateway's default saturation gate reads as never saturated.
const vllmMetrics = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="loadbench"} 0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="loadbench"} 0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="loadbench"} 0
`

// streamMarker is how the backend tells a streamed request: the bodies
// are the benchmark's own.
var streamMarker = []byte(`"stream":true`)

// runChild serves as the child cfg describes until its standard input
// ends (the benchmark closes it, or exits), and returns the exit code.
func runChild(cfg childConfig) int {
	var h http.Handler
	switch cfg.Role {
	case "backend":
		h = backendHandler(cfg)
	case "proxy":
		u, err := url.Parse(cfg.Backend)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sluice-loadbench proxy: backend: %v\n", err)
			return 2
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256 // as BenchmarkProxy's: no dial per request
		rp.Transport = tr
		h = rp
	default:
		fmt.Fprintf(os.Stderr, "sluice-loadbench: unknown child role %q\n", cfg.Role)
		return 2
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = http.Serve(l, h) }()
	go func() { _ = http.Serve(sl, statsHandler()) }()
	line, _ := json.Marshal(childAddrs{Addr: l.Addr().String(), Stats: sl.Addr().String()})
	fmt.Printf("%s\n", line)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// backendHandler answers every request at once: a chat completion, or,
// for a streamed one, SSE events after cfg's delays; /metrics is an idle
// vLLM's page.
func backendHandler(cfg childConfig) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		io.WriteString(w, vllmMetrics)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if !bytes.Contains(body, streamMarker) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(completion)))
			io.WriteString(w, completion)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		rc := http.NewResponseController(w)
		time.Sleep(cfg.SSEDelay) // the model's time to first token
		for i := range cfg.SSEEvents {
			if i > 0 {
				time.Sleep(cfg.SSEInterval)
			}
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-loadbench\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
			if rc.Flush() != nil {
				return
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	return mux
}

// statsHandler serves a child's statistics: the Go runtime's and the
// process's metrics, as sluice-gateway's /metrics has them, and pprof.
func statsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}

// process is a process the benchmark started.
type process struct {
	name  string
	cmd   *exec.Cmd
	stdin io.Closer // closing it ends a child of this program
	addr  string    // where it serves
	stats string    // where its statistics are
}

// startChild starts this program again as the child cfg describes.
func startChild(cfg childConfig) (*process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	js, _ := json.Marshal(cfg)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{name: cfg.Role, cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	var addrs childAddrs
	if err == nil {
		err = json.Unmarshal(line, &addrs)
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("starting the %s: %w", cfg.Role, err)
	}
	p.addr, p.stats = "http://"+addrs.Addr, "http://"+addrs.Stats
	return p, nil
}

// gatewayArgs are the flags every sluice-gateway the benchmark starts
// gets besides its own.
var gatewayArgs = []string{"-log-level", "warn", "-drain-delay", "0", "-grace-period", "2s"}

// startGateway starts the sluice-gateway binary bin in front of backend
// with extra flags, and waits until it is ready. pprofAddr, if set, is
// where a binary built with the sluice_pprof tag serves pprof.
func startGateway(name, bin, backend, pprofAddr string, extra ...string) (*process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := append([]string{"-listen", addr, "-backend", backend}, gatewayArgs...)
	cmd := exec.Command(bin, append(args, extra...)...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if pprofAddr != "" {
		cmd.Env = append(os.Environ(), "SLUICE_PPROF_LISTEN="+pprofAddr)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{name: name, cmd: cmd, addr: "http://" + addr, stats: "http://" + addr}
	if err := waitReady(p.addr + "/readyz"); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// waitReady polls url until it answers 200, for at most 20 s.
func waitReady(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var last error = errors.New("no answer")
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("%s: %d %s", url, resp.StatusCode, bytes.TrimSpace(b))
		} else {
			last = err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready within 20 s: %w", last)
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop ends p and waits for it.
func (p *process) stop() {
	if p.stdin != nil {
		p.stdin.Close()
	} else {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}
