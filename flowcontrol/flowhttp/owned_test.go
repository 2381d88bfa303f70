package flowhttp_test

// Every router-owned header is the router's on every response path: the
// header, the trailers (declared or set through http.TrailerPrefix) and the
// informational (1xx) headers; any letter case; direct or through a
// reverse proxy. The same table runs against the gateway
// (examples/deploy/cmd/sluice-gateway) and the ext_proc adapter
// (examples/extproc) in their own modules.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/headroom/window"
	"github.com/sluicegate/sluice/internal/testhttp"
)

func TestRouterOwnedHeadersIsTheOneList(t *testing.T) {
	want := []string{
		headroom.HeaderName, headroom.ProvisionalHeaderName,
		flowcontrol.DroppedReasonHeader, flowhttp.QueueDurationHeader,
	}
	got := flowhttp.RouterOwnedHeaders()
	require.ElementsMatch(t, want, got)
	// The consumer side spells the same names without importing the router.
	require.Subset(t, got, []string{window.DroppedReasonHeader, window.QueueDurationHeader})
	for _, name := range got {
		require.Equal(t, strings.ToLower(name), name, "names are lower case")
		require.True(t, flowhttp.IsRouterOwned(strings.ToUpper(name)))
		require.True(t, flowhttp.IsRouterOwned(http.TrailerPrefix+http.CanonicalHeaderKey(name)))
		require.True(t, flowhttp.IsRouterOwned("TRAILER:"+name))
	}
	require.False(t, flowhttp.IsRouterOwned("x-llm-d-flow-band-headroom-requests-extra"))
	require.False(t, flowhttp.IsRouterOwned(http.TrailerPrefix))
	require.False(t, flowhttp.IsRouterOwned("x-other"))

	got[0] = "changed"
	require.NotContains(t, flowhttp.RouterOwnedHeaders(), "changed", "the caller's copy is its own")
}

// A backend sets x-llm-d-request-dropped-reason on a response to a
// dispatched request (the third review's defect 4): the client must not
// see it, since the router's own table says the header is absent on a
// dispatch.
func TestDispatchedResponseDropsBackendDroppedReason(t *testing.T) {
	fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
	backend := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(flowcontrol.DroppedReasonHeader, "rejected-saturated")
		w.Header()["x-llm-d-request-dropped-reason"] = []string{"evicted"}
		io.WriteString(w, "tokens")
	})
	url := loopbackGateway(t, fc, backend)
	res, body := send(t, http.DefaultClient, url, 0)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "tokens", body)
	require.Empty(t, res.Header.Values(flowcontrol.DroppedReasonHeader), "header %q", res.Header)
	require.Equal(t, "10", res.Header.Get(headroom.HeaderName))
}

// ownedPath is one way a backend sends a header on a response.
type ownedPath string

const (
	pathHeader   ownedPath = "header"
	pathTrailer  ownedPath = "declared trailer"
	pathPrefixed ownedPath = "Trailer:-prefixed"
	path1xx      ownedPath = "103 Early Hints"
)

var ownedPaths = []ownedPath{pathHeader, pathTrailer, pathPrefixed, path1xx}

// spellings are the letter cases a backend may use for a name.
func spellings(name string) map[string]string {
	return map[string]string{
		"lower":     name,
		"canonical": http.CanonicalHeaderKey(name),
		"upper":     strings.ToUpper(name),
	}
}

// spoofingBackend sends key = "spoofed" on path, and X-Other = "kept" on
// the same path, which must reach the client.
func spoofingBackend(path ownedPath, key string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		switch path {
		case pathHeader:
			h[key] = []string{"spoofed"}
			h["X-Other"] = []string{"kept"}
		case pathTrailer:
			h["Trailer"] = []string{key + ", X-Other"}
		case pathPrefixed:
			h[http.TrailerPrefix+key] = []string{"spoofed"}
			h[http.TrailerPrefix+"X-Other"] = []string{"kept"}
		case path1xx:
			h[key] = []string{"spoofed"}
			h["X-Other"] = []string{"kept"}
			w.WriteHeader(http.StatusEarlyHints)
			clear(h) // net/http keeps the map for the final header
		}
		io.WriteString(w, "tokens")
		w.(http.Flusher).Flush()
		if path == pathTrailer {
			h[key] = []string{"spoofed"}
			h["X-Other"] = []string{"kept"}
		}
	})
}

// seen is everything a client received: informational headers, the final
// header, the trailers.
type seen struct {
	mu            sync.Mutex
	informational []http.Header
	header        http.Header
	trailer       http.Header
}

// fetch sends one request to url and records what came back.
func fetch(t *testing.T, client *http.Client, url string) *seen {
	t.Helper()
	s := &seen{}
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.informational = append(s.informational, http.Header(h).Clone())
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, url, nil)
	require.NoError(t, err)
	res, err := client.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "tokens", string(body))
	s.header, s.trailer = res.Header, res.Trailer
	return s
}

// checkOwned fails the test if a backend's "spoofed" value of a
// router-owned name reached the client anywhere, or if X-Other (which
// the backend sent on path) did not.
func (s *seen) checkOwned(t *testing.T, path ownedPath) {
	t.Helper()
	testhttp.CheckOwned(t, flowhttp.IsRouterOwned, append([]http.Header{s.header, s.trailer}, s.informational...)...)
	if len(s.header.Values(flowcontrol.DroppedReasonHeader)) > 0 {
		t.Errorf("a dispatched response carries %s %q", flowcontrol.DroppedReasonHeader, s.header.Values(flowcontrol.DroppedReasonHeader))
	}
	var other string
	switch path {
	case pathHeader:
		other = s.header.Get("X-Other")
	case pathTrailer, pathPrefixed:
		other = s.trailer.Get("X-Other")
	case path1xx:
		if len(s.informational) != 1 {
			t.Fatalf("got %d informational responses, want 1", len(s.informational))
		}
		other = s.informational[0].Get("X-Other")
	}
	if other != "kept" {
		t.Errorf("X-Other on the %s path = %q, want %q", path, other, "kept")
	}
}

// TestRouterOwnedOnEveryPath is the header table for flowhttp: every
// router-owned name, in every letter case, on every path, from a handler
// wrapped directly and from a backend behind an httputil.ReverseProxy.
func TestRouterOwnedOnEveryPath(t *testing.T) {
	for _, viaProxy := range []bool{false, true} {
		for _, path := range ownedPaths {
			for _, name := range flowhttp.RouterOwnedHeaders() {
				for spelling, key := range spellings(name) {
					t.Run(map[bool]string{false: "direct", true: "proxy"}[viaProxy]+"/"+string(path)+"/"+name+"/"+spelling, func(t *testing.T) {
						fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
						next := spoofingBackend(path, key)
						if viaProxy {
							be := testhttp.StartServer(t, next, false)
							next = proxyTo(t, be.URL, be.Client().Transport)
						}
						srv := testhttp.StartServer(t, newHandler(t, fc, next), false)
						s := fetch(t, srv.Client(), srv.URL)
						s.checkOwned(t, path)
						require.Equal(t, "10", s.header.Get(headroom.HeaderName), "the router's own headroom")
						require.Equal(t, "0", s.header.Get(flowhttp.QueueDurationHeader), "the router's own queue duration")
					})
				}
			}
		}
	}
}

// The class property: whatever a backend puts in a header map (the
// router-owned names in any case, as keys, behind http.TrailerPrefix or in
// Trailer declarations, among other headers), StripRouterOwned leaves no
// router-owned name in it and every other header as it was.
func TestStripRouterOwnedProperty(t *testing.T) {
	owned := flowhttp.RouterOwnedHeaders()
	others := []string{"X-Other", "content-type", "Trailer-Ish", "x-llm-d-flow-band", "X-Llm-D-Request-Dropped-Reason-2"}
	caseOf := func(t *rapid.T, label, s string) string {
		switch rapid.IntRange(0, 2).Draw(t, label) {
		case 1:
			return strings.ToUpper(s)
		case 2:
			return http.CanonicalHeaderKey(s)
		}
		return s
	}
	rapid.Check(t, func(t *rapid.T) {
		h := http.Header{}
		want := http.Header{}
		for i := range rapid.IntRange(0, 12).Draw(t, "keys") {
			_ = i
			switch rapid.IntRange(0, 3).Draw(t, "form") {
			case 0: // an owned name as a key
				h[caseOf(t, "case", rapid.SampledFrom(owned).Draw(t, "owned"))] = []string{"spoofed"}
			case 1: // behind the trailer prefix
				prefix := caseOf(t, "prefixCase", http.TrailerPrefix)
				h[prefix+caseOf(t, "case", rapid.SampledFrom(owned).Draw(t, "owned"))] = []string{"spoofed"}
			case 2: // another header, kept
				k := rapid.SampledFrom(others).Draw(t, "other")
				h[k] = []string{"kept"}
				want[k] = []string{"kept"}
			case 3: // another header behind the trailer prefix, kept
				k := http.TrailerPrefix + rapid.SampledFrom(others).Draw(t, "other")
				h[k] = []string{"kept"}
				want[k] = []string{"kept"}
			}
		}
		var declared, kept []string
		for range rapid.IntRange(0, 4).Draw(t, "declared") {
			if rapid.Bool().Draw(t, "declareOwned") {
				declared = append(declared, caseOf(t, "case", rapid.SampledFrom(owned).Draw(t, "owned")))
			} else {
				name := rapid.SampledFrom(others).Draw(t, "other")
				declared = append(declared, name)
				kept = append(kept, name)
			}
		}
		if len(declared) > 0 {
			h["Trailer"] = []string{strings.Join(declared, ", ")}
		}
		if len(kept) > 0 {
			want["Trailer"] = []string{strings.Join(kept, ", ")}
		}

		flowhttp.StripRouterOwned(h)
		for k := range h {
			if flowhttp.IsRouterOwned(k) {
				t.Fatalf("%q survived", k)
			}
		}
		if !mapsEqual(h, want) {
			t.Fatalf("after stripping\n got %q\nwant %q", h, want)
		}
	})
}
