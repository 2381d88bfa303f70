//go:build unix

package procbench

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time, user and system, that this process has
// used so far, and whether the platform reports it.
func CPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
