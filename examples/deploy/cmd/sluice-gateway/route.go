package main

import (
	"net/http"
	"sync/atomic"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// router sends inference requests (-inference-path) through admission and
// every other request straight to a backend: a model list, a health check
// or a tokenizer call costs the model servers little, must answer while
// they are saturated, and would otherwise queue behind the completions
// and end 429. A request that passes through is neither queued nor
// counted by the gate; the load balancer still counts it.
type router struct {
	inference config.InferenceRoutes
	admit     http.Handler // flowhttp, in front of the pool
	pass      http.Handler // the pool
	// refusing is set once shutdown's drain delay is over: the controller
	// then refuses inference requests (503 rejected-shutting-down), and
	// the router refuses the others.
	refusing *atomic.Bool
}

func (rt router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rt.inference.Match(r.Method, r.URL.Path) {
		rt.admit.ServeHTTP(w, r)
		return
	}
	if rt.refusing.Load() {
		flowhttp.ErrorRejection(http.StatusServiceUnavailable, "sluice-gateway: shutting down").Write(w)
		return
	}
	rt.pass.ServeHTTP(&ownedStripper{ResponseWriter: w}, r)
}

// ownedStripper removes the router-owned headers a backend sent from the
// informational (1xx) headers the proxy forwards and from the final
// header, as flowhttp's Handler does for an admitted request, so that a
// request that passed through carries none of them: it was not admitted,
// and nothing may claim it was. The proxy's ModifyResponse strips the
// final header and the trailers already.
type ownedStripper struct {
	http.ResponseWriter
	wrote bool // the final header is written
}

func (s *ownedStripper) WriteHeader(code int) {
	if !s.wrote {
		flowhttp.StripRouterOwned(s.Header())
		s.wrote = code >= 200 || code == http.StatusSwitchingProtocols
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *ownedStripper) Write(p []byte) (int, error) {
	if !s.wrote {
		flowhttp.StripRouterOwned(s.Header())
		s.wrote = true
	}
	return s.ResponseWriter.Write(p)
}

// Unwrap returns the wrapped writer, for http.ResponseController: the
// proxy flushes each write of a stream and hijacks an upgrade through it.
func (s *ownedStripper) Unwrap() http.ResponseWriter { return s.ResponseWriter }
