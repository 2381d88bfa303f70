package flowcontrol

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// TestStartFastTakesNoLock: with a gate that counts its slots and nothing
// waiting, a request starts and ends without the controller's lock, which
// the test holds throughout; once a request waits, the next one queues
// behind it instead of taking a slot the waiter is owed.
func TestStartFastTakesNoLock(t *testing.T) {
	for _, gt := range []gate.Gate{gate.MaxInFlight(2), nil} {
		c, err := New(Config{Bands: []BandConfig{{Priority: 0}}, Gate: gt})
		if err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		finished := make(chan error)
		go func() {
			a, err := c.EnqueueAndWait(context.Background(), Request{Key: FlowKey{ID: "a"}})
			if err == nil {
				a.Done()
				a.Done() // only the first has an effect
			}
			finished <- err
		}()
		select {
		case err := <-finished:
			if err != nil {
				t.Fatalf("gate %v: %v", gt, err)
			}
		case <-time.After(time.Minute): // a failure bound, not a timing
			t.Fatalf("gate %v: an immediate admission waited for the controller's lock", gt)
		}
		c.mu.Unlock()
		if n := c.InFlight(); n != 0 {
			t.Fatalf("gate %v: %d in flight after Done, want 0", gt, n)
		}
		c.Close()
	}

	// MaxInFlight(1): a holder, then a waiter; a newcomer must not pass it.
	c, err := New(Config{Bands: []BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	holder, err := c.EnqueueAndWait(ctx, Request{})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	run := func(id string) {
		c.Submit(ctx, Request{Key: FlowKey{ID: id}}, func(a *Admission, err error) {
			if err != nil {
				t.Error(err)
				wg.Done()
				return
			}
			mu.Lock()
			order = append(order, id)
			mu.Unlock()
			a.Done()
			wg.Done()
		})
	}
	wg.Add(2)
	run("waiter")
	if c.fast.slow.Load() != 1 {
		t.Fatalf("slow = %d with one request queued, want 1", c.fast.slow.Load())
	}
	holder.Done() // dispatches the waiter, which ends in its callback
	run("newcomer")
	wg.Wait()
	if len(order) != 2 || order[0] != "waiter" {
		t.Fatalf("order %v, want the waiter first", order)
	}
	if c.fast.slow.Load() != 0 || c.InFlight() != 0 {
		t.Fatalf("slow %d, in flight %d at rest, want 0 and 0", c.fast.slow.Load(), c.InFlight())
	}
}

// TestFastPathLosesNoWakeUp races admissions that start without the lock
// against requests being queued and admissions ending without it: no
// request may be left waiting with a slot free, which would leave it queued
// here until the failure bound. Callbacks end their admissions from inside,
// through the parking path.
func TestFastPathLosesNoWakeUp(t *testing.T) {
	for _, slots := range []int{1, 3} {
		c, err := New(Config{Bands: []BandConfig{{Priority: 1}, {Priority: 0}}, Gate: gate.MaxInFlight(slots)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a failure bound
		const workers, each = 8, 2000
		var wg sync.WaitGroup
		var failed sync.Once
		for i := range workers {
			wg.Go(func() {
				for j := range each {
					r := Request{Key: FlowKey{ID: "f", Priority: (i + j) % 2}}
					if j%3 == 0 {
						done := make(chan struct{})
						c.Submit(ctx, r, func(a *Admission, err error) {
							if err == nil {
								a.Done()
							} else {
								failed.Do(func() { t.Errorf("slots %d: %v", slots, err) })
							}
							close(done)
						})
						<-done
						continue
					}
					a, err := c.EnqueueAndWait(ctx, r)
					if err != nil {
						failed.Do(func() { t.Errorf("slots %d: %v", slots, err) })
						return
					}
					a.Done()
				}
			})
		}
		wg.Wait()
		cancel()
		if c.fast.slow.Load() != 0 || c.InFlight() != 0 {
			t.Errorf("slots %d: slow %d, in flight %d at rest, want 0 and 0", slots, c.fast.slow.Load(), c.InFlight())
		}
		c.Close()
	}
}
