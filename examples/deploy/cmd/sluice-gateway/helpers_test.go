package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/internal/testhttp"
)

// waitLimit bounds every wait for a condition in these tests.
const waitLimit = 20 * time.Second

// waitFor polls cond until it holds, and fails the test after waitLimit.
// It waits for a state (a request queued, a reload counted), never for a
// duration to pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", waitLimit, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use: a log's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testGateway is a gateway served in-process on a loopback port.
type testGateway struct {
	*gateway
	url  string
	logs *syncBuffer
	stop context.CancelFunc
	done chan error
}

// startGateway builds a gateway from opts and serves it on 127.0.0.1:0
// until the test ends (or stop is called).
func startGateway(t testing.TB, opts options) *testGateway {
	t.Helper()
	return startGatewayPrepared(t, opts, nil)
}

// startGatewayPrepared is startGateway, calling prepare (if set) on the
// gateway before it serves.
func startGatewayPrepared(t testing.TB, opts options, prepare func(*gateway)) *testGateway {
	t.Helper()
	logs := &syncBuffer{}
	g, err := newGateway(opts, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(g)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.fc.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tg := &testGateway{gateway: g, url: "http://" + l.Addr().String(), logs: logs, stop: cancel, done: make(chan error, 1)}
	go func() { tg.done <- g.serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-tg.done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	return tg
}

// testOptions are the options of a gateway with the flags' defaults, but
// a grace period that bounds a test's shutdown.
// testOptions are the options of an in-process gateway: shutdown neither
// drains (the tests of the drain delay set it) nor waits long.
func testOptions() options {
	grace := 10 * time.Second
	var drain time.Duration
	return options{maxBodyBytes: 4 << 20, gracePeriod: &grace, drainDelay: &drain, inference: config.DefaultInferenceRoutes()}
}

func intp(n int) *int { return &n }

// newClient returns an HTTP client whose idle connections are closed when
// the test ends.
func newClient(t testing.TB) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitLimit}
}

// modelServers starts n simulated model servers named backend-0, ...
// on loopback and returns their base URLs.
func modelServers(t testing.TB, n int, cfg modelserver.Config) ([]*url.URL, []*modelserver.Server) {
	t.Helper()
	var urls []*url.URL
	var servers []*modelserver.Server
	for i := range n {
		c := cfg
		c.Name = fmt.Sprintf("backend-%d", i)
		ms, err := modelserver.New(c)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(ms)
		t.Cleanup(srv.Close)
		u, err := url.Parse(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, u)
		servers = append(servers, ms)
	}
	return urls, servers
}

// holdBackend is a backend whose completions wait for the test: each
// request announces its x-test-id on arrived, writes its status and a
// first line, and ends when the test sends on release (or its client goes
// away). Its /metrics page is vLLM's, idle; GET /v1/models and /health
// answer at once, as vLLM's do.
type holdBackend struct {
	url     *url.URL
	arrived chan string
	release chan struct{}
}

func newHoldBackend(t testing.TB) *holdBackend {
	t.Helper()
	hb := &holdBackend{arrived: make(chan string, 16), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			io.WriteString(w, idleVLLMMetrics)
			return
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, holdModels)
			return
		case "/health":
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "data: {\"first\":true}\n\n")
		http.NewResponseController(w).Flush()
		hb.arrived <- r.Header.Get("X-Test-Id")
		select {
		case <-hb.release:
			io.WriteString(w, "data: {\"last\":true}\n\ndata: [DONE]\n\n")
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hb.release) }) // runs first: frees any handler still held
	hb.url, _ = url.Parse(srv.URL)
	return hb
}

// holdModels is a holdBackend's GET /v1/models.
const holdModels = `{"object":"list","data":[{"id":"sim","object":"model"}]}`

// runningAndQueued sends request a, which hb holds once it arrives, then
// request b, and returns once b waits in band 0 of g, whose gate admits one
// request at a time.
func runningAndQueued(t *testing.T, g *testGateway, client *http.Client, hb *holdBackend) (a, b <-chan result) {
	t.Helper()
	a = send(client, g.url, "a")
	if id := <-hb.arrived; id != "a" {
		t.Fatalf("arrived %q, want a", id)
	}
	b = send(client, g.url, "b")
	waitFor(t, "b to be queued", func() bool {
		s, err := g.fc.CapacitySnapshot(0)
		return err == nil && s.QueuedRequests == 1
	})
	return a, b
}

// idleVLLMMetrics is the metrics page of an idle vLLM server.
const idleVLLMMetrics = `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="sim"} 0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="sim"} 0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="sim"} 0
`

// result is the outcome of one request sent in the background.
type result struct {
	status int
	header http.Header
	body   string
	err    error
}

// chatBody is the body send posts.
const chatBody = `{"model":"sim","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`

// send posts a chat completion with the test id id, and more headers as
// name, value pairs, in the background.
func send(client *http.Client, base, id string, headers ...string) <-chan result {
	return sendBody(client, base, id, chatBody, headers...)
}

// sendBody is send with another body.
func sendBody(client *http.Client, base, id, body string, headers ...string) <-chan result {
	out := make(chan result, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			out <- result{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Test-Id", id)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		var r result
		r.status, r.header, r.body, r.err = testhttp.Do(client, req)
		out <- r
	}()
	return out
}

// get fetches base+path and returns the status and body.
func get(t testing.TB, client *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := client.Get(u)
	body := testhttp.Body(t, resp, err)
	return resp.StatusCode, body
}

// metricValue returns the value of the series line that starts with
// series (name and labels, as exposed) in a /metrics page, and whether it
// is there.
func metricValue(page, series string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// openAIError decodes an OpenAI-shaped error body.
func openAIError(t testing.TB, body string) (message, typ, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Message, e.Error.Type, code
}

// writeConfig writes a configuration file into dir (created if empty)
// and returns its path.
func writeConfig(t testing.TB, path, text string) string {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "gateway.yaml")
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
