package procbench

import (
	"context"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// Bench runs one Request per iteration against client, as two
// sub-benchmarks. mode=serial runs one request at a time; mode=parallel
// runs one on each of GOMAXPROCS goroutines at once (b.RunParallel),
// streams side by side on client's connection. Beside ns/op each reports
// cpu-ns/op, the process's CPU time (user and system, every goroutine's:
// client, server and garbage collector) per request, which other
// processes on the machine disturb less than the elapsed time.
//
// Call it once the connection is up, after a first Request, so that the
// dial is not timed.
func Bench(b *testing.B, client extprocv3.ExternalProcessorClient, check func(*extprocv3.ProcessingResponse) error) {
	ctx := context.Background()
	b.Run("mode=serial", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			if err := Request(ctx, client, check); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})
	b.Run("mode=parallel", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := Request(ctx, client, check); err != nil {
					b.Error(err)
					return
				}
			}
		})
		cpu.report(b)
	})
}

// cpuClock measures the process's CPU time from its start.
type cpuClock struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuClock {
	start, ok := CPUTime()
	return cpuClock{start, ok}
}

// report reports the CPU time since start per iteration, as cpu-ns/op.
func (c cpuClock) report(b *testing.B) {
	end, ok := CPUTime()
	if !c.ok || !ok || b.N == 0 {
		return
	}
	b.ReportMetric(float64(end-c.start)/float64(b.N), "cpu-ns/op")
}
