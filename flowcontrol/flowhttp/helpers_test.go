package flowhttp_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/internal/pipenet"
	"github.com/sluicegate/sluice/internal/testhttp"
)

// priorityHeader is the request header the tests classify priorities by.
const priorityHeader = "x-llm-d-priority"

// discardLog silences net/http's logging of aborted connections, which
// several tests cause on purpose.
var discardLog = log.New(io.Discard, "", 0)

var itoa = strconv.Itoa

// watchdog bounds a wait that only a bug makes long; it detects hangs, it
// does not time anything.
const watchdog = 10 * time.Second

// countingGate is a MaxInFlight gate that counts its grants and releases and
// reports each release on a channel, so a test can wait for a release
// instead of polling for it.
type countingGate struct {
	limit    int
	inFlight int // guarded by the controller's lock

	acquired atomic.Int64
	released atomic.Int64
	releases chan int // the band of each release; buffered, never blocks the controller
}

func newCountingGate(limit int) *countingGate {
	return &countingGate{limit: limit, releases: make(chan int, 1024)}
}

func (g *countingGate) TryAcquire(int) bool {
	if g.inFlight >= g.limit {
		return false
	}
	g.inFlight++
	g.acquired.Add(1)
	return true
}

func (g *countingGate) Release(priority int) {
	g.inFlight--
	g.released.Add(1)
	select {
	case g.releases <- priority:
	default:
	}
}

// awaitRelease waits for the next release and returns its band.
func (g *countingGate) awaitRelease(t testing.TB) int {
	t.Helper()
	return within(t, g.releases, "no admission was released")
}

// within returns the next value of ch, or fails the test with failure when
// none arrives within the watchdog.
func within[T any](t testing.TB, ch <-chan T, failure string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(watchdog):
		t.Fatal(failure)
	}
	var none T // not reached: Fatal ends the test's goroutine
	return none
}

// noRelease fails if a release has been reported and not yet consumed.
func (g *countingGate) noRelease(t testing.TB, when string) {
	t.Helper()
	select {
	case p := <-g.releases:
		t.Fatalf("%s: admission of band %d already released", when, p)
	default:
	}
}

// band returns a band configuration with a bounded request capacity.
func band(priority int, requestCapacity int64) flowcontrol.BandConfig {
	return flowcontrol.BandConfig{Priority: priority, RequestCapacity: capacity.Bounded(requestCapacity)}
}

// newController returns a controller for cfg that is closed when the test
// ends.
func newController(t testing.TB, cfg flowcontrol.Config) *flowcontrol.FlowController {
	t.Helper()
	fc, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatalf("flowcontrol.New: %v", err)
	}
	t.Cleanup(fc.Close)
	return fc
}

// newHandler wraps next in a flowhttp Handler for fc that reads priorities
// from priorityHeader.
func newHandler(t testing.TB, fc *flowcontrol.FlowController, next http.Handler) *flowhttp.Handler {
	t.Helper()
	return mustHandler(t, flowhttp.Config{
		Controller: fc,
		Headers:    flowhttp.HeaderClassifier{PriorityHeader: priorityHeader},
	}, next)
}

// mustHandler returns flowhttp.New(cfg, next), or fails the test at once.
func mustHandler(t testing.TB, cfg flowhttp.Config, next http.Handler) *flowhttp.Handler {
	t.Helper()
	h, err := flowhttp.New(cfg, next)
	if err != nil {
		t.Fatalf("flowhttp.New: %v", err)
	}
	return h
}

// proxyTo returns a reverse proxy to the server at rawURL that uses tr.
func proxyTo(t testing.TB, rawURL string, tr http.RoundTripper) *httputil.ReverseProxy {
	t.Helper()
	target, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: tr,
		ErrorLog:  discardLog,
	}
}

// loopbackGateway starts a backend serving backend and, in front of it, a
// gateway: a flowhttp Handler for fc around a reverse proxy to the backend.
// Both listen on loopback and close when the test ends. It returns the
// gateway's URL.
func loopbackGateway(t testing.TB, fc *flowcontrol.FlowController, backend http.Handler) string {
	t.Helper()
	be := httptest.NewServer(backend)
	t.Cleanup(be.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return loopbackServer(t, newHandler(t, fc, proxyTo(t, be.URL, tr)))
}

// loopbackServer serves h on loopback until the test ends and returns its
// URL.
func loopbackServer(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = discardLog
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// send sends a request with the given priority and extra headers (name,
// value pairs) to url and returns the response with its body read.
func send(t testing.TB, client *http.Client, url string, priority int, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(priorityHeader, itoa(priority))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("priority %d: %v", priority, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("priority %d: reading body: %v", priority, err)
	}
	return resp, string(body)
}

// errorJSON is the rejection body the Handler writes: the OpenAI error
// object, as OpenAI SDKs decode it.
type errorJSON testhttp.OpenAIError

// decodeError decodes a rejection body strictly: exactly the four fields
// of the OpenAI error object, all present, param null.
func decodeError(t testing.TB, body string) errorJSON {
	t.Helper()
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil || len(raw) != 1 {
		t.Fatalf("rejection body %q is not {\"error\":{...}}: %v", body, err)
	}
	fields := make([]string, 0, 4)
	for k := range raw["error"] {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	if want := []string{"code", "message", "param", "type"}; !slices.Equal(fields, want) {
		t.Fatalf("rejection body %q has error fields %q, want %q", body, fields, want)
	}
	var e errorJSON
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("rejection body %q is not the JSON error: %v", body, err)
	}
	if e.Error.Param != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("rejection body %q: want a message, a type and a null param", body)
	}
	return e
}

// wantType is the OpenAI error type of each status the Handler answers
// with.
var wantType = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusRequestEntityTooLarge: "invalid_request_error",
	http.StatusTooManyRequests:       "rate_limit_exceeded",
	http.StatusServiceUnavailable:    "service_unavailable",
}

// code returns the error body's code, or "" when it is null.
func (e errorJSON) code() string {
	if e.Error.Code == nil {
		return ""
	}
	return *e.Error.Code
}

// routerHeaders returns every value the client received for the
// router-owned headers, keyed by lower-case name.
func routerHeaders(h http.Header) map[string][]string {
	got := map[string][]string{}
	for _, name := range []string{headroom.HeaderName, headroom.ProvisionalHeaderName, flowhttp.QueueDurationHeader} {
		if vs := h.Values(name); len(vs) > 0 {
			got[name] = vs
		}
	}
	return got
}

// readLine reads one line from r, failing the test after the watchdog.
func readLine(t testing.TB, r *bufio.Reader) string {
	t.Helper()
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := r.ReadString('\n')
		ch <- result{line, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Fatalf("reading a line: %v (got %q)", res.err, res.line)
		}
		return res.line
	case <-time.After(watchdog):
		t.Fatal("no line arrived: the response was not flushed")
		return ""
	}
}

// memServer is an http.Server on an in-memory pipenet.Listener and a
// client for it.
type memServer struct {
	srv    *http.Server
	tr     *http.Transport
	Client *http.Client
}

// startMem serves h on a new in-memory listener. Call Close before the
// bubble ends.
func startMem(h http.Handler) *memServer {
	l := pipenet.Listen()
	srv := &http.Server{Handler: h, ErrorLog: discardLog}
	go srv.Serve(l)
	tr := &http.Transport{DialContext: l.Dial}
	return &memServer{srv: srv, tr: tr, Client: &http.Client{Transport: tr}}
}

// Close closes the server, its connections and the client's idle ones.
func (m *memServer) Close() {
	m.srv.Close()
	m.tr.CloseIdleConnections()
}
