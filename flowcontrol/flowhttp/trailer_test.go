package flowhttp_test

// A backend cannot send the router-owned names as trailers through the
// Handler, directly or through a reverse proxy, over HTTP/1 or HTTP/2.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/internal/testhttp"
)

// ownedNames are the response headers the router owns.
var ownedNames = flowhttp.RouterOwnedHeaders()

// trailerSpoofs are the ways a backend tries to send router-owned names
// as trailers; each also sends the trailer X-Other, which must pass.
var trailerSpoofs = []testhttp.TrailerSpoof{
	{Name: "declared, canonical, set after the body",
		Declare: []string{"X-Other, X-Llm-D-Flow-Queue-Duration-Ms, X-Llm-D-Flow-Band-Headroom-Requests"},
		After:   map[string]string{"X-Other": "kept", "X-Llm-D-Flow-Queue-Duration-Ms": "999", "X-Llm-D-Flow-Band-Headroom-Requests": "999"}},
	{Name: "declared, lower case, not set",
		Declare: []string{"x-llm-d-flow-queue-duration-ms,x-llm-d-flow-band-headroom-requests", "x-llm-d-flow-band-headroom, x-other"},
		After:   map[string]string{"X-Other": "kept"}},
	{Name: "declared, upper case, set after the body",
		Declare: []string{" X-LLM-D-FLOW-BAND-HEADROOM ,X-Other"},
		After:   map[string]string{"X-Other": "kept", "X-Llm-D-Flow-Band-Headroom": "999"}},
	{Name: "TrailerPrefix after the body",
		After: map[string]string{"Trailer:X-Other": "kept", "Trailer:x-llm-d-flow-queue-duration-ms": "999",
			"Trailer:X-LLM-D-FLOW-BAND-HEADROOM-REQUESTS": "999", "Trailer:X-Llm-D-Flow-Band-Headroom": "999"}},
	{Name: "TrailerPrefix before the header, any case",
		Before: map[string]string{"Trailer:X-Other": "kept", "TRAILER:x-llm-d-flow-queue-duration-ms": "999",
			"trailer:X-Llm-D-Flow-Band-Headroom-Requests": "999"}},
}

// trailerBackend answers with the spoof's trailers, router-owned headers
// too, and a body.
func trailerBackend(s testhttp.TrailerSpoof) http.Handler {
	owned := make(map[string]string, len(ownedNames))
	for _, name := range ownedNames {
		owned[name] = "997"
	}
	return s.Backend(owned, false)
}

func TestBackendTrailersNeverCarryRouterHeaders(t *testing.T) {
	for _, viaProxy := range []bool{false, true} {
		for _, http2 := range []bool{false, true} {
			proto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[http2]
			for _, spoof := range trailerSpoofs {
				t.Run(map[bool]string{false: "direct", true: "proxy"}[viaProxy]+"/"+proto+"/"+spoof.Name, func(t *testing.T) {
					fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
					var next http.Handler = trailerBackend(spoof)
					if viaProxy {
						be := testhttp.StartServer(t, next, http2)
						next = proxyTo(t, be.URL, be.Client().Transport)
					}
					h := mustHandler(t, flowhttp.Config{Controller: fc, EmitProvisionalHeadroom: true}, next)
					srv := testhttp.StartServer(t, h, http2)

					res := testhttp.FetchTokens(t, srv, proto)

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
