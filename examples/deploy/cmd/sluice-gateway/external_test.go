package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicegate/sluice/examples/deploy/internal/promlint"
	"github.com/sluicegate/sluice/examples/modelserver"
)

// requireTool returns the path of a program the test needs. Without it the
// test is skipped, unless the environment variable require is set (CI sets
// it), and then it fails.
func requireTool(t *testing.T, require, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, require, fmt.Sprintf("%s not found (%v)", name, err))
	}
	return p
}

// missing skips the test for want of what, or fails it when the
// environment variable require is set.
func missing(t *testing.T, require, what string) {
	t.Helper()
	if os.Getenv(require) != "" {
		t.Fatalf("%s, and %s is set", what, require)
	}
	t.Skipf("%s; set %s to make this a failure", what, require)
}

// TestOpenAISDK runs testdata/openai-sdk.mjs, which uses the official
// OpenAI SDK for Node, against the gateway built from source in front of
// simulated model servers.
func TestOpenAISDK(t *testing.T) {
	const require = "SLUICE_REQUIRE_OPENAI"
	node := requireTool(t, require, "node")
	modules := os.Getenv("SLUICE_OPENAI_NODE_MODULES")
	if modules == "" {
		modules, _ = filepath.Abs(filepath.Join("testdata", "node_modules"))
	}
	if !fileExists(filepath.Join(modules, "openai", "package.json")) {
		missing(t, require, fmt.Sprintf("the openai package is not in %s (npm install --prefix DIR openai, then SLUICE_OPENAI_NODE_MODULES=DIR/node_modules)", modules))
	}
	bin := buildGateway(t)
	// Slow decoding, so that the script's long stream holds its slot for
	// as long as the script needs it (it aborts the stream itself).
	urls, _ := modelServers(t, 2, modelserver.Config{DecodeStep: 20 * time.Millisecond})
	path := writeConfig(t, "", saturatingConfig)
	p := startProcess(t, bin, nil, "-config", path, "-listen", "127.0.0.1:0",
		"-backend", urls[0].String(), "-backend", urls[1].String())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	script, _ := filepath.Abs(filepath.Join("testdata", "openai-sdk.mjs"))
	cmd := exec.CommandContext(ctx, node, script, p.url+"/v1")
	cmd.Env = append(os.Environ(), "SLUICE_OPENAI_NODE_MODULES="+modules)
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", filepath.Base(script), out)
	if err != nil {
		t.Fatalf("the script failed: %v", err)
	}
	if n := strings.Count(string(out), "ok   "); n < 12 {
		t.Errorf("%d checks passed, want every one of at least 12", n)
	}

	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Errorf("gateway exit code %d, want 0", code)
	}
}

// TestPrometheusScrapesTheGateway runs Debian's prometheus against the
// gateway and asks it, in PromQL, for the requests by outcome; and checks
// the exposition with promtool.
func TestPrometheusScrapesTheGateway(t *testing.T) {
	const require = "SLUICE_REQUIRE_PROMETHEUS"
	prometheus := requireTool(t, require, "prometheus")
	promtool := requireTool(t, require, "promtool")

	hb, opts := saturatingOptions(t)
	opts.pool = "pool-a"
	g := startGateway(t, opts)
	client := newClient(t)

	// Four dispatched: two one after the other, then one held while a
	// fourth waits and a fifth is refused.
	for range 2 {
		r := send(client, g.url, "ok")
		<-hb.arrived
		hb.release <- struct{}{}
		if r := <-r; r.status != http.StatusOK {
			t.Fatalf("%d %v %q", r.status, r.err, r.body)
		}
	}
	held := send(client, g.url, "held")
	<-hb.arrived
	queued := send(client, g.url, "queued")
	waitFor(t, "a request to be queued", func() bool {
		s, err := g.fc.CapacitySnapshot(0)
		return err == nil && s.QueuedRequests == 1
	})
	if r := <-send(client, g.url, "refused"); r.status != http.StatusTooManyRequests {
		t.Fatalf("refused: %d %v", r.status, r.err)
	}
	hb.release <- struct{}{}
	<-hb.arrived
	hb.release <- struct{}{}
	for _, c := range []<-chan result{held, queued} {
		if r := <-c; r.status != http.StatusOK {
			t.Fatalf("%d %v", r.status, r.err)
		}
	}

	// promtool lints the exposition as a Prometheus user would.
	_, page := get(t, client, g.url+"/metrics")
	if !strings.Contains(page, "llm_d_epp_flow_control_requests_total{") {
		t.Fatalf("/metrics lacks the requests counter:\n%s", page)
	}
	findings, err := promlint.Check(context.Background(), promtool, page)
	if err != nil {
		t.Error(err)
	}
	for _, f := range findings {
		t.Errorf("promtool check metrics: %s", f)
	}

	// A Prometheus server on loopback, scraping the gateway.
	dir := t.TempDir()
	promAddr := freeLoopbackAddr(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 200ms
  scrape_timeout: 150ms
scrape_configs:
  - job_name: sluice-gateway
    static_configs:
      - targets: [%q]
`, strings.TrimPrefix(g.url, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prom := exec.CommandContext(ctx, prometheus,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr,
	)
	logs := &syncBuffer{}
	prom.Stdout, prom.Stderr = logs, logs
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = prom.Process.Signal(syscall.SIGTERM)
		_ = prom.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	}()

	query := `sum by (outcome) (llm_d_epp_flow_control_requests_total{job="sluice-gateway",inference_pool="pool-a"})`
	want := map[string]string{"Dispatched": "4", "RejectedCapacity": "1"}
	var got map[string]string
	waitFor(t, "Prometheus to answer "+query, func() bool {
		got = promQuery(t, "http://"+promAddr, query)
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	if up := promQuery(t, "http://"+promAddr, `up{job="sluice-gateway"}`); up[""] != "1" {
		t.Errorf("up = %v, want 1", up)
	}
}

// freeLoopbackAddr returns a loopback address whose port was free a
// moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// promQuery runs an instant query and returns each series' outcome label
// (or "" without one) and value; nil while the server is not answering.
func promQuery(t *testing.T, base, query string) map[string]string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil // not listening yet
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		return nil
	}
	out := map[string]string{}
	for _, r := range body.Data.Result {
		v, _ := r.Value[1].(string)
		out[r.Metric["outcome"]] = v
	}
	return out
}
