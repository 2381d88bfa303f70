package flowhttp_test

// A client that goes away while its request is queued must take the request
// out of the queue at once, whatever the body's framing and the protocol,
// and the wrapped handler must never see it. Each case runs over real
// loopback servers: an HTTP/1 client writes its request by hand on a raw
// connection and closes it; an HTTP/2 client resets its stream or closes its
// connection.

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"

	"github.com/sluicegate/sluice/internal/testhttp"
)

// Flow IDs of the three kinds of request in a disconnect test.
const (
	holderFlow = "holder" // holds the only slot until released
	victimFlow = "victim" // queued behind it; its client goes away
	probeFlow  = "probe"  // queued after the victim; proves the queue moved on
)

// disconnectRig is a flowhttp Handler with one slot, in front of a backend
// that holds the holder's request until release is closed and records the
// flow of every request it serves.
type disconnectRig struct {
	fc      *flowcontrol.FlowController
	working chan struct{}          // the holder's request reached the backend
	release chan struct{}          // closed: the holder's request completes
	served  chan string            // the flow ID of every request the backend serves
	events  chan flowcontrol.Event // every outcome
	handler *flowhttp.Handler

	releaseOnce sync.Once
}

// releaseHolder lets the holder's request complete; it is idempotent.
func (rig *disconnectRig) releaseHolder() { rig.releaseOnce.Do(func() { close(rig.release) }) }

// unblock ends every request, for a test that failed half-way: it closes
// the controller, which answers a request still queued, and releases the
// holder. Register it after the server's Close, so that it runs first and
// Close need not wait for those requests forever.
func (rig *disconnectRig) unblock() {
	rig.fc.Close()
	rig.releaseHolder()
}

func newDisconnectRig(t *testing.T) *disconnectRig {
	t.Helper()
	rig := &disconnectRig{
		working: make(chan struct{}, 1),
		release: make(chan struct{}),
		served:  make(chan string, 16),
		events:  make(chan flowcontrol.Event, 16),
	}
	rig.fc = newController(t, flowcontrol.Config{
		Bands:    []flowcontrol.BandConfig{band(0, 10)},
		Gate:     gate.MaxInFlight(1),
		Observer: func(ev flowcontrol.Event) { rig.events <- ev },
	})
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		flow := r.Header.Get(flowhttp.FairnessIDHeader)
		rig.served <- flow
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if flow == holderFlow {
			rig.working <- struct{}{}
			<-rig.release
		}
		w.Header().Set("X-Proto", r.Proto)
		io.WriteString(w, flow+":"+string(body))
	})
	h := mustHandler(t, flowhttp.Config{Controller: rig.fc}, backend)
	rig.handler = h
	return rig
}

// awaitQueued waits until band 0 holds n requests. It polls the snapshot,
// which is cheap and lock-free: nothing else announces an enqueue.
func (rig *disconnectRig) awaitQueued(t *testing.T, n int64) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(watchdog)
	for {
		s, err := rig.fc.CapacitySnapshot(0)
		require.NoError(t, err)
		if s.QueuedRequests == n {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("band 0 holds %d requests, want %d", s.QueuedRequests, n)
		}
	}
}

// awaitEvent returns the next outcome.
func (rig *disconnectRig) awaitEvent(t *testing.T) flowcontrol.Event {
	t.Helper()
	return within(t, rig.events, "no outcome: the request is still queued")
}

// awaitServed returns the flow of the next request the backend serves.
func (rig *disconnectRig) awaitServed(t *testing.T) string {
	t.Helper()
	return within(t, rig.served, "the backend served nothing")
}

// run drives one disconnect case: the holder takes the slot, the victim is
// queued behind it by queueVictim, which returns a function that makes its
// client go away; the victim must leave the queue cancelled at once, and
// after the slot frees the backend serves the holder and a probe but never
// the victim.
func (rig *disconnectRig) run(t *testing.T, client *http.Client, url, proto string, queueVictim func() (goAway func())) {
	t.Helper()
	holder := goDo(client, mustRequest(t, http.MethodGet, url, holderFlow, ""))
	require.Equal(t, holderFlow, rig.awaitServed(t))
	<-rig.working
	require.Equal(t, flowcontrol.OutcomeDispatched, rig.awaitEvent(t).Outcome)

	goAway := queueVictim()
	rig.awaitQueued(t, 1)
	goAway()

	ev := rig.awaitEvent(t)
	require.Equal(t, flowcontrol.OutcomeRejectedContextCancelled, ev.Outcome, "outcome of the victim")
	require.Equal(t, victimFlow, ev.Requested.ID)
	rig.awaitQueued(t, 0)

	// The probe queues behind the (now empty) place of the victim: once the
	// slot frees, it is served next, so a victim still queued anywhere would
	// have been served first.
	probe := goDo(client, mustRequest(t, http.MethodPost, url, probeFlow, "probe body"))
	rig.awaitQueued(t, 1)
	rig.releaseHolder()
	for _, want := range []string{holderFlow, probeFlow} {
		res := <-map[string]<-chan result{holderFlow: holder, probeFlow: probe}[want]
		require.NoError(t, res.err, want)
		require.Equal(t, http.StatusOK, res.status, want)
		require.Equal(t, proto, res.header.Get("X-Proto"), want)
	}
	require.Equal(t, probeFlow, rig.awaitServed(t))
	select {
	case flow := <-rig.served:
		t.Fatalf("the backend served %q after the probe", flow)
	default:
	}
	require.Zero(t, rig.fc.InFlight())
}

// mustRequest builds a request of flow, with body if it is not empty.
func mustRequest(t *testing.T, method, url, flow, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	req.Header.Set(flowhttp.FairnessIDHeader, flow)
	return req
}

// goDo sends req on a new goroutine; the result arrives on the channel.
func goDo(client *http.Client, req *http.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		var r result
		r.status, r.header, r.body, r.err = testhttp.Do(client, req)
		ch <- r
	}()
	return ch
}

func TestClientGoneWhileQueuedHTTP1(t *testing.T) {
	cases := []struct {
		name    string
		request string // the victim's request, as written on the wire
	}{
		{"content-length", "POST /v1/completions HTTP/1.1\r\nHost: gateway\r\n" +
			"X-Llm-D-Inference-Fairness-Id: victim\r\nContent-Type: application/json\r\n" +
			"Content-Length: 15\r\n\r\n{\"prompt\":\"hi\"}"},
		{"chunked", "POST /v1/completions HTTP/1.1\r\nHost: gateway\r\n" +
			"X-Llm-D-Inference-Fairness-Id: victim\r\nContent-Type: application/json\r\n" +
			"Transfer-Encoding: chunked\r\n\r\n" +
			"5\r\n{\"pro\r\na\r\nmpt\":\"hi\"}\r\n0\r\n\r\n"},
		{"bodiless GET", "GET /v1/models HTTP/1.1\r\nHost: gateway\r\n" +
			"X-Llm-D-Inference-Fairness-Id: victim\r\n\r\n"},
		{"content-length zero", "POST /v1/completions HTTP/1.1\r\nHost: gateway\r\n" +
			"X-Llm-D-Inference-Fairness-Id: victim\r\nContent-Length: 0\r\n\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rig := newDisconnectRig(t)
			srv := httptest.NewUnstartedServer(rig.handler)
			srv.Config.ErrorLog = discardLog
			srv.Start()
			t.Cleanup(srv.Close)
			t.Cleanup(rig.unblock)
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)

			rig.run(t, &http.Client{Transport: tr}, srv.URL, "HTTP/1.1", func() func() {
				conn, err := net.Dial("tcp", srv.Listener.Addr().String())
				require.NoError(t, err)
				_, err = io.WriteString(conn, c.request)
				require.NoError(t, err)
				return func() { conn.Close() }
			})
		})
	}
}

func TestClientGoneWhileQueuedHTTP2(t *testing.T) {
	cases := []struct {
		name string
		body string
		// close: the client closes the whole connection; otherwise it
		// cancels the request, which resets its stream only.
		close bool
	}{
		{"stream reset, body", `{"prompt":"hi"}`, false},
		{"stream reset, no body", "", false},
		{"connection closed, body", `{"prompt":"hi"}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rig := newDisconnectRig(t)
			srv := httptest.NewUnstartedServer(rig.handler)
			srv.Config.ErrorLog = discardLog
			srv.EnableHTTP2 = true
			srv.StartTLS()
			t.Cleanup(srv.Close)
			t.Cleanup(rig.unblock)
			client := srv.Client()
			t.Cleanup(client.CloseIdleConnections)

			rig.run(t, client, srv.URL, "HTTP/2.0", func() func() {
				// The victim gets a connection of its own, so that closing
				// it leaves the holder's alone.
				var (
					mu   sync.Mutex
					conn net.Conn
				)
				base := srv.Client().Transport.(*http.Transport)
				tr := base.Clone()
				tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					c, err := (&tls.Dialer{Config: base.TLSClientConfig}).DialContext(ctx, network, addr)
					mu.Lock()
					conn = c
					mu.Unlock()
					return c, err
				}
				t.Cleanup(tr.CloseIdleConnections)
				ctx, cancel := context.WithCancel(context.Background())
				req := mustRequest(t, http.MethodPost, srv.URL, victimFlow, c.body).WithContext(ctx)
				done := goDo(&http.Client{Transport: tr}, req)
				return func() {
					if c.close {
						mu.Lock()
						conn.Close()
						mu.Unlock()
					} else {
						cancel()
					}
					res := <-done
					require.Error(t, res.err, "the victim got an answer")
					cancel()
				}
			})
		})
	}
}
