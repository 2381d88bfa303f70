package flowhttp_test

// End-to-end tests over real loopback HTTP: a client, a gateway (flowhttp in
// front of an httputil.ReverseProxy or a handler) and httptest backends.
// Nothing here depends on timing; the tests that do run in synctest bubbles
// (synctest_test.go).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
)

// TestBackendHeadroomNeverReachesClient: whatever copies of the router-owned
// headers a backend sends — any letter case, several values, several keys —
// the client sees exactly the router's values: the band's headroom when the
// band is bounded, none when it is unbounded, and the queue duration.
func TestBackendHeadroomNeverReachesClient(t *testing.T) {
	spoofs := []struct {
		name  string
		spoof func(h http.Header)
	}{
		{"canonical", func(h http.Header) { h.Set(headroom.HeaderName, "9999") }},
		{"lower case, two values", func(h http.Header) {
			h["x-llm-d-flow-band-headroom-requests"] = []string{"1", "2"}
		}},
		{"upper case, malformed", func(h http.Header) {
			h["X-LLM-D-FLOW-BAND-HEADROOM-REQUESTS"] = []string{"-3"}
		}},
		{"every case at once", func(h http.Header) {
			h.Add(headroom.HeaderName, "500")
			h.Add(headroom.HeaderName, "501")
			h["x-llm-d-flow-band-headroom-requests"] = []string{"502"}
			h["X-Llm-d-Flow-Band-Headroom-Requests"] = []string{"503", "504"}
		}},
		{"provisional name", func(h http.Header) { h["x-llm-d-flow-band-headroom"] = []string{"77"} }},
		{"queue duration", func(h http.Header) {
			h.Set(flowhttp.QueueDurationHeader, "12345")
			h["x-llm-d-FLOW-queue-duration-ms"] = []string{"6"}
		}},
	}
	fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{
		band(0, 10),
		{Priority: 3}, // unbounded: advertises nothing
	}})
	byName := map[string]func(http.Header){}
	for _, s := range spoofs {
		byName[s.name] = s.spoof
	}
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		byName[r.Header.Get("x-spoof")](w.Header())
		io.WriteString(w, "tokens")
	})
	// Through a reverse proxy (the backend's header lines arrive parsed and
	// canonicalized) and around a handler that sets map keys directly (the
	// hook sees them as written).
	gateways := map[string]string{
		"proxy":   loopbackGateway(t, fc, backend),
		"handler": loopbackServer(t, newHandler(t, fc, backend)),
	}
	bands := []struct {
		priority int
		want     map[string][]string
	}{
		{0, map[string][]string{headroom.HeaderName: {"10"}, flowhttp.QueueDurationHeader: {"0"}}},
		{3, map[string][]string{flowhttp.QueueDurationHeader: {"0"}}},
	}
	for gw, url := range gateways {
		for _, b := range bands {
			for _, s := range spoofs {
				t.Run(fmt.Sprintf("%s/band %d/%s", gw, b.priority, s.name), func(t *testing.T) {
					resp, body := send(t, http.DefaultClient, url, b.priority, "x-spoof", s.name)
					if resp.StatusCode != http.StatusOK || body != "tokens" {
						t.Fatalf("response %d %q, want 200 \"tokens\"", resp.StatusCode, body)
					}
					if got := routerHeaders(resp.Header); !mapsEqual(got, b.want) {
						t.Errorf("router-owned headers %v, want %v (all headers: %v)", got, b.want, resp.Header)
					}
				})
			}
		}
	}
}

// mapsEqual reports whether two header maps hold the same names with the
// same values in the same order.
func mapsEqual(a, b map[string][]string) bool {
	return maps.EqualFunc(a, b, slices.Equal)
}

// TestRejectionsOverHTTP: a request flow control does not dispatch is
// answered by the gateway with the outcome's status and dropped reason and
// a JSON body, without the router's success headers, and the backend is
// never called. Expiry and Retry-After, which need time to pass, are in
// TestExpiryOverHTTP and TestRetryAfterOverHTTP.
func TestRejectionsOverHTTP(t *testing.T) {
	var calls atomic.Int64
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set(headroom.HeaderName, "9999")
		io.WriteString(w, "tokens")
	})
	check := func(t *testing.T, resp *http.Response, body string, status int, reason string) {
		t.Helper()
		if resp.StatusCode != status {
			t.Errorf("status %d, want %d", resp.StatusCode, status)
		}
		if got := resp.Header.Get(flowcontrol.DroppedReasonHeader); got != reason {
			t.Errorf("%s %q, want %q", flowcontrol.DroppedReasonHeader, got, reason)
		}
		if got := resp.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type %q, want application/json", got)
		}
		if got := resp.Header.Values("Retry-After"); got != nil {
			t.Errorf("Retry-After %q, want none: nothing projected", got)
		}
		// Refused at once: queued 0 ms, and no headroom.
		if got, want := routerHeaders(resp.Header), map[string][]string{flowhttp.QueueDurationHeader: {"0"}}; !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("rejection carries %v, want %v", got, want)
		}
		e := decodeError(t, body)
		if e.code() != reason || e.Error.Type != wantType[status] {
			t.Errorf("body %s, want code %q and type %q", body, reason, wantType[status])
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("backend called %d times, want 0", n)
		}
	}

	t.Run("band full", func(t *testing.T) {
		fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 0)}})
		resp, body := send(t, http.DefaultClient, loopbackGateway(t, fc, backend), 0)
		check(t, resp, body, http.StatusTooManyRequests, "rejected-saturated")
	})
	t.Run("no band at or below the priority", func(t *testing.T) {
		fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}, NeverPromote: true})
		resp, body := send(t, http.DefaultClient, loopbackGateway(t, fc, backend), -5)
		check(t, resp, body, http.StatusTooManyRequests, "rejected-saturated")
	})
	t.Run("shutting down", func(t *testing.T) {
		fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
		url := loopbackGateway(t, fc, backend)
		fc.Close()
		resp, body := send(t, http.DefaultClient, url, 0)
		check(t, resp, body, http.StatusServiceUnavailable, "rejected-shutting-down")
	})
}

// TestFallbackBandReported: a request for a band that is not provisioned is
// admitted in the fallback band and reports that band's headroom, even when
// its own band is provisioned while the backend works on it; later requests
// use the new band.
func TestFallbackBandReported(t *testing.T) {
	fc := newController(t, flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{band(10, 3), band(0, 7)},
		FallbackPriority: 0,
	})
	var provision atomic.Bool
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if provision.Load() {
			if err := fc.ProvisionBand(band(5, 2)); err != nil {
				t.Errorf("ProvisionBand: %v", err)
			}
		}
		io.WriteString(w, "tokens")
	})
	// seen records the band the wrapped handler found in its context.
	var seen atomic.Value
	proxy := proxyTo(t, loopbackServer(t, backend), http.DefaultTransport)
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(headroom.FromContext(r.Context()))
		proxy.ServeHTTP(w, r)
	})
	url := loopbackServer(t, newHandler(t, fc, record))

	steps := []struct {
		name      string
		priority  int
		provision bool
		wantBand  headroom.Band
		headroom  string
	}{
		{"own band", 10, false, headroom.Admitted(10), "3"},
		{"fallback, band 5 provisioned meanwhile", 5, true, headroom.Admitted(0), "7"},
		{"band 5 now provisioned", 5, false, headroom.Admitted(5), "2"},
		{"still unprovisioned", 4, false, headroom.Admitted(0), "7"},
	}
	for _, s := range steps {
		provision.Store(s.provision)
		resp, _ := send(t, http.DefaultClient, url, s.priority)
		if got := seen.Load().(headroom.Band); got != s.wantBand {
			t.Errorf("%s: handler saw %v, want %v", s.name, got, s.wantBand)
		}
		if got := resp.Header.Values(headroom.HeaderName); !slices.Equal(got, []string{s.headroom}) {
			t.Errorf("%s: headroom %q, want %q", s.name, got, s.headroom)
		}
	}
}

// streamingBackend writes n tokens, flushing each, and waits for next
// before writing the one after, so the client can read token i only if it
// was flushed through every hop. It ignores cancellation unless
// honourCancel is set: a careless handler.
type streamingBackend struct {
	n    int
	next chan struct{}
	// flush flushes the i-th token.
	flush func(w http.ResponseWriter, i int)
}

func (b *streamingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set(headroom.HeaderName, "9999")
	for i := range b.n {
		fmt.Fprintf(w, "token %d\n", i)
		b.flush(w, i)
		select {
		case <-b.next:
		case <-r.Context().Done():
			return
		}
	}
}

// TestStreamFlushesTokenByToken: a streamed response reaches the client one
// token at a time through the wrapper — with http.Flusher, with
// http.ResponseController, and through a reverse proxy — with the router's
// headers on its head, and the admission is held until the body is done.
func TestStreamFlushesTokenByToken(t *testing.T) {
	flushers := map[string]func(w http.ResponseWriter, i int){
		"http.Flusher": func(w http.ResponseWriter, i int) {
			f, ok := w.(http.Flusher)
			if !ok {
				panic("the wrapper is not an http.Flusher")
			}
			f.Flush()
		},
		"http.ResponseController": func(w http.ResponseWriter, i int) {
			if err := http.NewResponseController(w).Flush(); err != nil {
				panic(err)
			}
		},
	}
	for name, flush := range flushers {
		for _, viaProxy := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/proxy=%v", name, viaProxy), func(t *testing.T) {
				gt := newCountingGate(1)
				fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 4)}, Gate: gt})
				backend := &streamingBackend{n: 5, next: make(chan struct{}), flush: flush}
				var url string
				if viaProxy {
					url = loopbackGateway(t, fc, backend)
				} else {
					url = loopbackServer(t, newHandler(t, fc, backend))
				}
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if got := routerHeaders(resp.Header); !mapsEqual(got, map[string][]string{
					headroom.HeaderName: {"4"}, flowhttp.QueueDurationHeader: {"0"},
				}) {
					t.Errorf("router-owned headers %v, want headroom 4 and queue duration 0", got)
				}
				r := bufio.NewReader(resp.Body)
				for i := range backend.n {
					if got, want := readLine(t, r), fmt.Sprintf("token %d\n", i); got != want {
						t.Fatalf("read %q, want %q", got, want)
					}
					gt.noRelease(t, fmt.Sprintf("after token %d", i))
					backend.next <- struct{}{}
				}
				if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
					t.Fatalf("after the last token: %q, %v", rest, err)
				}
				gt.awaitRelease(t)
				if a, r := gt.acquired.Load(), gt.released.Load(); a != 1 || r != 1 {
					t.Errorf("acquired %d, released %d; want 1 and 1", a, r)
				}
			})
		}
	}
}

// TestReleaseOnceWhenClientDisconnectsMidStream: when the client goes away in
// the middle of a streamed response, the admission is released at once —
// even while a careless handler keeps running — and not again when the
// handler returns; the slot goes to the next waiting request.
func TestReleaseOnceWhenClientDisconnectsMidStream(t *testing.T) {
	for _, viaProxy := range []bool{false, true} {
		t.Run(fmt.Sprintf("proxy=%v", viaProxy), func(t *testing.T) {
			gt := newCountingGate(1)
			fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 4)}, Gate: gt})

			unblock := make(chan struct{})
			stuck := make(chan struct{}, 2)
			backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("x-second") != "" {
					io.WriteString(w, "second")
					return
				}
				io.WriteString(w, "token 0\n")
				w.(http.Flusher).Flush()
				stuck <- struct{}{}
				<-unblock // ignores the client: a careless handler
			})
			var served atomic.Int64
			gatewayDone := make(chan struct{}, 2)
			var url string
			var inner http.Handler
			if viaProxy {
				be := loopbackServer(t, backend)
				tr := &http.Transport{}
				t.Cleanup(tr.CloseIdleConnections)
				inner = newHandler(t, fc, proxyTo(t, be, tr))
			} else {
				inner = newHandler(t, fc, backend)
			}
			url = loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() { served.Add(1); gatewayDone <- struct{}{} }()
				inner.ServeHTTP(w, r)
			}))
			defer close(unblock)

			ctx, cancel := context.WithCancel(context.Background())
			// No body: net/http notices a client that went away only once
			// the request body has been read to its end, and this careless
			// handler never reads it.
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := readLine(t, bufio.NewReader(resp.Body)); got != "token 0\n" {
				t.Fatalf("read %q, want the first token", got)
			}
			<-stuck
			gt.noRelease(t, "mid-stream")
			cancel() // the client goes away
			resp.Body.Close()

			if p := gt.awaitRelease(t); p != 0 {
				t.Errorf("released band %d, want 0", p)
			}
			if !viaProxy && served.Load() != 0 {
				t.Fatal("the handler returned before it was unblocked")
			}
			if n := fc.InFlight(); n != 0 {
				t.Errorf("InFlight %d after the client left, want 0", n)
			}
			// The freed slot serves the next request while the first
			// handler may still be stuck.
			resp2, body := send(t, http.DefaultClient, url, 0, "x-second", "1")
			if resp2.StatusCode != http.StatusOK || body != "second" {
				t.Fatalf("second request: %d %q", resp2.StatusCode, body)
			}
			gt.awaitRelease(t)

			unblock <- struct{}{}
			<-gatewayDone
			<-gatewayDone
			gt.noRelease(t, "after the handler returned")
			if a, r := gt.acquired.Load(), gt.released.Load(); a != 2 || r != 2 {
				t.Errorf("acquired %d, released %d; want 2 and 2 (one each)", a, r)
			}
		})
	}
}

// TestBodySizing: the byte size booked for a request is the length of its
// body, read before queueing up to the limit, whatever its framing; the
// backend always gets the whole body. A body over the limit is refused with
// 413 before flow control sees it (no dropped reason); a body that fits the
// limit but exceeds a byte capacity can never fit and is refused with 413
// rejected-saturated, without Retry-After.
func TestBodySizing(t *testing.T) {
	var calls atomic.Int64
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.Copy(w, r.Body)
	})
	body := strings.Repeat("x", 100)
	cases := []struct {
		name     string
		maxBody  int64
		chunked  bool
		byteCap  int64
		status   int
		reason   string // dropped reason of a refusal
		wantEcho bool
	}{
		{"content-length fits", 0, false, 100, http.StatusOK, "", true},
		{"content-length over the byte capacity", 0, false, 99, http.StatusRequestEntityTooLarge, "rejected-saturated", false},
		{"content-length at the read limit", 100, false, 100, http.StatusOK, "", true},
		{"content-length over the read limit", 99, false, 1000, http.StatusRequestEntityTooLarge, "", false},
		{"content-length, never read", -1, false, 100, http.StatusOK, "", true},
		{"content-length, never read, over the byte capacity", -1, false, 99, http.StatusRequestEntityTooLarge, "rejected-saturated", false},
		{"chunked fits", 0, true, 100, http.StatusOK, "", true},
		{"chunked over the byte capacity", 0, true, 99, http.StatusRequestEntityTooLarge, "rejected-saturated", false},
		{"chunked at the read limit", 100, true, 100, http.StatusOK, "", true},
		{"chunked over the read limit", 99, true, 1000, http.StatusRequestEntityTooLarge, "", false},
		{"chunked, never read: counts 0", -1, true, 0, http.StatusOK, "", true},
		{"chunked, limit math.MaxInt64", math.MaxInt64, true, 100, http.StatusOK, "", true},
		{"chunked, limit math.MaxInt64, over the byte capacity", math.MaxInt64, true, 99, http.StatusRequestEntityTooLarge, "rejected-saturated", false},
		{"content-length, limit math.MaxInt64", math.MaxInt64, false, 100, http.StatusOK, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls.Store(0)
			fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{
				{Priority: 0, ByteCapacity: capacity.Bounded(c.byteCap)},
			}})
			h := mustHandler(t, flowhttp.Config{Controller: fc, MaxBodyBytes: c.maxBody}, echo)
			url := loopbackServer(t, h)
			var rd io.Reader = strings.NewReader(body)
			if c.chunked {
				rd = io.MultiReader(rd) // hides the length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, url, rd)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, got, c.status)
			}
			if c.wantEcho && string(got) != body {
				t.Errorf("backend got %d bytes, want the whole %d-byte body", len(got), len(body))
			}
			if c.wantEcho {
				return
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("backend called %d times for a refused request", n)
			}
			e := decodeError(t, string(got))
			if e.code() != c.reason || e.Error.Type != "invalid_request_error" {
				t.Errorf("body %s, want code %q and type invalid_request_error", got, c.reason)
			}
			if r := resp.Header.Get(flowcontrol.DroppedReasonHeader); r != c.reason {
				t.Errorf("dropped reason %q, want %q", r, c.reason)
			}
			if ra := resp.Header.Values("Retry-After"); ra != nil {
				t.Errorf("Retry-After %q on a request that can never fit", ra)
			}
		})
	}
}

// TestDeclaredBodyOverTheLimitIsNotRead: a Content-Length above
// MaxBodyBytes is refused from the header alone, before any of the body is
// read: a client that waits for 100 Continue gets the 413 instead.
func TestDeclaredBodyOverTheLimitIsNotRead(t *testing.T) {
	var events atomic.Int64
	fc := newController(t, flowcontrol.Config{
		Bands:    []flowcontrol.BandConfig{band(0, 10)},
		Observer: func(flowcontrol.Event) { events.Add(1) },
	})
	h := mustHandler(t, flowhttp.Config{Controller: fc, MaxBodyBytes: 10}, okHandler)
	url := loopbackServer(t, h)
	tr := &http.Transport{ExpectContinueTimeout: watchdog}
	t.Cleanup(tr.CloseIdleConnections)
	sent := make(chan struct{}, 1)
	req, _ := http.NewRequest(http.MethodPost, url, &notifyingReader{Reader: strings.NewReader(strings.Repeat("x", 11)), read: sent})
	req.ContentLength = 11
	req.Header.Set("Expect", "100-continue")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d (%s), want 413", resp.StatusCode, got)
	}
	if e := decodeError(t, string(got)); e.code() != "" || !strings.Contains(e.Error.Message, "11 bytes") {
		t.Errorf("body %s, want a null code and the declared length", got)
	}
	if r := resp.Header.Get(flowcontrol.DroppedReasonHeader); r != "" {
		t.Errorf("dropped reason %q for a request flow control never saw", r)
	}
	select {
	case <-sent:
		t.Error("the client sent the body: the server asked for it")
	default:
	}
	if n := events.Load(); n != 0 {
		t.Errorf("%d flow-control outcomes, want none", n)
	}
}

// notifyingReader reports its first Read on read.
type notifyingReader struct {
	io.Reader
	read chan<- struct{}
}

func (r *notifyingReader) Read(p []byte) (int, error) {
	select {
	case r.read <- struct{}{}:
	default:
	}
	return r.Reader.Read(p)
}
