//go:build sluice_pprof

package main

import (
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux
	"os"
)

// With the sluice_pprof build tag (cmd/sluice-loadbench -profile builds
// the gateway so), the gateway serves pprof on SLUICE_PPROF_LISTEN, a
// loopback address of its own. A normal build has no such listener.
func init() {
	if addr := os.Getenv("SLUICE_PPROF_LISTEN"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
