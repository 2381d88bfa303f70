package headroom_test

// Router-owned names must not reach the client as trailers either: a
// backend that declares one in its Trailer header and sets it after the
// body, or sets one through http.TrailerPrefix, in any letter case, over
// HTTP/1 or HTTP/2, through Middleware or through a ReverseProxy with
// ModifyResponse.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/internal/testhttp"
)

// trailerSpoofs are the ways a backend tries to send a router-owned name
// as a trailer; each also sends the trailer X-Other, which must pass.
var trailerSpoofs = []testhttp.TrailerSpoof{
	{Name: "declared, canonical",
		Declare: []string{"X-Other, X-Llm-D-Flow-Band-Headroom-Requests"},
		After:   map[string]string{"X-Other": "kept", "X-Llm-D-Flow-Band-Headroom-Requests": "999"}},
	{Name: "declared, lower case, own value not set",
		// The stamped header is in the map: net/http would send the
		// router's own value again, as a trailer.
		Declare: []string{"x-llm-d-flow-band-headroom-requests,x-other"},
		After:   map[string]string{"X-Other": "kept"}},
	{Name: "declared, provisional, upper case, two lines",
		Declare: []string{"X-OTHER", " X-LLM-D-FLOW-BAND-HEADROOM ,\tx-llm-d-flow-band-headroom-requests "},
		After:   map[string]string{"X-Other": "kept", "X-Llm-D-Flow-Band-Headroom": "999", "X-Llm-D-Flow-Band-Headroom-Requests": "998"}},
	{Name: "TrailerPrefix after the body",
		After: map[string]string{"Trailer:X-Other": "kept", http.TrailerPrefix + headroom.HeaderName: "999"}},
	{Name: "TrailerPrefix, provisional, mixed case",
		After: map[string]string{"Trailer:X-Other": "kept", "Trailer:X-LLM-D-Flow-Band-HEADROOM": "999"}},
	{Name: "TrailerPrefix in lower case",
		After: map[string]string{"Trailer:X-Other": "kept", "trailer:x-llm-d-flow-band-headroom-requests": "999"}},
	{Name: "TrailerPrefix before the header",
		Before: map[string]string{"Trailer:X-Other": "kept", "Trailer:X-Llm-D-Flow-Band-Headroom-Requests": "999"}},
	{Name: "TrailerPrefix in lower case before the header",
		Before: map[string]string{"Trailer:X-Other": "kept", "tRaIlEr:x-llm-d-flow-band-headroom": "999"}},
}

// spoofingBackend answers with the spoof's trailers, a router-owned header
// too, and a body.
func spoofingBackend(s testhttp.TrailerSpoof) http.Handler {
	return s.Backend(map[string]string{"X-Model": "m1", headroom.HeaderName: "997"}, true)
}

// ownedTrailers returns the trailers res carries under a router-owned name,
// in any letter case.
func ownedTrailers(res *http.Response, owned ...string) http.Header {
	got := http.Header{}
	for k, vs := range res.Trailer {
		for _, name := range owned {
			if strings.EqualFold(k, name) || strings.Contains(strings.ToLower(k), strings.ToLower(name)) {
				got[k] = vs
			}
		}
	}
	return got
}

func TestBackendTrailersNeverCarryTheHeadroom(t *testing.T) {
	surfaces := []struct {
		name  string
		front func(t *testing.T, backend http.Handler, http2 bool) *httptest.Server
	}{
		{"Middleware", func(t *testing.T, backend http.Handler, http2 bool) *httptest.Server {
			bands := bandsOf(bounded(0, 100, 81))
			return testhttp.StartServer(t, admitted(0, headroom.Middleware(bands, backend, headroom.EmitProvisional)), http2)
		}},
		{"ModifyResponse", func(t *testing.T, backend http.Handler, http2 bool) *httptest.Server {
			bands := bandsOf(bounded(0, 100, 81))
			be := testhttp.StartServer(t, backend, http2)
			target, err := url.Parse(be.URL)
			require.NoError(t, err)
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.Transport = be.Client().Transport
			proxy.ErrorLog = testhttp.QuietLog
			proxy.ModifyResponse = headroom.ModifyResponse(bands, headroom.EmitProvisional)
			return testhttp.StartServer(t, admitted(0, proxy), http2)
		}},
	}
	for _, surface := range surfaces {
		for _, http2 := range []bool{false, true} {
			proto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[http2]
			for _, spoof := range trailerSpoofs {
				t.Run(surface.name+"/"+proto+"/"+spoof.Name, func(t *testing.T) {
					res := testhttp.FetchTokens(t, surface.front(t, spoofingBackend(spoof), http2), proto)
					want := map[string][]string{"X-Llm-D-Flow-Band-Headroom-Requests": {"19"}, "X-Llm-D-Flow-Band-Headroom": {"19"}}
					if diff := cmp.Diff(want, headroomValues(res.Header)); diff != "" {
						t.Errorf("headroom headers (-want +got):\n%s", diff)
					}
					if got := ownedTrailers(res, headroom.HeaderName, headroom.ProvisionalHeaderName); len(got) != 0 {
						t.Errorf("router-owned trailers reached the client: %q", got)
					}
					if got := res.Trailer.Get("X-Other"); got != "kept" {
						t.Errorf("trailer X-Other = %q, want the backend's %q (all trailers: %q)", got, "kept", res.Trailer)
					}
					for _, v := range res.Header.Values("Trailer") {
						if strings.Contains(strings.ToLower(v), "headroom") {
							t.Errorf("Trailer header %q declares a router-owned name", v)
						}
					}
				})
			}
		}
	}
}

// StripResponse removes the names it is given, and only those, from a
// response's header, its declared trailers and the trailers that arrive
// with the end of its body.
func TestStripResponse(t *testing.T) {
	body := io.NopCloser(strings.NewReader("done"))
	resp := &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"X-Owned": {"backend"}, "X-Other": {"kept"}, "Trailer": {"X-OWNED, X-Other"}},
		Trailer:    http.Header{"X-Owned": nil, "X-Other": nil},
		Body:       body,
	}
	headroom.StripResponse(resp, "x-owned")
	require.Equal(t, http.Header{"X-Other": {"kept"}, "Trailer": {"X-Other"}}, resp.Header)
	// What a transport fills in as the body ends.
	resp.Trailer = http.Header{"X-Owned": {"late"}, "x-owned": {"late"}, "X-Other": {"kept"}}
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "done", string(got))
	require.Equal(t, http.Header{"X-Other": {"kept"}}, resp.Trailer)
}

// StripResponse leaves the body of an HTTP/1 response of known length as
// it is, since no trailer can follow it, and watches the end of any body
// a trailer can follow: chunked, of unknown length, or HTTP/2's.
func TestStripResponseWrapsOnlyBodiesTrailersCanFollow(t *testing.T) {
	for _, tc := range []struct {
		name       string
		major      int
		length     int64
		encoding   []string
		trailer    http.Header
		wantAsItIs bool
	}{
		{"HTTP/1.1 with a Content-Length", 1, 4, nil, nil, true},
		{"HTTP/1.1 chunked", 1, -1, []string{"chunked"}, nil, false},
		{"HTTP/1.1 of unknown length", 1, -1, nil, nil, false},
		{"HTTP/1.1 with declared trailers", 1, 4, nil, http.Header{"X-Other": nil}, false},
		{"HTTP/2 with a content-length", 2, 4, nil, nil, false},
		{"no protocol given", 0, 4, nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := io.NopCloser(strings.NewReader("done"))
			resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: tc.major, ContentLength: tc.length,
				TransferEncoding: tc.encoding, Header: http.Header{}, Trailer: tc.trailer, Body: body}
			headroom.StripResponse(resp, "x-owned")
			if asItIs := resp.Body == body; asItIs != tc.wantAsItIs {
				t.Errorf("body left as it is: %v, want %v", asItIs, tc.wantAsItIs)
			}
		})
	}
}
