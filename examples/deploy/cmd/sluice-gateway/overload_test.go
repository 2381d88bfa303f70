package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// countDials makes g's pool count the connections it opens to its
// backends (the proxy's and the probes') in n.
func countDials(n *atomic.Int64) func(*gateway) {
	return func(g *gateway) {
		d := &net.Dialer{}
		g.pool.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			n.Add(1)
			return d.DialContext(ctx, network, addr)
		}
	}
}

// TestIdleConnectionsCoverTheGate sends waves of as many requests as the
// gate lets be in flight, more than net/http's default transport keeps
// idle (100 in all): the backend holds every request of a wave until the
// whole wave is in, so each wave has them all in flight at once. The
// connections the first wave opened serve the next ones: the pool dials
// about one connection per request in flight, not one per request (with
// net/http's defaults each later wave would dial 200 again).
func TestIdleConnectionsCoverTheGate(t *testing.T) {
	const inFlight, waves = 300, 3
	var mu sync.Mutex
	arrived, wave := 0, make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		mine := wave
		if arrived++; arrived == inFlight {
			close(wave)
			arrived, wave = 0, make(chan struct{})
		}
		mu.Unlock()
		select {
		case <-mine:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"chat.completion"}`)
	}))
	t.Cleanup(backend.Close)
	u, _ := url.Parse(backend.URL)
	opts := testOptions()
	opts.backends = []*url.URL{u}
	opts.maxInFlight = intp(inFlight)
	var dials atomic.Int64
	g := startGatewayPrepared(t, opts, countDials(&dials))
	waitFor(t, "the backend to be up", func() bool { return g.readiness() == nil })
	t.Cleanup(g.pool.closeIdle)

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = inFlight, inFlight
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: waitLimit}
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for range waves {
				resp, err := client.Post(g.url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	// One probe, one connection per request in flight, and a few for a
	// request sent as the previous one's connection was being returned.
	if n := dials.Load(); n > inFlight+inFlight/10 {
		t.Errorf("%d dials for %d waves of %d requests in flight: the transport does not keep a connection per request the gate allows", n, waves, inFlight)
	}
}

// TestOverloadWaitsInTheQueue offers the gateway far more than it serves:
// vegeta sends 2,000 requests a second for a second to a gateway whose
// gate lets 4 be in flight, in front of a backend that takes 10 ms each
// (at most 400 a second). What the gate holds waits in the flow
// controller's queue, whose TTL (the request's 100 ms) refuses it: every
// request is answered, 200 or 429/503 rejected-ttl-expired, well within
// the client's timeout; and the pool dials no connection per request,
// only about one per request in flight.
func TestOverloadWaitsInTheQueue(t *testing.T) {
	const inFlight = 4
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		t := time.NewTimer(10 * time.Millisecond) // the model's work
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"chat.completion"}`)
	}))
	t.Cleanup(backend.Close)
	u, _ := url.Parse(backend.URL)
	opts := testOptions()
	opts.backends = []*url.URL{u}
	opts.maxInFlight = intp(inFlight)
	var dials atomic.Int64
	g := startGatewayPrepared(t, opts, countDials(&dials))
	waitFor(t, "the backend to be up", func() bool { return g.readiness() == nil })
	t.Cleanup(g.pool.closeIdle)

	const timeout = 10 * time.Second
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 10000
	t.Cleanup(tr.CloseIdleConnections)
	a := vegeta.NewAttacker(vegeta.Client(&http.Client{Transport: tr}), vegeta.Timeout(timeout))
	targeter := vegeta.NewStaticTargeter(vegeta.Target{
		Method: http.MethodPost,
		URL:    g.url + "/v1/chat/completions",
		Body:   []byte(chatBody),
		Header: http.Header{"Content-Type": {"application/json"}, flowhttp.TTLHeader: {"100ms"}},
	})
	var ok, expired, total int
	var slowest time.Duration
	for r := range a.Attack(targeter, vegeta.ConstantPacer{Freq: 2000, Per: time.Second}, time.Second, "overload") {
		total++
		slowest = max(slowest, r.Latency)
		reason := r.Headers.Get(flowcontrol.DroppedReasonHeader)
		switch {
		case r.Code == http.StatusOK:
			ok++
		case (r.Code == http.StatusTooManyRequests || r.Code == http.StatusServiceUnavailable) &&
			reason == flowcontrol.OutcomeRejectedTTLExpired.String():
			expired++
		default:
			t.Errorf("request %d: status %d, dropped reason %q, error %q", r.Seq, r.Code, reason, r.Error)
		}
	}
	t.Logf("%d requests: %d answered 200, %d refused at their TTL; the slowest took %v; %d dials", total, ok, expired, slowest, dials.Load())
	if ok == 0 || expired == 0 {
		t.Errorf("%d answered 200 and %d refused at their TTL: the offered load did not overload the gate", ok, expired)
	}
	// A request waits its TTL in the queue, then its backend's 10 ms: far
	// from the client's timeout, which a request stuck in an accept
	// queue or a dial would reach.
	if slowest >= timeout/2 {
		t.Errorf("the slowest request took %v: latency is not bounded by the queue's TTL", slowest)
	}
	if n := dials.Load(); n > 2*inFlight+1 {
		t.Errorf("%d dials for %d requests with at most %d in flight: the pool dials per request", n, total, inFlight)
	}
}
