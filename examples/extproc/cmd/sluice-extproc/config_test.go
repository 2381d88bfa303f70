package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/testhttp"
)

// deployTestdata is examples/deploy/config's testdata, seen from here.
const deployTestdata = "../../../deploy/config/testdata"

var metricsAddr = regexp.MustCompile(`msg="serving metrics" addr=(\S+)`)

// child is the program running in its own process.
type child struct {
	cmd     *exec.Cmd
	lines   <-chan string
	exited  <-chan error
	log     []string
	grpc    string // the ext_proc address
	metrics string // the metrics address
}

// startChild runs the program with args and waits until it logs its
// listening addresses: the ext_proc one, and the metrics one unless args
// turn the metrics server off.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), beMain+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	c := &child{cmd: cmd, lines: lines, exited: exited}
	metricsOff := slices.ContainsFunc(args, func(a string) bool { return a == "off" || a == "-metrics-listen=off" })
	for c.grpc == "" || (c.metrics == "" && !metricsOff) {
		line, ok := <-lines
		if !ok {
			t.Fatalf("the program exited before listening:\n%s", strings.Join(c.log, "\n"))
		}
		c.log = append(c.log, line)
		if m := listeningAddr.FindStringSubmatch(line); m != nil {
			c.grpc = m[1]
		}
		if m := metricsAddr.FindStringSubmatch(line); m != nil {
			c.metrics = m[1]
		}
	}
	return c
}

// stop sends SIGTERM and requires a clean exit.
func (c *child) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for line := range c.lines {
		c.log = append(c.log, line)
	}
	if err := <-c.exited; err != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0\n%s", err, strings.Join(c.log, "\n"))
	}
}

// oneStream sends one request through the program's ext_proc server, the
// way Envoy would, and returns the headroom stamped on its response.
func (c *child) oneStream(t *testing.T) string {
	t.Helper()
	conn, err := grpc.NewClient(c.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := extprocv3.NewExternalProcessorClient(conn).Process(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sendRequestHeaders(t, s)
	expectContinue(t, s)
	headroom := responseHeaders(t, s)
	closeStream(t, s)
	return headroom
}

// get fetches a path of the metrics server and returns its status and body.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	body := testhttp.Body(t, resp, err)
	return resp.StatusCode, body
}

// TestBinaryWithLLMDConfigServesMetrics runs the program on llm-d-router's
// EndpointPickerConfig as deploy's config tests read it: the file's bands
// shape the headroom, and one request through ext_proc shows on /metrics
// under llm-d-router's names.
func TestBinaryWithLLMDConfigServesMetrics(t *testing.T) {
	// The file's concurrency-detector budgets are per endpoint: -backend
	// gives it one to count (a concurrency gate reads nothing from it).
	c := startChild(t, "-config", filepath.Join(deployTestdata, "llmd.yaml"), "-backend", "http://127.0.0.1:1",
		"-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0", "-pool", "pool-a")

	if code, body := get(t, c.metrics, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d %q, want 200", code, body)
	}
	if code, _ := get(t, c.metrics, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200", code)
	}
	_, before := get(t, c.metrics, "/metrics")
	if strings.Contains(before, `outcome="Dispatched"`) {
		t.Fatalf("a dispatch counted before any request:\n%s", before)
	}

	// Priority 0 is not among the file's priorityBands, so llm-d-router's
	// defaultPriorityBand (maxRequests "300") provisions it.
	if got := c.oneStream(t); got != "300" {
		t.Errorf("headroom = %q, want 300: band 0 from flowControl.defaultPriorityBand", got)
	}

	_, page := get(t, c.metrics, "/metrics")
	for _, want := range []string{
		`llm_d_epp_flow_control_requests_total{inference_pool="pool-a",outcome="Dispatched",priority="0"} 1`,
		// Without an x-gateway-model-name header, the model is unknown.
		`llm_d_epp_flow_control_request_queue_duration_seconds_count{fairness_id="default-flow",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="0",target_model_name=""} 1`,
		`llm_d_epp_flow_control_request_enqueue_duration_seconds_count{fairness_id="default-flow",inference_pool="pool-a",outcome="Dispatched",priority="0"} 1`,
		// The file's global maxRequests "2k" is bounded, so its utilisation is exported.
		`llm_d_epp_flow_control_global_capacity_utilization_requests{inference_pool="pool-a"} 0`,
		// The file's priorityBands are watched.
		`llm_d_epp_flow_control_capacity_utilization_requests{inference_pool="pool-a",priority="100"} 0`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The queue gauges are per flow and per model it waited for: the
	// request started at once, so its flow has none (it had one with
	// model_name="" before issue 31).
	if strings.Contains(page, `llm_d_epp_flow_control_queue_size{fairness_id="default-flow"`) {
		t.Error("/metrics has a queue_size series for a flow that never queued")
	}
	// The concurrency gate in tokens mode sets no limit on requests.
	if strings.Contains(page, "\nllm_d_epp_flow_control_gate_limit{") {
		t.Error("/metrics has a gate limit; a tokens-mode gate sets none on requests")
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", page)
	}
	c.stop(t)
	if log := strings.Join(c.log, "\n"); !strings.Contains(log, "every request costs 1 token") {
		t.Errorf("no warning that tokens mode counts requests:\n%s", log)
	}
}

// TestBadConfigExits2 runs the program on files it must refuse: each
// exits 2 before listening, with a message naming the file and what is
// wrong.
func TestBadConfigExits2(t *testing.T) {
	misspelt := filepath.Join(deployTestdata, "bad-misspelt-key.yaml")
	utilization := filepath.Join(deployTestdata, "llmd-utilization.yaml")
	llmd := filepath.Join(deployTestdata, "llmd.yaml")
	missing := filepath.Join(t.TempDir(), "absent.yaml")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"misspelt key", []string{"-config", misspelt},
			[]string{misspelt + ":14:", "flowControl.priorityBands[1].maxRequest", `did you mean "maxRequests"`}},
		{"missing file", []string{"-config", missing}, []string{missing}},
		{"saturation gate without backends", []string{"-config", utilization},
			[]string{utilization + ": ", "saturation gate", "-backend"}},
		{"per-endpoint concurrency without backends", []string{"-config", llmd},
			[]string{llmd + ": ", "per endpoint", "-backend"}},
		{"bad backend", []string{"-backend", "127.0.0.1:8000"}, []string{"http or https URL"}},
		{"bad metrics address", []string{"-metrics-listen", "9090"}, []string{"-metrics-listen"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"-listen", "127.0.0.1:0", "-metrics-listen", "off"}, tc.args...), &stdout, &stderr); code != 2 {
				t.Errorf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}

// TestFlagsWinOverFile: a file sets everything a flag can; the flags that
// are given replace what the file says, the others leave it.
func TestFlagsWinOverFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	const file = `
gateway:
  backends: [http://127.0.0.1:8001]
  gracePeriod: 5s
controller:
  maxRequests: 40
  defaultTTL: 7s
  fallbackPriority: 0
  bands:
    - priority: 0
      maxRequests: 20
    - priority: 10
      maxRequests: 10
gate:
  maxInFlight: 8
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) options {
		t.Helper()
		var stderr bytes.Buffer
		o, err := parseFlags(append([]string{"-config", path}, args...), io.Discard, &stderr)
		if err != nil {
			t.Fatalf("parseFlags(%q): %v\n%s", args, err, stderr.String())
		}
		return o
	}

	o := parse()
	if o.gateLimit != 8 || o.gracePeriod != 5*time.Second || o.controller.RequestCapacity != capacity.Bounded(40) ||
		o.controller.DefaultTTL != 7*time.Second || len(o.controller.Bands) != 2 || len(o.backends) != 1 {
		t.Errorf("from the file alone: gate limit %d, shutdown %v, capacity %s, ttl %v, %d bands, backends %v",
			o.gateLimit, o.gracePeriod, o.controller.RequestCapacity, o.controller.DefaultTTL, len(o.controller.Bands), o.backends)
	}

	o = parse("-max-inflight", "2", "-grace-period", "1s", "-capacity", "unbounded", "-default-ttl", "0s",
		"-band", "priority=0,capacity=3", "-backend", "http://127.0.0.1:8002")
	if o.gateLimit != 2 || o.gracePeriod != time.Second || o.controller.RequestCapacity.IsBounded() || o.controller.DefaultTTL != 0 {
		t.Errorf("flags over the file: gate limit %d, shutdown %v, capacity %s, ttl %v",
			o.gateLimit, o.gracePeriod, o.controller.RequestCapacity, o.controller.DefaultTTL)
	}
	if len(o.controller.Bands) != 1 || o.controller.Bands[0].RequestCapacity != capacity.Bounded(3) {
		t.Errorf("-band: bands %+v, want only the flag's", o.controller.Bands)
	}
	if len(o.backends) != 2 || o.backends[0].String() != "http://127.0.0.1:8002" || o.backends[1].String() != "http://127.0.0.1:8001" {
		t.Errorf("backends %v, want the flag's, then the file's", o.backends)
	}

	o = parse("-max-inflight", "0")
	if o.controller.Gate != nil || o.gateLimit != 0 {
		t.Errorf("-max-inflight 0: gate %v, limit %d; want no gate", o.controller.Gate, o.gateLimit)
	}
}

// TestReadyzFollowsSaturationGateAndShutdown: with a saturation gate,
// /readyz is 503 until a backend's metrics arrive, 200 while they are
// fresh, 503 once they are stale, and 503 once shutdown has begun. The
// gate's clock is the bubble's.
func TestReadyzFollowsSaturationGateAndShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stderr bytes.Buffer
		// The file's utilization-detector: metricsStalenessThreshold 500ms.
		opts, err := parseFlags([]string{"-config", filepath.Join(deployTestdata, "llmd-utilization.yaml"),
			"-backend", "http://127.0.0.1:1"}, io.Discard, &stderr)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		sat := opts.gates.Saturation
		if sat == nil {
			t.Fatal("no saturation gate from a utilization-detector file")
		}
		fc, err := flowcontrol.New(opts.controller)
		if err != nil {
			t.Fatal(err)
		}
		defer fc.Close()
		ctx, shutdown := context.WithCancel(context.Background())
		defer shutdown()
		tel, err := newTelemetry(ctx, fc, opts.controller, metrics.New(metrics.Options{}), opts, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		readyz := func() (int, string) {
			rec := httptest.NewRecorder()
			tel.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			return rec.Code, rec.Body.String()
		}

		if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "no endpoint has reported") {
			t.Errorf("before any scrape: %d %q, want 503 naming the missing scrape", code, body)
		}
		// What the scraper delivers for an idle server, read now.
		sat.Update("http://127.0.0.1:1", gate.Metrics{})
		if code, body := readyz(); code != http.StatusOK {
			t.Errorf("with fresh metrics: %d %q, want 200", code, body)
		}
		time.Sleep(600 * time.Millisecond) // the bubble's clock: past the 500ms staleness threshold
		if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "fresh") {
			t.Errorf("with stale metrics: %d %q, want 503 naming staleness", code, body)
		}
		sat.Update("http://127.0.0.1:1", gate.Metrics{})
		shutdown()
		if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
			t.Errorf("after shutdown began: %d %q, want 503 shutting down", code, body)
		}
	})
}

// The adapter judges the file behind the gate it runs, as sluice-gateway
// does (config's File.Check): eviction behind the saturation gate alone
// is a warning at the file's key, gone behind -max-inflight; eviction
// with no band to take victims from is refused at the key.
func TestFileIsJudgedBehindTheAdaptersGate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	evict := write("evict.yaml", "controller:\n  eviction: true\n  bands: [{priority: 10}, {priority: 0}, {priority: -1}]\ngate:\n  saturation: {}\n")
	o, err := parseFlags([]string{"-config", evict, "-backend", "http://127.0.0.1:8002"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(o.warnings, func(w string) bool {
		return strings.Contains(w, "evict.yaml:2:3: controller.eviction: in-flight eviction behind the saturation gate alone")
	}) {
		t.Errorf("warnings %q, want the eviction's at its key", o.warnings)
	}
	if o, err = parseFlags([]string{"-config", evict, "-backend", "http://127.0.0.1:8002", "-max-inflight", "64"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(o.warnings, func(w string) bool { return strings.Contains(w, "controller.eviction") }) {
		t.Errorf("behind -max-inflight 64: warnings %q, want none about eviction", o.warnings)
	}
	// With the hand-off on, the servers' priority scheduler preempts for
	// the higher band: no warning.
	if o, err = parseFlags([]string{"-config", evict, "-backend", "http://127.0.0.1:8002", "-priority-handoff", "-request-body-mode", "BUFFERED"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(o.warnings, func(w string) bool { return strings.Contains(w, "controller.eviction") }) {
		t.Errorf("with -priority-handoff: warnings %q, want none about eviction", o.warnings)
	}

	llmd := write("llmd.yaml", "featureGates: [flowControl]\nflowControl:\n  enableEviction: true\n")
	_, err = parseFlags([]string{"-config", llmd, "-max-inflight", "8"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "llmd.yaml:3:3: flowControl.enableEviction: in-flight eviction over one band (priority 0) never revokes") {
		t.Errorf("eviction over band 0 alone: %v, want it refused at its key", err)
	}
}
