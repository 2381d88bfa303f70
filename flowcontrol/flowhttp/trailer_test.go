package flowhttp_test

// A backend cannot send the router-owned names as trailers through the
// Handler, directly or through a reverse proxy, over HTTP/1 or HTTP/2.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
)

// ownedNames are the response headers the router owns.
var ownedNames = flowhttp.RouterOwnedHeaders()

// trailerSpoof is one way a backend tries to send router-owned names as
// trailers: declared in its Trailer header (set after the body, or not
// set, so that net/http would send the router's own value), or set through
// http.TrailerPrefix before or after the body. It also sends the trailer
// X-Other, which must pass.
type trailerSpoof struct {
	name    string
	declare []string
	before  map[string]string
	after   map[string]string
}

var trailerSpoofs = []trailerSpoof{
	{name: "declared, canonical, set after the body",
		declare: []string{"X-Other, X-Llm-D-Flow-Queue-Duration-Ms, X-Llm-D-Flow-Band-Headroom-Requests"},
		after:   map[string]string{"X-Other": "kept", "X-Llm-D-Flow-Queue-Duration-Ms": "999", "X-Llm-D-Flow-Band-Headroom-Requests": "999"}},
	{name: "declared, lower case, not set",
		declare: []string{"x-llm-d-flow-queue-duration-ms,x-llm-d-flow-band-headroom-requests", "x-llm-d-flow-band-headroom, x-other"},
		after:   map[string]string{"X-Other": "kept"}},
	{name: "declared, upper case, set after the body",
		declare: []string{" X-LLM-D-FLOW-BAND-HEADROOM ,X-Other"},
		after:   map[string]string{"X-Other": "kept", "X-Llm-D-Flow-Band-Headroom": "999"}},
	{name: "TrailerPrefix after the body",
		after: map[string]string{"Trailer:X-Other": "kept", "Trailer:x-llm-d-flow-queue-duration-ms": "999",
			"Trailer:X-LLM-D-FLOW-BAND-HEADROOM-REQUESTS": "999", "Trailer:X-Llm-D-Flow-Band-Headroom": "999"}},
	{name: "TrailerPrefix before the header, any case",
		before: map[string]string{"Trailer:X-Other": "kept", "TRAILER:x-llm-d-flow-queue-duration-ms": "999",
			"trailer:X-Llm-D-Flow-Band-Headroom-Requests": "999"}},
}

// trailerBackend answers with the spoof's trailers, router-owned headers
// too, and a body.
func trailerBackend(s trailerSpoof) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		for _, name := range ownedNames {
			h.Set(name, "997")
		}
		if len(s.declare) > 0 {
			h["Trailer"] = s.declare
		}
		for k, v := range s.before {
			h[k] = []string{v}
		}
		io.WriteString(w, "tokens")
		w.(http.Flusher).Flush()
		for k, v := range s.after {
			h[k] = []string{v}
		}
	})
}

// startServer starts h over HTTP/1 or HTTP/2 (TLS); it closes when the
// test ends.
func startServer(t *testing.T, h http.Handler, http2 bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = discardLog
	if http2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	t.Cleanup(srv.Client().CloseIdleConnections)
	return srv
}

func TestBackendTrailersNeverCarryRouterHeaders(t *testing.T) {
	for _, viaProxy := range []bool{false, true} {
		for _, http2 := range []bool{false, true} {
			proto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[http2]
			for _, spoof := range trailerSpoofs {
				t.Run(map[bool]string{false: "direct", true: "proxy"}[viaProxy]+"/"+proto+"/"+spoof.name, func(t *testing.T) {
					fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
					var next http.Handler = trailerBackend(spoof)
					if viaProxy {
						be := startServer(t, next, http2)
						next = proxyTo(t, be.URL, be.Client().Transport)
					}
					h, err := flowhttp.New(flowhttp.Config{Controller: fc, EmitProvisionalHeadroom: true}, next)
					require.NoError(t, err)
					srv := startServer(t, h, http2)

					res, err := srv.Client().Get(srv.URL)
					require.NoError(t, err)
					body, err := io.ReadAll(res.Body)
					require.NoError(t, err)
					res.Body.Close()
					require.Equal(t, "tokens", string(body))
					require.Equal(t, proto, res.Proto)

					want := map[string][]string{
						headroom.HeaderName:            {"10"},
						headroom.ProvisionalHeaderName: {"10"},
						flowhttp.QueueDurationHeader:   {"0"},
					}
					if diff := cmp.Diff(want, routerHeaders(res.Header)); diff != "" {
						t.Errorf("router headers (-want +got):\n%s", diff)
					}
					for k, vs := range res.Trailer {
						for _, name := range ownedNames {
							if strings.Contains(strings.ToLower(k), name) {
								t.Errorf("trailer %s: %q reached the client", k, vs)
							}
						}
					}
					if got := res.Trailer.Get("X-Other"); got != "kept" {
						t.Errorf("trailer X-Other = %q, want %q (trailers %q)", got, "kept", res.Trailer)
					}
				})
			}
		}
	}
}
