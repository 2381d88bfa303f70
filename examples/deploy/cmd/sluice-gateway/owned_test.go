package main

// The header table of flowcontrol/flowhttp's owned_test.go, run against the
// gateway: every router-owned name, in every letter case, sent by a backend
// on every path (the header, a declared trailer, a Trailer:-prefixed key,
// 103 Early Hints) never reaches the client, and the other headers the
// backend sends on the same path do.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/internal/testhttp"
)

// spoofingBackend sends key = "spoofed" and X-Other = "kept" on path.
func spoofingBackend(path, key string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		h := w.Header()
		switch path {
		case "header":
			h[key] = []string{"spoofed"}
			h["X-Other"] = []string{"kept"}
		case "declared trailer":
			h["Trailer"] = []string{key + ", X-Other"}
		case "Trailer:-prefixed":
			h[http.TrailerPrefix+key] = []string{"spoofed"}
			h[http.TrailerPrefix+"X-Other"] = []string{"kept"}
		case "103 Early Hints":
			h[key] = []string{"spoofed"}
			h["X-Other"] = []string{"kept"}
			w.WriteHeader(http.StatusEarlyHints)
			clear(h)
		}
		io.WriteString(w, "tokens")
		w.(http.Flusher).Flush()
		if path == "declared trailer" {
			h[key] = []string{"spoofed"}
			h["X-Other"] = []string{"kept"}
		}
	})
}

// Whether flow control admits the request (a completion) or it passes
// straight through (a model list), no router-owned name a backend sends
// reaches the client.
func TestRouterOwnedOnEveryPath(t *testing.T) {
	paths := []string{"header", "declared trailer", "Trailer:-prefixed", "103 Early Hints"}
	targets := []struct{ method, path, body string }{
		{http.MethodPost, "/v1/chat/completions", chatBody}, // admitted
		{http.MethodGet, "/v1/models", ""},                  // passed through
	}
	for _, target := range targets {
		for _, path := range paths {
			for _, name := range flowhttp.RouterOwnedHeaders() {
				for _, key := range []string{name, http.CanonicalHeaderKey(name), strings.ToUpper(name)} {
					t.Run(target.method+" "+target.path+"/"+path+"/"+key, func(t *testing.T) {
						backend := httptest.NewServer(spoofingBackend(path, key))
						t.Cleanup(backend.Close)
						u, _ := url.Parse(backend.URL)
						opts := testOptions()
						opts.backends = []*url.URL{u}
						opts.maxInFlight = intp(4)
						g := startGateway(t, opts)

						var mu sync.Mutex
						var informational []http.Header
						trace := &httptrace.ClientTrace{Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
							mu.Lock()
							defer mu.Unlock()
							informational = append(informational, http.Header(h).Clone())
							return nil
						}}
						req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
							target.method, g.url+target.path, strings.NewReader(target.body))
						res, err := newClient(t).Do(req)
						if err != nil {
							t.Fatal(err)
						}
						body, _ := io.ReadAll(res.Body)
						res.Body.Close()
						if res.StatusCode != http.StatusOK || string(body) != "tokens" {
							t.Fatalf("%d %q", res.StatusCode, body)
						}

						testhttp.CheckOwned(t, flowhttp.IsRouterOwned, append([]http.Header{res.Header, res.Trailer}, informational...)...)
						if v := res.Header.Values(flowcontrol.DroppedReasonHeader); len(v) > 0 {
							t.Errorf("a dispatched response carries %s %q", flowcontrol.DroppedReasonHeader, v)
						}
						var other string
						switch path {
						case "header":
							other = res.Header.Get("X-Other")
						case "declared trailer", "Trailer:-prefixed":
							other = res.Trailer.Get("X-Other")
						case "103 Early Hints":
							if len(informational) != 1 {
								t.Fatalf("%d informational responses, want 1", len(informational))
							}
							other = informational[0].Get("X-Other")
						}
						if other != "kept" {
							t.Errorf("X-Other on the %s path = %q, want kept", path, other)
						}
					})
				}
			}
		}
	}
}

// The gateway's ModifyResponse strips the trailers that arrive with the
// end of a backend's body, declared or not, also where flowhttp's Handler
// cannot see (a protocol upgrade is written past it).
func TestModifyResponseStripsTrailers(t *testing.T) {
	body := io.NopCloser(strings.NewReader("tokens"))
	resp := &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"X-Llm-D-Request-Dropped-Reason": {"spoofed"}, "Trailer:x-llm-d-flow-queue-duration-ms": {"1"}},
		Trailer:    http.Header{"X-Llm-D-Flow-Band-Headroom": nil, "X-Other": nil},
		Body:       body,
	}
	if err := flowhttp.StripRouterOwnedResponse(resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Header) != 0 || len(resp.Trailer) != 1 {
		t.Fatalf("header %q, declared trailers %q", resp.Header, resp.Trailer)
	}
	// The transport fills resp.Trailer as the body ends.
	resp.Trailer["X-LLM-D-REQUEST-DROPPED-REASON"] = []string{"spoofed"}
	resp.Trailer["X-Other"] = []string{"kept"}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if len(resp.Trailer) != 1 || resp.Trailer.Get("X-Other") != "kept" {
		t.Errorf("trailers after the body %q, want X-Other alone", resp.Trailer)
	}
}
