package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// chatCompletion is what the tests read of a completion.
type chatCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
}

func TestHealthzAndReadyz(t *testing.T) {
	client := newClient(t)

	t.Run("no backend", func(t *testing.T) {
		g := startGateway(t, testOptions())
		if code, body := get(t, client, g.url+"/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("/healthz: %d %q, want 200 ok", code, body)
		}
		code, body := get(t, client, g.url+"/readyz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "no backend") {
			t.Errorf("/readyz: %d %q, want 503 naming the missing backend", code, body)
		}
	})

	t.Run("backend never scraped", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		deadURL, _ := url.Parse(dead.URL)
		dead.Close()
		opts := testOptions()
		opts.backends = []*url.URL{deadURL}
		g := startGateway(t, opts)
		code, body := get(t, client, g.url+"/readyz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "fails closed") {
			t.Errorf("/readyz: %d %q, want 503: the saturation gate fails closed", code, body)
		}
	})

	t.Run("metrics go stale", func(t *testing.T) {
		urls, servers := modelServers(t, 1, modelserver.Config{})
		opts := testOptions()
		opts.backends = urls
		g := startGateway(t, opts)
		waitFor(t, "/readyz to answer 200 once the backend is scraped", func() bool {
			code, _ := get(t, client, g.url+"/readyz")
			return code == http.StatusOK
		})
		servers[0].SetDown(true) // /metrics answers 503 from now on
		waitFor(t, "/readyz to answer 503 once the backend's metrics are stale", func() bool {
			code, body := get(t, client, g.url+"/readyz")
			return code == http.StatusServiceUnavailable && strings.Contains(body, "fresh metrics")
		})
		_, page := get(t, client, g.url+"/metrics")
		if v, _ := metricValue(page, `llm_d_epp_flow_control_stale_endpoints{detector="utilization-detector"}`); v != "1" {
			t.Errorf("stale endpoints = %q, want 1", v)
		}
		servers[0].SetDown(false)
		waitFor(t, "/readyz to answer 200 again", func() bool {
			code, _ := get(t, client, g.url+"/readyz")
			return code == http.StatusOK
		})
		if !strings.Contains(g.logs.String(), "scrape failed") {
			t.Errorf("the failed scrapes were not logged:\n%s", g.logs.String())
		}
		_, page = get(t, client, g.url+"/metrics")
		if v, ok := metricValue(page, `llm_d_epp_datalayer_poll_errors_total{source_type="metrics-data-source"}`); !ok || v == "0" {
			t.Errorf("poll errors = %q (present %t), want at least 1", v, ok)
		}
	})
}

func TestProxiesChatCompletionsWithHeadroom(t *testing.T) {
	urls, _ := modelServers(t, 2, modelserver.Config{Speed: 10})
	opts := testOptions()
	opts.backends = urls
	g := startGateway(t, opts) // the default saturation gate, fed by scraping
	client := newClient(t)
	waitFor(t, "the gateway to be ready", func() bool {
		code, _ := get(t, client, g.url+"/readyz")
		return code == http.StatusOK
	})

	seen := map[string]bool{}
	for i := range 4 {
		resp, err := client.Post(g.url+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"sim","messages":[{"role":"user","content":"hello there"}],"max_tokens":5}`))
		if err != nil {
			t.Fatal(err)
		}
		var cc chatCompletion
		err = json.NewDecoder(resp.Body).Decode(&cc)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d, %v", i, resp.StatusCode, err)
		}
		// One band of 5000 places with nothing waiting: all of it is room.
		if got := resp.Header.Get("x-llm-d-flow-band-headroom-requests"); got != "5000" {
			t.Errorf("request %d: headroom %q, want 5000", i, got)
		}
		if got := resp.Header.Get("x-llm-d-flow-queue-duration-ms"); got == "" {
			t.Errorf("request %d: no queue duration header", i)
		}
		if cc.Object != "chat.completion" || len(cc.Choices) != 1 || cc.Choices[0].Message.Content == "" {
			t.Errorf("request %d: completion %+v", i, cc)
		}
		seen[strings.Join(strings.Split(cc.ID, "-")[:3], "-")] = true
	}
	// Sequential requests find both backends idle: the tie goes to each
	// in turn.
	if !seen["chatcmpl-backend-0"] || !seen["chatcmpl-backend-1"] {
		t.Errorf("completions came from %v, want both backends", seen)
	}

	resp, err := client.Post(g.url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"sim","messages":[{"role":"user","content":"hello there"}],"max_tokens":6,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got := resp.Header.Get("x-llm-d-flow-band-headroom-requests"); got != "5000" {
		t.Errorf("stream: headroom %q, want 5000", got)
	}
	var text strings.Builder
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var chunk chatCompletion
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if len(chunk.Choices) > 0 {
			text.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	if !done || len(strings.Fields(text.String())) != 6 {
		t.Errorf("stream: [DONE] %t, text %q; want six tokens, then [DONE]", done, text.String())
	}
}

func TestStreamFlushesEachEvent(t *testing.T) {
	hb := newHoldBackend(t)
	opts := testOptions()
	opts.backends = []*url.URL{hb.url}
	opts.maxInFlight = intp(4)
	g := startGateway(t, opts)
	client := newClient(t)
	resp, err := client.Post(g.url+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The backend has written one event and waits: it must reach the
	// client now, not when the response ends.
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	if err != nil || line != "data: {\"first\":true}\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	<-hb.arrived
	hb.release <- struct{}{}
	rest, err := io.ReadAll(r)
	if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

func TestBackendCannotSetRouterHeaders(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["x-llm-d-flow-band-headroom-requests"] = []string{"999"} // not canonical: still stripped
		h.Set("X-Llm-D-Flow-Band-Headroom", "998")
		h.Set("X-Llm-D-Flow-Queue-Duration-Ms", "12345")
		h.Set("X-Llm-D-Request-Dropped-Reason", "rejected-saturated")
		io.WriteString(w, `{"object":"chat.completion"}`)
	}))
	t.Cleanup(backend.Close)
	u, _ := url.Parse(backend.URL)
	path := writeConfig(t, "", `
controller:
  bands:
    - priority: 0
      maxRequests: 40
`)
	opts := testOptions()
	opts.configPath = path
	opts.backends = []*url.URL{u}
	opts.maxInFlight = intp(4)
	g := startGateway(t, opts)
	res := <-send(newClient(t), g.url, "a")
	if res.err != nil || res.status != http.StatusOK {
		t.Fatalf("%d, %v", res.status, res.err)
	}
	if got := res.header.Values("X-Llm-D-Flow-Band-Headroom-Requests"); len(got) != 1 || got[0] != "40" {
		t.Errorf("headroom %q, want the gateway's one value 40", got)
	}
	for _, name := range []string{"X-Llm-D-Flow-Band-Headroom", "X-Llm-D-Request-Dropped-Reason"} {
		if v, ok := res.header[name]; ok {
			t.Errorf("the backend's %s %q reached the client", name, v)
		}
	}
	if got := res.header.Get("X-Llm-D-Flow-Queue-Duration-Ms"); got == "12345" || got == "" {
		t.Errorf("queue duration %q, want the gateway's", got)
	}
}

// saturatingConfig is a band of one waiting place in front of one request
// in flight.
const saturatingConfig = `
gateway:
  gracePeriod: 10s
controller:
  bands:
    - priority: 0
      maxRequests: 1
gate:
  maxInFlight: 1
`

// saturatingOptions returns a held backend and the options of a gateway
// in front of it alone, configured with saturatingConfig.
func saturatingOptions(t *testing.T) (*holdBackend, options) {
	t.Helper()
	hb := newHoldBackend(t)
	opts := testOptions()
	opts.configPath = writeConfig(t, "", saturatingConfig)
	opts.backends = []*url.URL{hb.url}
	return hb, opts
}

// startSaturated starts a gateway of saturatingConfig in front of a held
// backend, and returns the backend, the gateway and a client of it.
func startSaturated(t *testing.T) (*holdBackend, *testGateway, *http.Client) {
	t.Helper()
	hb, opts := saturatingOptions(t)
	return hb, startGateway(t, opts), newClient(t)
}

func TestSaturatedBandAnswers429(t *testing.T) {
	hb, g, client := startSaturated(t)

	a, b := runningAndQueued(t, g, client, hb)
	c := <-send(client, g.url, "c")
	if c.err != nil || c.status != http.StatusTooManyRequests {
		t.Fatalf("c: %d, %v; want 429", c.status, c.err)
	}
	if got := c.header.Get("x-llm-d-request-dropped-reason"); got != "rejected-saturated" {
		t.Errorf("c: dropped reason %q, want rejected-saturated", got)
	}
	if msg, typ, code := openAIError(t, c.body); !strings.Contains(msg, "rejected-saturated") || typ != "rate_limit_exceeded" || code != "rejected-saturated" {
		t.Errorf("c: error message %q, type %q, code %q", msg, typ, code)
	}
	if c.header.Get("x-llm-d-flow-band-headroom-requests") != "" {
		t.Error("c: a refused request carries headroom")
	}

	hb.release <- struct{}{}
	if r := <-a; r.err != nil || r.status != http.StatusOK || r.header.Get("x-llm-d-flow-band-headroom-requests") == "" {
		t.Errorf("a: %d %v, headroom %q", r.status, r.err, r.header.Get("x-llm-d-flow-band-headroom-requests"))
	}
	if id := <-hb.arrived; id != "b" {
		t.Fatalf("arrived %q, want b", id)
	}
	hb.release <- struct{}{}
	if r := <-b; r.err != nil || r.status != http.StatusOK {
		t.Errorf("b: %d %v", r.status, r.err)
	}
	_, page := get(t, client, g.url+"/metrics")
	for series, want := range map[string]string{
		`llm_d_epp_flow_control_requests_total{outcome="Dispatched",priority="0"}`:       "2",
		`llm_d_epp_flow_control_requests_total{outcome="RejectedCapacity",priority="0"}`: "1",
	} {
		if got, _ := metricValue(page, series); got != want {
			t.Errorf("%s = %q, want %s", series, got, want)
		}
	}
}

func TestShutdownRejectsQueuedAndFinishesAdmitted(t *testing.T) {
	hb, g, client := startSaturated(t)

	a, b := runningAndQueued(t, g, client, hb)
	g.stop() // what SIGTERM does

	r := <-b
	if r.err != nil || r.status != http.StatusServiceUnavailable || r.header.Get("x-llm-d-request-dropped-reason") != "rejected-shutting-down" {
		t.Fatalf("queued b: %d %v, dropped reason %q; want 503 rejected-shutting-down",
			r.status, r.err, r.header.Get("x-llm-d-request-dropped-reason"))
	}
	// The listener is closed; the handler answers what a probe would.
	rec := httptest.NewRecorder()
	g.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "shutting down") {
		t.Errorf("/readyz after shutdown began: %d %q", rec.Code, rec.Body.String())
	}
	select {
	case err := <-g.done:
		t.Fatalf("serve returned (%v) with a request in flight", err)
	default:
	}
	hb.release <- struct{}{}
	if r := <-a; r.err != nil || r.status != http.StatusOK || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Fatalf("admitted a: %d %v %q; want its whole answer", r.status, r.err, r.body)
	}
	if err := <-g.done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	g.done <- nil // for the cleanup
}

func TestGracePeriodEndsRequestsStillRunning(t *testing.T) {
	hb := newHoldBackend(t)
	opts := testOptions()
	opts.backends = []*url.URL{hb.url}
	opts.maxInFlight = intp(1)
	opts.gracePeriod = new(time.Duration) // no grace at all
	g := startGateway(t, opts)
	a := send(newClient(t), g.url, "a")
	<-hb.arrived
	g.stop()
	if err := <-g.done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	g.done <- nil
	// The response had begun; its connection was closed before the end.
	if r := <-a; r.err == nil && strings.HasSuffix(r.body, "[DONE]\n\n") {
		t.Fatalf("a finished (%d %q) after a grace period of 0", r.status, r.body)
	}
	if !strings.Contains(g.logs.String(), "grace period over") {
		t.Errorf("log lacks the end of the grace period:\n%s", g.logs.String())
	}
}

func TestMetricsExposeLLMDNames(t *testing.T) {
	urls, _ := modelServers(t, 1, modelserver.Config{Speed: 10})
	opts := testOptions()
	opts.backends = urls
	opts.pool = "pool-a"
	g := startGateway(t, opts)
	client := newClient(t)
	waitFor(t, "ready", func() bool { code, _ := get(t, client, g.url+"/readyz"); return code == http.StatusOK })
	if r := <-send(client, g.url, "a"); r.status != http.StatusOK {
		t.Fatalf("%d %v", r.status, r.err)
	}
	code, page := get(t, client, g.url+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, series := range []string{
		`llm_d_epp_flow_control_requests_total{inference_pool="pool-a",outcome="Dispatched",priority="0"}`,
		// The body's model labels the request (Sluice rewrites none).
		`llm_d_epp_flow_control_request_queue_duration_seconds_count{fairness_id="default-flow",inference_pool="pool-a",model_name="sim",outcome="Dispatched",priority="0",target_model_name="sim"}`,
		`llm_d_epp_flow_control_request_enqueue_duration_seconds_count{fairness_id="default-flow",inference_pool="pool-a",outcome="Dispatched",priority="0"}`,
		`llm_d_epp_flow_control_capacity_utilization_requests{inference_pool="pool-a",priority="0"}`,
		`llm_d_epp_flow_control_pool_saturation{inference_pool="pool-a",stage="effective"}`,
		`llm_d_epp_flow_control_requests_in_flight{inference_pool="pool-a"}`,
		`sluice_gateway_backend_requests_in_flight{backend="` + urls[0].String() + `"}`,
		`sluice_gateway_config_last_reload_successful`,
	} {
		if _, ok := metricValue(page, series); !ok {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	// The request started at once: its flow never waited, so it has no
	// queue_size series (which carried model_name="" before issue 31).
	if strings.Contains(page, `llm_d_epp_flow_control_queue_size{fairness_id="default-flow"`) {
		t.Errorf("/metrics has a queue_size series for a flow that never queued:\n%s", page)
	}
}

// With no backend at all the pool is empty, as with every backend down:
// a request ends rejected-no-endpoints after the no-endpoints TTL (a
// reload that adds a backend meanwhile would serve it).
func TestNoBackendAnswers503(t *testing.T) {
	opts := testOptions()
	opts.maxInFlight = intp(1)
	opts.configPath = writeConfig(t, "", "controller:\n  noEndpointsTTL: "+testNoEndpointsTTL.String()+"\n")
	g := startGateway(t, opts)
	r := <-send(newClient(t), g.url, "a")
	if r.status != http.StatusServiceUnavailable || r.header.Get(flowcontrol.DroppedReasonHeader) != "rejected-no-endpoints" {
		t.Fatalf("%d %v %s, want 503 rejected-no-endpoints", r.status, r.err, r.header.Get(flowcontrol.DroppedReasonHeader))
	}
	if msg, typ, _ := openAIError(t, r.body); !strings.Contains(msg, "no endpoints") || typ != "service_unavailable" {
		t.Errorf("message %q, type %q", msg, typ)
	}
}

func TestCostIsEstimatedTokens(t *testing.T) {
	for body, want := range map[string]int64{
		`{"max_tokens":100}`:                            5 + 100,
		`{"max_tokens":100,"max_completion_tokens":30}`: 12 + 30,
		`{"messages":[{"role":"user","content":"hi"}]}`: 12,
		`not json`:                           2,
		``:                                   1,
		`{"max_tokens":-5}`:                  5,
		`{"max_tokens":9223372036854775807}`: flowhttp.DefaultMaxTokens, // clamped, not MaxInt64
		`{"max_tokens":1e300}`:               flowhttp.DefaultMaxTokens,
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		class, err := costClassifier{}.classify(r)
		if err != nil || class.Cost != want {
			t.Errorf("cost of %s = %d (%v), want %d", body, class.Cost, err, want)
		}
	}

	// A queued request's cost is what the band counts.
	hb, g, client := startSaturated(t)
	a, b := runningAndQueued(t, g, client, hb)
	want := int64(len(chatBody)+3)/4 + 4 // the body's bytes ÷ 4 and its max_tokens
	if s, _ := g.fc.CapacitySnapshot(0); s.QueuedCost != want {
		t.Errorf("queued cost %d, want %d", s.QueuedCost, want)
	}
	hb.release <- struct{}{}
	<-a
	<-hb.arrived
	hb.release <- struct{}{}
	<-b
}

// A client's "max_tokens": 9223372036854775807 costs -max-tokens at the
// gateway, never MaxInt64 (issue 21, defects 2 and 3): the queued cost is
// the clamp.
func TestHugeMaxTokensCostsTheClamp(t *testing.T) {
	hb, opts := saturatingOptions(t)
	opts.maxTokens = 1000
	g := startGateway(t, opts)
	client := newClient(t)
	huge := `{"model":"sim","messages":[{"role":"user","content":"Hello"}],"max_tokens":9223372036854775807}`
	a := send(client, g.url, "a")
	<-hb.arrived
	b := sendBody(client, g.url, "b", huge)
	waitFor(t, "a queued request", func() bool { s, _ := g.fc.CapacitySnapshot(0); return s.QueuedRequests == 1 })
	if s, _ := g.fc.CapacitySnapshot(0); s.QueuedCost != 1000 {
		t.Errorf("queued cost %d, want the clamp 1000", s.QueuedCost)
	}
	hb.release <- struct{}{}
	<-a
	<-hb.arrived
	hb.release <- struct{}{}
	if r := <-b; r.status != http.StatusOK {
		t.Errorf("the clamped request: %d %v", r.status, r.err)
	}
}

func TestUnreadBodiesReachTheBackend(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Write(body)
	}))
	t.Cleanup(backend.Close)
	u, _ := url.Parse(backend.URL)
	opts := testOptions()
	opts.backends = []*url.URL{u}
	opts.maxInFlight = intp(1)
	opts.maxBodyBytes = -1 // never read before queueing, so no cost estimate either
	g := startGateway(t, opts)
	r := <-send(newClient(t), g.url, "a")
	if r.err != nil || r.status != http.StatusOK || r.body != chatBody {
		t.Errorf("%d %v: the backend read %q, want the whole body", r.status, r.err, r.body)
	}
}
