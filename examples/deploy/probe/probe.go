// Package probe serves the health endpoints a Kubernetes kubelet or a load
// balancer polls: liveness (/healthz) and readiness (/readyz), in plain
// text, never cached.
package probe

import (
	"fmt"
	"net/http"
)

// Alive answers a liveness probe: 200 "ok" for as long as the process
// serves at all.
func Alive() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		header(w)
		fmt.Fprintln(w, "ok")
	})
}

// Ready answers a readiness probe: 200 "ready" while ready returns nil,
// else 503 "not ready: " and the reason ready gives.
func Ready(ready func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		header(w)
		if err := ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ready")
	})
}

// ReadyNote answers a readiness probe as [Ready] does, and while ready
// returns nil and note returns a non-empty string, answers 200 "ready (" the
// note ")": a service that serves in a degraded mode stays in rotation and
// says how.
func ReadyNote(ready func() error, note func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		header(w)
		if err := ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		if n := note(); n != "" {
			fmt.Fprintf(w, "ready (%s)\n", n)
			return
		}
		fmt.Fprintln(w, "ready")
	})
}

func header(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
}
