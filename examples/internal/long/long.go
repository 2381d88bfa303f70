// Package long says whether the examples' tests run their long simulations
// and real-time demos in full.
//
// By default `go test ./...` stays fast: a simulation test runs fewer seeds
// or a shorter horizon and still asserts what holds on it, and a comparison
// that needs every seed to hold runs only in full. Setting the environment
// variable SLUICE_LONG (to anything but "" or "0") runs every one of them
// as the examples' READMEs describe; .ci/run sets it.
package long

import "os"

// Var is the environment variable that turns the long runs on.
const Var = "SLUICE_LONG"

// Enabled reports whether Var asks for the long runs.
func Enabled() bool {
	v := os.Getenv(Var)
	return v != "" && v != "0"
}
