package flowhttp

import (
	"net/http"
	"slices"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/internal/header"
)

// routerOwned is the one list of the response headers the router owns. It
// lives here, not in headroom or flowcontrol, because this is the lowest
// package that sees all four names (headroom cannot import flowcontrol),
// and every proxy of the module (the gateway, the ext_proc adapter)
// imports this package already.
var routerOwned = [...]string{
	headroom.HeaderName,
	headroom.ProvisionalHeaderName,
	flowcontrol.DroppedReasonHeader,
	QueueDurationHeader,
}

// RouterOwnedHeaders returns the response headers only the router may set,
// in lower case: x-llm-d-flow-band-headroom-requests, its provisional name
// x-llm-d-flow-band-headroom, x-llm-d-request-dropped-reason and
// x-llm-d-flow-queue-duration-ms. A backend's copy of any of them, in any
// letter case, is removed from every response path — the header, the 1xx
// headers, the trailers (declared, or set through http.TrailerPrefix) —
// before the router sets its own; [Handler] does so, and so must any proxy
// that stamps the router's headers by other means (an Envoy ext_proc
// adapter removes them in its response-headers and response-trailers
// mutations). The slice is a fresh copy, the caller's to keep.
func RouterOwnedHeaders() []string { return slices.Clone(routerOwned[:]) }

// IsRouterOwned reports whether name is one of [RouterOwnedHeaders],
// ignoring ASCII letter case, or such a name behind http.TrailerPrefix
// ("Trailer:x-llm-d-request-dropped-reason"), net/http's key for a trailer
// that was not declared.
func IsRouterOwned(name string) bool {
	const prefix = http.TrailerPrefix
	if len(name) > len(prefix) && header.EqualFold(name[:len(prefix)], prefix) {
		name = name[len(prefix):]
	}
	for _, owned := range routerOwned {
		if header.EqualFold(name, owned) {
			return true
		}
	}
	return false
}

// StripRouterOwned deletes from h every copy of [RouterOwnedHeaders], in
// every form [headroom.Strip] removes: keys in any letter case, keys behind
// http.TrailerPrefix, and the names in the Trailer declarations. Call it
// on a backend's response (an httputil.ReverseProxy's ModifyResponse: its
// Header and its Trailer) and on each informational (1xx) header before it
// is forwarded. A nil h is left alone; it allocates nothing unless it
// rewrites a Trailer declaration.
func StripRouterOwned(h http.Header) { headroom.Strip(h, routerOwned[:]...) }

// StripRouterOwnedResponse removes every router-owned header a backend
// sent from its response — the header, the declared trailers and the
// trailers that arrive with the end of the body (see
// [headroom.StripResponse]) — and returns nil: a reverse proxy's
// ModifyResponse in front of which a [Handler] stamps the router's own.
func StripRouterOwnedResponse(resp *http.Response) error {
	headroom.StripResponse(resp, routerOwned[:]...)
	return nil
}
