//go:build !unix

package procbench

import "time"

// CPUTime returns the CPU time, user and system, that this process has
// used so far, and whether the platform reports it: here it does not.
func CPUTime() (time.Duration, bool) { return 0, false }
