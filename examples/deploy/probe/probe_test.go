package probe_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicegate/sluice/examples/deploy/probe"
)

func get(h http.Handler) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	return rec
}

func TestProbes(t *testing.T) {
	var reason error
	var note string
	ready := probe.Ready(func() error { return reason })
	noted := probe.ReadyNote(func() error { return reason }, func() string { return note })
	for _, tc := range []struct {
		name   string
		h      http.Handler
		reason error
		code   int
		body   string
	}{
		{"alive", probe.Alive(), nil, http.StatusOK, "ok\n"},
		{"ready", ready, nil, http.StatusOK, "ready\n"},
		{"not ready", ready, errors.New("shutting down"), http.StatusServiceUnavailable, "not ready: shutting down\n"},
		{"ready, no note", noted, nil, http.StatusOK, "ready\n"},
		{"ready, degraded", noted, nil, http.StatusOK, "ready (fleet fallback)\n"},
		{"not ready, degraded", noted, errors.New("shutting down"), http.StatusServiceUnavailable, "not ready: shutting down\n"},
	} {
		reason = tc.reason
		note = ""
		if tc.name != "ready, no note" {
			note = "fleet fallback"
		}
		rec := get(tc.h)
		if rec.Code != tc.code || rec.Body.String() != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, rec.Code, rec.Body, tc.code, tc.body)
		}
		if got := rec.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", tc.name, got)
		}
		if got := rec.Header().Get("Content-Type"); got != "text/plain; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", tc.name, got)
		}
	}
}

func Example() {
	shuttingDown := false
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", probe.Alive())
	mux.Handle("GET /readyz", probe.Ready(func() error {
		if shuttingDown {
			return errors.New("shutting down")
		}
		return nil
	}))

	for _, down := range []bool{false, true} {
		shuttingDown = down
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		fmt.Print(rec.Code, " ", rec.Body)
	}
	// Output:
	// 200 ready
	// 503 not ready: shutting down
}
