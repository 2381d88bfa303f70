package main

// A backend that dies is down, whatever the gate: requests end 503
// rejected-no-endpoints within the no-endpoints TTL, /readyz says so, and
// no body a client receives names the backend's address. These run the
// gateway on loopback with a short configured TTL; every wait is bounded.

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
)

// testNoEndpointsTTL is the no-endpoints TTL the tests configure: short,
// so that they wait little, and far below the 60 s queue-wait TTL, so
// that a request that ends within it did not wait out its TTL.
const testNoEndpointsTTL = 300 * time.Millisecond

// restartableBackend is a model server that the test stops (its listener
// closed: a dial to it is refused) and starts again on the same address.
// It answers a completion with 200 and /metrics with vLLM's idle page.
type restartableBackend struct {
	t    *testing.T
	addr string
	url  *url.URL
	srv  *http.Server
}

func newRestartableBackend(t *testing.T) *restartableBackend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rb := &restartableBackend{t: t, addr: l.Addr().String()}
	rb.url, _ = url.Parse("http://" + rb.addr)
	rb.serve(l)
	t.Cleanup(rb.stop)
	return rb
}

func (rb *restartableBackend) serve(l net.Listener) {
	rb.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			io.WriteString(w, idleVLLMMetrics)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"message":{"content":"ok"}}]}`)
	})}
	go rb.srv.Serve(l)
}

// stop closes the listener and every connection.
func (rb *restartableBackend) stop() {
	if rb.srv != nil {
		rb.srv.Close()
		rb.srv = nil
	}
}

// start listens on the same address again.
func (rb *restartableBackend) start() {
	rb.t.Helper()
	l, err := net.Listen("tcp", rb.addr)
	if err != nil {
		rb.t.Fatalf("listen again on %s: %v", rb.addr, err)
	}
	rb.serve(l)
}

// readyz returns /readyz's status and body.
func readyz(t *testing.T, client *http.Client, g *testGateway) (int, string) {
	t.Helper()
	return get(t, client, g.url+"/readyz")
}

// checkNoAddress fails the test if a body a client received names the
// backend, by its host:port or its URL.
func checkNoAddress(t *testing.T, what, body string, rb *restartableBackend) {
	t.Helper()
	if strings.Contains(body, rb.addr) || strings.Contains(body, rb.url.Host) {
		t.Errorf("%s: the body names the backend %s: %q", what, rb.addr, body)
	}
}

// downThenBack checks, with rb down, that a request ends
// rejected-no-endpoints; then it starts rb again and waits until the
// gateway is ready.
func downThenBack(t *testing.T, client *http.Client, g *testGateway, rb *restartableBackend) {
	t.Helper()
	sendRejectedNoEndpoints(t, client, g, rb)
	rb.start()
	waitReady(t, client, g, "once the backend is back")
}

// sendRejectedNoEndpoints sends a request while every backend is down
// and checks that it ends 503 rejected-no-endpoints within a bound far
// below its 60 s TTL, with no address in the body.
func sendRejectedNoEndpoints(t *testing.T, client *http.Client, g *testGateway, rb *restartableBackend) {
	t.Helper()
	start := time.Now()
	r := <-send(client, g.url, "while down")
	took := time.Since(start)
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkNoAddress(t, "rejected-no-endpoints", r.body, rb)
	if r.status != http.StatusServiceUnavailable || r.header.Get(flowcontrol.DroppedReasonHeader) != "rejected-no-endpoints" {
		t.Fatalf("with every backend down: %d %s %q, want 503 rejected-no-endpoints", r.status, r.header.Get(flowcontrol.DroppedReasonHeader), r.body)
	}
	// At least the no-endpoints TTL (the request was queued while the
	// backend was down), and nowhere near its 60 s TTL.
	if took < testNoEndpointsTTL || took > testNoEndpointsTTL+10*time.Second {
		t.Errorf("answered after %s, want about the no-endpoints TTL %s", took, testNoEndpointsTTL)
	}
	if _, typ, _ := openAIError(t, r.body); typ != "service_unavailable" {
		t.Errorf("error type %q, want service_unavailable", typ)
	}
}

// waitReady waits for /readyz to answer 200, then checks that a request
// reaches the backend.
func waitReady(t *testing.T, client *http.Client, g *testGateway, what string) {
	t.Helper()
	waitFor(t, "/readyz to answer 200 "+what, func() bool {
		code, _ := readyz(t, client, g)
		return code == http.StatusOK
	})
	if r := <-send(client, g.url, "up"); r.err != nil || r.status != http.StatusOK {
		t.Fatalf("%s: %d %v %q, want 200", what, r.status, r.err, r.body)
	}
}

// deadBackendGateway starts a gateway in front of one restartable backend
// (stopped first when dead) with the test's no-endpoints TTL and the given
// gate section.
func deadBackendGateway(t *testing.T, gateSection string, maxInFlight *int, dead bool) (*testGateway, *restartableBackend) {
	rb := newRestartableBackend(t)
	if dead {
		rb.stop()
	}
	opts := testOptions()
	opts.configPath = writeConfig(t, "", "controller:\n  defaultTTL: 60s\n  noEndpointsTTL: "+testNoEndpointsTTL.String()+"\n"+gateSection)
	opts.backends = []*url.URL{rb.url}
	opts.maxInFlight = maxInFlight
	return startGateway(t, opts), rb
}

// With -max-inflight the gate reads nothing of the backend: the proxy's
// refused connection makes it down. The request that finds out gets a
// 502 that does not name the backend; the next ones end
// rejected-no-endpoints within the no-endpoints TTL, and /readyz answers
// 503 until a probe reaches the backend again.
func TestDeadBackendWithMaxInFlight(t *testing.T) {
	client := newClient(t)
	g, rb := deadBackendGateway(t, "", intp(4), false)
	waitReady(t, client, g, "once the backend is reached")

	rb.stop()
	g.pool.closeIdle() // the next request dials
	r := <-send(client, g.url, "finds out")
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkNoAddress(t, "502", r.body, rb)
	if r.status != http.StatusBadGateway {
		t.Fatalf("the request that meets the refused connection: %d %q, want 502", r.status, r.body)
	}
	if msg, _, _ := openAIError(t, r.body); !strings.Contains(msg, "could not be reached") {
		t.Errorf("502 message %q, want one saying the model server could not be reached", msg)
	}
	if logs := g.logs.String(); !strings.Contains(logs, "backend down") || !strings.Contains(logs, rb.url.String()) {
		t.Errorf("the failure was not logged with the backend's name:\n%s", logs)
	}
	code, body := readyz(t, client, g)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no backend is up") || !strings.Contains(body, rb.url.String()) {
		t.Errorf("/readyz with the backend down: %d %q, want 503 naming the backend for the operator", code, body)
	}
	downThenBack(t, client, g, rb)
}

// With the default saturation gate the scrapes find out: once they have
// failed for the staleness threshold the backend is down, with no request
// sent to it.
func TestDeadBackendWithSaturationGate(t *testing.T) {
	client := newClient(t)
	g, rb := deadBackendGateway(t, "", nil, false)
	if g.sat == nil {
		t.Fatal("no saturation gate: the default gate is the saturation gate")
	}
	waitReady(t, client, g, "once the backend is scraped")

	rb.stop()
	waitFor(t, "/readyz to say that no backend is up", func() bool {
		code, body := readyz(t, client, g)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "no backend is up") &&
			strings.Contains(body, "scrapes have failed")
	})
	downThenBack(t, client, g, rb)
}

// The concurrency gate (and so gate.All of it and another) reads nothing
// of the backend either.
func TestDeadBackendWithConcurrencyGate(t *testing.T) {
	client := newClient(t)
	g, rb := deadBackendGateway(t, "gate:\n  maxInFlight: 8\n  concurrency:\n    maxConcurrency: 4\n", nil, false)
	waitReady(t, client, g, "once the backend is reached")
	rb.stop()
	g.pool.closeIdle()
	if r := <-send(client, g.url, "finds out"); r.status != http.StatusBadGateway {
		t.Fatalf("the request that meets the refused connection: %d %v %q, want 502", r.status, r.err, r.body)
	}
	downThenBack(t, client, g, rb)
}

// A backend dead from the start is never up: no request is sent to it,
// and the first one already ends rejected-no-endpoints.
func TestBackendDeadFromTheStart(t *testing.T) {
	client := newClient(t)
	g, rb := deadBackendGateway(t, "", intp(4), true)
	sendRejectedNoEndpoints(t, client, g, rb)
	if code, body := readyz(t, client, g); code != http.StatusServiceUnavailable || !strings.Contains(body, "1 down") {
		t.Errorf("/readyz: %d %q, want 503 counting the backend down", code, body)
	}
	rb.start()
	waitReady(t, client, g, "once the backend is up")
}

// A backend that accepts the connection and then fails (here: closes it
// unanswered) gets the request a 502 that names neither the backend nor
// the error, which has its address; the log has both. It is not down: it
// took the connection.
func TestBackendFailureIsLoggedAnd502(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	u, _ := url.Parse("http://" + l.Addr().String())

	client := newClient(t)
	opts := testOptions()
	opts.backends = []*url.URL{u}
	opts.maxInFlight = intp(1)
	g := startGateway(t, opts)
	waitFor(t, "the backend to be reached", func() bool { code, _ := readyz(t, client, g); return code == http.StatusOK })
	r := <-send(client, g.url, "a")
	if r.status != http.StatusBadGateway {
		t.Fatalf("%d %v, want 502", r.status, r.err)
	}
	if strings.Contains(r.body, l.Addr().String()) || strings.Contains(r.body, "127.0.0.1") {
		t.Errorf("the 502 body names the backend: %q", r.body)
	}
	if msg, typ, _ := openAIError(t, r.body); !strings.Contains(msg, "failed to answer") || typ == "" {
		t.Errorf("message %q, type %q", msg, typ)
	}
	if logs := g.logs.String(); !strings.Contains(logs, "backend request failed") || !strings.Contains(logs, u.String()) {
		t.Errorf("the failure was not logged:\n%s", logs)
	}
	if code, body := readyz(t, client, g); code != http.StatusOK {
		t.Errorf("/readyz after a backend took the connection and failed: %d %q, want 200: it is up", code, body)
	}
}
