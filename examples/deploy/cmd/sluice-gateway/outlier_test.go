package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countingBackend answers every request with status and counts them.
func countingBackend(t *testing.T, status int) (*url.URL, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(status)
		fmt.Fprintln(w, `{"error":{"message":"boom"}}`)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u, &n
}

// serveN sends n requests through p, one after the other.
func serveN(t *testing.T, p *pool, n int) {
	t.Helper()
	for range n {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader("{}")))
	}
}

// A backend that answers 500 beside a healthy one took half the requests,
// each 500 counted as dispatched, unseen (issue 31, item 8). With outlier
// detection on the pool's injected clock, it is ejected after its fifth
// 500 in a row, the healthy one takes the traffic, it returns after the
// base ejection time, and its next ejection lasts twice as long; each
// answer is counted by backend and status class, and the first 5xx of a
// run is logged at warn.
func TestFailingBackendIsEjected(t *testing.T) {
	bad, badN := countingBackend(t, http.StatusInternalServerError)
	good, goodN := countingBackend(t, http.StatusOK)
	clk := newFakeClock()
	logs := &syncBuffer{}
	p := newPool([]*url.URL{bad, good}, poolConfig{clock: clk,
		log:     slog.New(slog.NewTextHandler(logs, nil)),
		outlier: outlierConfig{consecutive5xx: DefaultConsecutive5xx}})
	for _, b := range p.list() {
		p.reach(b)
	}

	serveN(t, p, 20)
	if badN.Load() != DefaultConsecutive5xx || goodN.Load() != 20-DefaultConsecutive5xx {
		t.Fatalf("the failing backend took %d of 20, the healthy one %d; want %d and %d: ejected after %d 500s in a row",
			badN.Load(), goodN.Load(), DefaultConsecutive5xx, 20-DefaultConsecutive5xx, DefaultConsecutive5xx)
	}
	if got := strings.Count(logs.String(), "backend answered 5xx"); got != 1 {
		t.Errorf("%d warnings of a 5xx, want 1:\n%s", got, logs)
	}
	if !strings.Contains(logs.String(), "backend ejected") || !strings.Contains(logs.String(), bad.String()) {
		t.Errorf("the ejection was not logged:\n%s", logs)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(backendCollector{p})
	want := fmt.Sprintf(`
# HELP sluice_gateway_backend_outlier_ejected 1 while outlier detection keeps a backend out of the pick, else 0.
# TYPE sluice_gateway_backend_outlier_ejected gauge
sluice_gateway_backend_outlier_ejected{backend=%[1]q} 1
sluice_gateway_backend_outlier_ejected{backend=%[2]q} 0
# HELP sluice_gateway_backend_responses_total Responses of a backend by status class (1xx to 5xx); a request the backend failed to answer counts as the 502 the gateway answered.
# TYPE sluice_gateway_backend_responses_total counter
sluice_gateway_backend_responses_total{backend=%[1]q,code_class="1xx"} 0
sluice_gateway_backend_responses_total{backend=%[1]q,code_class="2xx"} 0
sluice_gateway_backend_responses_total{backend=%[1]q,code_class="3xx"} 0
sluice_gateway_backend_responses_total{backend=%[1]q,code_class="4xx"} 0
sluice_gateway_backend_responses_total{backend=%[1]q,code_class="5xx"} 5
sluice_gateway_backend_responses_total{backend=%[2]q,code_class="1xx"} 0
sluice_gateway_backend_responses_total{backend=%[2]q,code_class="2xx"} 15
sluice_gateway_backend_responses_total{backend=%[2]q,code_class="3xx"} 0
sluice_gateway_backend_responses_total{backend=%[2]q,code_class="4xx"} 0
sluice_gateway_backend_responses_total{backend=%[2]q,code_class="5xx"} 0
`, bad.String(), good.String())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"sluice_gateway_backend_responses_total", "sluice_gateway_backend_outlier_ejected"); err != nil {
		t.Error(err)
	}

	// Still out just before the base ejection time; back in at it.
	clk.advance(DefaultBaseEjectionTime - time.Millisecond)
	serveN(t, p, 4)
	if badN.Load() != DefaultConsecutive5xx {
		t.Fatalf("the ejected backend took a request %s into its %s ejection", DefaultBaseEjectionTime-time.Millisecond, DefaultBaseEjectionTime)
	}
	clk.advance(time.Millisecond)
	serveN(t, p, 2*DefaultConsecutive5xx)
	if got := badN.Load() - DefaultConsecutive5xx; got != DefaultConsecutive5xx {
		t.Fatalf("after its ejection the backend took %d of %d requests, want %d (then ejected again)", got, 2*DefaultConsecutive5xx, DefaultConsecutive5xx)
	}
	if !strings.Contains(logs.String(), "backend returns from its ejection") {
		t.Errorf("the return was not logged:\n%s", logs)
	}
	// The second ejection lasts twice the base time.
	clk.advance(2*DefaultBaseEjectionTime - time.Millisecond)
	before := badN.Load()
	serveN(t, p, 4)
	if badN.Load() != before {
		t.Fatal("the second ejection ended before twice the base time")
	}
	clk.advance(time.Millisecond)
	serveN(t, p, 2)
	if badN.Load() != before+1 {
		t.Fatalf("after twice the base time the backend took %d of 2 requests, want 1", badN.Load()-before)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP sluice_gateway_backend_outlier_ejections_total Times outlier detection took a backend out of the pick for answering 5xx in a row.
# TYPE sluice_gateway_backend_outlier_ejections_total counter
sluice_gateway_backend_outlier_ejections_total{backend=%q} 2
sluice_gateway_backend_outlier_ejections_total{backend=%q} 0
`, bad.String(), good.String())), "sluice_gateway_backend_outlier_ejections_total"); err != nil {
		t.Error(err)
	}
}

// Outlier detection ejects at most the max percent of the backends, and
// never the last: with both answering 500, one of two is ejected.
func TestEjectionKeepsABackend(t *testing.T) {
	a, aN := countingBackend(t, http.StatusInternalServerError)
	b, bN := countingBackend(t, http.StatusServiceUnavailable)
	clk := newFakeClock()
	p := newPool([]*url.URL{a, b}, poolConfig{clock: clk, outlier: outlierConfig{consecutive5xx: 2}})
	for _, be := range p.list() {
		p.reach(be)
	}
	serveN(t, p, 40)
	ejected := 0
	for _, be := range p.list() {
		if be.ejectedAt(clk.Now().UnixNano()) {
			ejected++
		}
	}
	if ejected != 1 || aN.Load()+bN.Load() != 40 {
		t.Fatalf("%d of 2 ejected (want 1: 50%%), requests %d + %d", ejected, aN.Load(), bN.Load())
	}
	one := newPool([]*url.URL{a}, poolConfig{clock: clk, outlier: outlierConfig{consecutive5xx: 1, maxEjectionPercent: 100}})
	p.reach(one.list()[0])
	serveN(t, one, 3)
	if one.list()[0].ejectedAt(clk.Now().UnixNano()) {
		t.Fatal("the only backend was ejected")
	}
}

// Through the binary's flags and defaults: a backend answering 500 beside
// a healthy one takes 5 of 20 requests, and /metrics counts both by status
// class.
func TestGatewayEjectsFailingBackend(t *testing.T) {
	bad, badN := countingBackend(t, http.StatusInternalServerError)
	good, goodN := countingBackend(t, http.StatusOK)
	opts, err := parseFlags([]string{"-backend", bad.String(), "-backend", good.String(), "-max-inflight", "4"}, &strings.Builder{}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	test := testOptions()
	opts.gracePeriod, opts.drainDelay = test.gracePeriod, test.drainDelay
	g := startGateway(t, opts)
	client := newClient(t)
	waitReady(t, client, g, "both backends reached")
	for i := range 20 {
		if r := <-send(client, g.url, fmt.Sprint(i)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if badN.Load() > DefaultConsecutive5xx || goodN.Load() < 20-DefaultConsecutive5xx {
		t.Fatalf("the failing backend took %d of 20 requests, the healthy one %d", badN.Load(), goodN.Load())
	}
	_, page := get(t, client, g.url+"/metrics")
	for series, want := range map[string]string{
		`sluice_gateway_backend_responses_total{backend="` + bad.String() + `",code_class="5xx"}`:  fmt.Sprint(badN.Load()),
		`sluice_gateway_backend_responses_total{backend="` + good.String() + `",code_class="2xx"}`: fmt.Sprint(goodN.Load()),
		`sluice_gateway_backend_outlier_ejected{backend="` + bad.String() + `"}`:                   "1",
	} {
		if got, ok := metricValue(page, series); !ok || got != want {
			t.Errorf("%s = %q (present %v), want %s", series, got, ok, want)
		}
	}
	if !strings.Contains(g.logs.String(), "backend answered 5xx") {
		t.Errorf("no warning of the 5xx:\n%s", g.logs)
	}
}
