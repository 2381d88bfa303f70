package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/examples/deploy/internal/promlint"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/clocktest"
)

// requireTool returns the path of a Prometheus binary. Without it the test
// is skipped, unless SLUICE_REQUIRE_PROMETHEUS is set (as CI sets it,
// having installed Debian's prometheus package): then it fails.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("SLUICE_REQUIRE_PROMETHEUS") != "" {
		t.Fatalf("SLUICE_REQUIRE_PROMETHEUS is set but %s is not on PATH: %v", name, err)
	}
	t.Skipf("%s is not on PATH (apt-get install prometheus; set SLUICE_REQUIRE_PROMETHEUS=1 to fail instead): %v", name, err)
	return ""
}

// everyMetric returns a registry in which m exports a series of every
// family it has.
func everyMetric(t *testing.T) *prometheus.Registry {
	t.Helper()
	m := metrics.New(metrics.Options{InferencePool: "pool-a"})
	clock := clocktest.New(time.Unix(1_000_000, 0))
	c, cfg, _ := testController(t, m, clock)
	m.Watch(c, cfg)
	m.PoolSaturation(func() float64 { return 0.75 })
	m.GateLimit(func() float64 { return 1 })
	m.StaleEndpoints("utilization-detector", func() int { return 0 })
	m.PollError(metrics.SourceMetrics)
	evictOnce(t, m)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	return reg
}

// promtool's linter accepts the exposition of every metric.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := requireTool(t, "promtool")
	reg := everyMetric(t)
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 23, "every family has a series")
	// The exposition exactly as a scrape receives it.
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	text := rec.Body.String()
	for _, mf := range families {
		require.Contains(t, text, "# TYPE "+mf.GetName()+" ", "the page lists every family")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	findings, err := promlint.Check(ctx, promtool, text)
	require.NoError(t, err)
	require.Empty(t, findings, "promtool check metrics")
}

// A real Prometheus server scrapes the registry and answers a PromQL query
// with the counts Observe made.
func TestPrometheusScrape(t *testing.T) {
	bin := requireTool(t, "prometheus")
	m := metrics.New(metrics.Options{InferencePool: "pool-a"})
	for range 3 {
		m.Observe(event("tenant-a", 0, flowcontrol.OutcomeDispatched, 20*time.Millisecond))
	}
	m.Observe(event("tenant-b", 0, flowcontrol.OutcomeRejectedSaturated, 0))
	m.PoolSaturation(func() float64 { return 0.75 })
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m))
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer target.Close()

	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: sluice
    static_configs:
      - targets: ['%s']
`, target.Listener.Addr()), 0o600))
	addr := freeAddr(t)

	ctx, cancel := context.WithTimeout(context.Background(), 28*time.Second)
	defer cancel()
	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, bin,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	require.NoError(t, cmd.Start())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			_ = cmd.Wait() // interrupted: an error by design
		}
	}
	defer stop()

	client := &http.Client{Transport: &http.Transport{}, Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	queries := map[string]float64{
		`llm_d_epp_flow_control_requests_total{outcome="Dispatched",priority="0",inference_pool="pool-a"}`:                                   3,
		`sum(llm_d_epp_flow_control_request_queue_duration_seconds_count)`:                                                                   4,
		`llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-a",model_name="",target_model_name="",le="0.025"}`: 3,
		`llm_d_epp_flow_control_pool_saturation{stage="effective"}`:                                                                          0.75,
	}
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	for q, want := range queries {
		var got float64
		var err error
		for {
			if got, err = query(ctx, client, addr, q); err == nil && got == want {
				break
			}
			select {
			case <-poll.C:
			case <-ctx.Done():
				stop()
				t.Fatalf("query %s: got %v, %v; want %v\nprometheus log:\n%s", q, got, err, want, logs.String())
			}
		}
	}
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// query runs an instant PromQL query that must return one sample, and
// returns its value.
func query(ctx context.Context, client *http.Client, addr, q string) (float64, error) {
	u := "http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("status %q: %s", body.Status, body.Error)
	}
	if n := len(body.Data.Result); n != 1 {
		return 0, fmt.Errorf("%d samples", n)
	}
	s, ok := body.Data.Result[0].Value[1].(string)
	if !ok {
		return 0, fmt.Errorf("value %v is not a string", body.Data.Result[0].Value[1])
	}
	return strconv.ParseFloat(s, 64)
}
