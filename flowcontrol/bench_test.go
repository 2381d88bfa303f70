package flowcontrol_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// The baselines are golang.org/x/sync/semaphore: BenchmarkSemaphore/mode=X
// is the figure BenchmarkEnqueueAndWait/mode=X is compared against, and
// BenchmarkSemaphoreDrain that of BenchmarkBacklogDrain/mode=goroutines. Compare
// them with:
//
//	go test -run '^$' -bench 'EnqueueAndWait|Semaphore|BacklogDrain|CapacitySnapshot' -count 5 ./flowcontrol/ | tee new.txt
//	benchstat new.txt

const contendedGoroutines, contendedSlots = 64, 8

// benchController returns a one-band controller; it is closed at cleanup.
func benchController(b *testing.B, gt gate.Gate) *flowcontrol.FlowController {
	b.Helper()
	fc := newBenchController(b, gt)
	b.Cleanup(fc.Close)
	return fc
}

func newBenchController(b *testing.B, gt gate.Gate) *flowcontrol.FlowController {
	return newFairBenchController(b, gt, nil)
}

func newFairBenchController(b *testing.B, gt gate.Gate, fair flowcontrol.Fairness) *flowcontrol.FlowController {
	b.Helper()
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 0, RequestCapacity: capacity.Bounded(1 << 20), Fairness: fair},
		},
		Gate: gt,
	})
	if err != nil {
		b.Fatal(err)
	}
	return fc
}

// BenchmarkEnqueueAndWait measures one admission: enqueue, dispatch, Done.
// mode=immediate: one goroutine, room always available (baseline:
// BenchmarkSemaphore/mode=immediate). mode=contended/g=64: 64 goroutines over
// MaxInFlight(8) (baseline: BenchmarkSemaphore/mode=contended/g=64).
func BenchmarkEnqueueAndWait(b *testing.B) {
	ctx := context.Background()
	req := flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "bench", Priority: 0}, ByteSize: 100}
	b.Run("mode=immediate", func(b *testing.B) {
		fc := benchController(b, gate.MaxInFlight(1))
		b.ReportAllocs()
		for b.Loop() {
			a, err := fc.EnqueueAndWait(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			a.Done()
		}
	})
	b.Run("mode=contended/g=64", func(b *testing.B) {
		fc := benchController(b, gate.MaxInFlight(contendedSlots))
		b.ReportAllocs()
		runContended(b, func() {
			a, err := fc.EnqueueAndWait(ctx, req)
			if err != nil {
				panic(err)
			}
			a.Done()
		})
	})
}

// BenchmarkSemaphore is the baseline of BenchmarkEnqueueAndWait: a
// golang.org/x/sync/semaphore Acquire and Release, alone (mode=immediate)
// and with 64 goroutines over a weight of 8 (mode=contended/g=64).
// mode=immediate/with=handle adds what the semaphore does without and
// EnqueueAndWait cannot: a fresh handle per admission.
func BenchmarkSemaphore(b *testing.B) {
	ctx := context.Background()
	b.Run("mode=immediate", func(b *testing.B) {
		sem := semaphore.NewWeighted(1)
		b.ReportAllocs()
		for b.Loop() {
			if err := sem.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			sem.Release(1)
		}
	})
	// The floor of an API that hands each admission a fresh handle, as
	// EnqueueAndWait must (an Admission's Done has an effect only once, so
	// its memory is never reused while a pointer to it may remain): the
	// semaphore, plus a 64-byte handle per op taken from 31-entry slabs, as
	// the controller takes its Admissions.
	b.Run("mode=immediate/with=handle", func(b *testing.B) {
		sem := semaphore.NewWeighted(1)
		var slab []handle
		b.ReportAllocs()
		for b.Loop() {
			if err := sem.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			if len(slab) == 0 {
				slab = make([]handle, 31)
			}
			h := &slab[0]
			slab = slab[1:]
			h.sem, h.id = sem, "bench"
			handleSink = h
			sem.Release(1)
		}
	})
	b.Run("mode=contended/g=64", func(b *testing.B) {
		sem := semaphore.NewWeighted(contendedSlots)
		b.ReportAllocs()
		runContended(b, func() {
			if err := sem.Acquire(ctx, 1); err != nil {
				panic(err)
			}
			sem.Release(1)
		})
	})
}

// BenchmarkSemaphoreDrain is the baseline of BenchmarkBacklogDrain/n=100000:
// the same drain through a golang.org/x/sync/semaphore of weight 64 — n
// goroutines queued in its Acquire behind every unit held, then released,
// each releasing its unit at once — a chain of Release → wake-up with no
// priorities, flows or capacities. It reports dispatches/s.
func BenchmarkSemaphoreDrain(b *testing.B) {
	const n, slots = 100_000, 64
	ctx := context.Background()
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		sem := semaphore.NewWeighted(slots)
		if err := sem.Acquire(ctx, slots); err != nil {
			b.Fatal(err)
		}
		var queued atomic.Int64
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				queued.Add(1)
				if err := sem.Acquire(ctx, 1); err != nil {
					panic(err)
				}
				sem.Release(1)
			})
		}
		// Every goroutine has counted itself; let each reach its wait.
		for queued.Load() < n {
			runtime.Gosched()
		}
		for range 100 {
			runtime.Gosched()
		}
		b.StartTimer()
		start := time.Now()
		sem.Release(slots)
		wg.Wait()
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "dispatches/s")
}

// handle is an Admission-sized handle (64 bytes, pointers inside) for
// BenchmarkSemaphore/mode=immediate/with=handle.
type handle struct {
	sem *semaphore.Weighted
	id  string
	_   [5]int64 // the rest of an Admission's 64 bytes
}

var handleSink *handle

// runContended runs op b.N times in total, spread over contendedGoroutines
// goroutines.
func runContended(b *testing.B, op func()) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range contendedGoroutines {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				op()
			}
		})
	}
	wg.Wait()
}

// BenchmarkBacklogDrain queues n waiters behind a closed gate, then opens it
// and measures until every waiter has been dispatched and called Done. Each
// waiter calls Done at once, so the drain is a chain of Done → dispatch →
// wake-up through MaxInFlight(64). It reports dispatches/s. flows=1000
// spreads the waiters over a thousand flows under a fair policy.
//
// mode=goroutines parks a goroutine per waiter in EnqueueAndWait; its
// baseline is BenchmarkSemaphoreDrain, the same drain through a semaphore.
// mode=submit queues the waiters with Submit, whose callback calls Done: the
// chain runs on the goroutine that opened the gate, so it measures the
// controller alone, and n=1000000 against n=10000 shows what a backlog a
// hundred times larger, cold in cache, costs per dispatch.
func BenchmarkBacklogDrain(b *testing.B) {
	for _, bc := range []struct {
		name   string
		n      int
		flows  int
		fair   flowcontrol.Fairness
		submit bool
	}{
		{"mode=goroutines/n=100000", 100_000, 1, nil, false},
		{"mode=goroutines/n=100000/flows=1000/policy=round-robin", 100_000, 1000, flowcontrol.RoundRobin(), false},
		{"mode=goroutines/n=100000/flows=1000/policy=deficit-round-robin", 100_000, 1000, flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{}), false},
		{"mode=submit/n=10000", 10_000, 1, nil, true},
		{"mode=submit/n=1000000", 1_000_000, 1, nil, true},
		{"mode=submit/n=100000/flows=1000/policy=round-robin", 100_000, 1000, flowcontrol.RoundRobin(), true},
		{"mode=submit/n=100000/flows=1000/policy=deficit-round-robin", 100_000, 1000, flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{}), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			const slots = 64
			n := bc.n
			ids := flowIDs(bc.flows)
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				fc := newFairBenchController(b, gate.MaxInFlight(slots), bc.fair)
				// Hold every slot so that the waiters queue.
				blockers := make([]*flowcontrol.Admission, slots)
				for i := range blockers {
					a, err := fc.EnqueueAndWait(ctx, flowcontrol.Request{})
					if err != nil {
						b.Fatal(err)
					}
					blockers[i] = a
				}
				var wg sync.WaitGroup
				var ended atomic.Int64
				started := func(a *flowcontrol.Admission, err error) {
					if err != nil {
						panic(err)
					}
					ended.Add(1)
					a.Done()
				}
				for i := range n {
					req := flowcontrol.Request{Key: flowcontrol.FlowKey{ID: ids[i%len(ids)]}}
					if bc.submit {
						fc.Submit(ctx, req, started)
						continue
					}
					wg.Go(func() {
						a, err := fc.EnqueueAndWait(ctx, req)
						if err != nil {
							panic(err)
						}
						a.Done()
					})
				}
				for {
					s, _ := fc.CapacitySnapshot(0)
					if s.QueuedRequests == int64(n) {
						break
					}
					runtime.Gosched()
				}
				b.StartTimer()
				start := time.Now()
				for _, a := range blockers {
					a.Done()
				}
				wg.Wait()
				elapsed += time.Since(start)
				b.StopTimer()
				if bc.submit && ended.Load() != int64(n) {
					b.Fatalf("%d of %d waiters dispatched", ended.Load(), n)
				}
				fc.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "dispatches/s")
		})
	}
}

// flowIDs returns n distinct flow IDs.
func flowIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "tenant-" + strconv.Itoa(i)
	}
	return ids
}

// BenchmarkFairness measures one steady-state step of a band holding about
// four waiters per flow: a Submit that queues, and a Done that dispatches
// the head the fairness policy picks, through MaxInFlight(1). Its baseline
// is the same policy at flows=1: a policy's cost per dispatch should not
// grow with the number of flows. Four waiters per flow make the queue's
// memory grow with the flows too (40,000 waiters at flows=10000), so
// flows=1/waiters=40000 is the second baseline: one flow, the same memory,
// which separates what the policy costs from what a larger queue costs in
// cache misses.
func BenchmarkFairness(b *testing.B) {
	for _, fair := range []flowcontrol.Fairness{
		flowcontrol.GlobalStrict(),
		flowcontrol.RoundRobin(),
		flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{}),
	} {
		name := strings.TrimSuffix(fair.TypeName(), "-fairness-policy")
		for _, bc := range []struct{ flows, waiters int }{{1, 4}, {100, 400}, {10_000, 40_000}, {1, 40_000}} {
			flows := bc.flows
			sub := "policy=" + name + "/flows=" + strconv.Itoa(flows)
			if bc.waiters != 4*flows {
				sub += "/waiters=" + strconv.Itoa(bc.waiters)
			}
			b.Run(sub, func(b *testing.B) {
				fc := newFairBenchController(b, gate.MaxInFlight(1), fair)
				defer fc.Close()
				reqs := make([]flowcontrol.Request, flows)
				for i, id := range flowIDs(flows) {
					// No cost (each counts 1), so that every policy keeps
					// the band at four waiters per flow: with uneven costs,
					// deficit round robin empties the cheap flows in one
					// turn and the steady state is another one.
					reqs[i] = flowcontrol.Request{Key: flowcontrol.FlowKey{ID: id}}
				}
				var cur *flowcontrol.Admission
				started := func(a *flowcontrol.Admission, err error) {
					switch {
					case errors.Is(err, flowcontrol.ErrRejectedShuttingDown): // the deferred Close
					case err != nil:
						panic(err)
					default:
						cur = a
					}
				}
				ctx := context.Background()
				fc.Submit(ctx, reqs[0], started) // takes the one slot
				for i := range bc.waiters {
					fc.Submit(ctx, reqs[i%flows], started)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					fc.Submit(ctx, reqs[i%flows], started)
					cur.Done() // starts the next head
					i++
				}
			})
		}
	}
}

// BenchmarkCapacitySnapshot reads one band's snapshot. mode=serial reads an
// idle controller; mode=parallel-traffic reads from every P (b.RunParallel)
// while another goroutine keeps requests moving through the band.
func BenchmarkCapacitySnapshot(b *testing.B) {
	b.Run("mode=serial", func(b *testing.B) {
		fc := benchController(b, nil)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := fc.CapacitySnapshot(0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mode=parallel-traffic", func(b *testing.B) {
		fc := benchController(b, gate.MaxInFlight(1))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { driveTraffic(fc, stop) })
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := fc.CapacitySnapshot(0); err != nil {
					panic(err)
				}
			}
		})
		b.StopTimer()
		close(stop)
		wg.Wait()
	})
}

// driveTraffic keeps requests queueing and dispatching until stop closes: a
// holder keeps the only slot for a moment while a few requests queue behind
// it.
func driveTraffic(fc *flowcontrol.FlowController, stop <-chan struct{}) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for {
		select {
		case <-stop:
			wg.Wait()
			return
		default:
		}
		held, err := fc.EnqueueAndWait(ctx, flowcontrol.Request{ByteSize: 10})
		if err != nil {
			panic(err)
		}
		for range 4 {
			wg.Go(func() {
				if a, err := fc.EnqueueAndWait(ctx, flowcontrol.Request{ByteSize: 10}); err == nil {
					a.Done()
				}
			})
		}
		runtime.Gosched()
		held.Done()
		wg.Wait()
	}
}

// BenchmarkQueuedMemory reports the memory one waiting request holds, in
// bytes per queued request (B/queued): heap and goroutine stacks measured
// after a collection, with n requests queued behind a closed gate and with
// none. mode=submit queues through the non-blocking Submit;
// mode=enqueue-and-wait, the baseline, parks a goroutine per request. The
// requests carry no header map (a gateway's belongs to its server; the
// controller only refers to it) and no deadline. The requests are of one
// flow, or with flows=n each of its own, so that the difference between the
// two is what an active flow holds; the flow IDs are made before the first
// reading. With policy=slo-deadline the band orders its flows' queues by
// the slo-deadline policy, on heap queues, where a waiting request also holds
// the item that is its place in its queue (the FCFS band's, a FIFO queue,
// holds none).
func BenchmarkQueuedMemory(b *testing.B) {
	for _, bc := range []struct {
		mode, name string
		n          int
		manyFlows  bool
		policy     ordering.Policy
	}{
		{"submit", "1e5", 100_000, false, nil},
		{"submit", "1e5/flows=1e5", 100_000, true, nil},
		{"submit", "1e6", 1_000_000, false, nil},
		{"submit", "1e5/policy=slo-deadline", 100_000, false, ordering.SLODeadline()},
		{"enqueue-and-wait", "1e5", 100_000, false, nil},
	} {
		b.Run("mode="+bc.mode+"/n="+bc.name, func(b *testing.B) {
			ids := []string{"tenant"}
			if bc.manyFlows {
				ids = flowIDs(bc.n)
			}
			for range b.N {
				b.StopTimer()
				before := memInUse()
				fc, err := flowcontrol.New(flowcontrol.Config{
					Bands: []flowcontrol.BandConfig{{Priority: 0, Policy: bc.policy}},
					Gate:  gate.MaxInFlight(0),
				})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				var wg sync.WaitGroup
				for i := range bc.n {
					r := flowcontrol.Request{Key: flowcontrol.FlowKey{ID: ids[i%len(ids)]}}
					if bc.mode == "submit" {
						fc.Submit(context.Background(), r, func(*flowcontrol.Admission, error) {})
						continue
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, _ = fc.EnqueueAndWait(context.Background(), r)
					}()
				}
				for s, _ := fc.CapacitySnapshot(0); s.QueuedRequests < int64(bc.n); s, _ = fc.CapacitySnapshot(0) {
					runtime.Gosched()
				}
				b.StopTimer()
				b.ReportMetric(float64(memInUse()-before)/float64(bc.n), "B/queued")
				fc.Close()
				wg.Wait()
				b.StartTimer()
			}
		})
	}
}

// memInUse returns the bytes of live heap and goroutine stacks after a
// collection. It collects twice: the first moves the controller's pool of
// recycled waiters to its victim cache, the second frees it, so a waiter
// pooled by an earlier iteration is not counted before and reused after.
func memInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}
