package gate_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// TestConcurrentScraper runs a scraper goroutine that refreshes, removes
// and re-adds endpoints while callers go through a controller gated by
// All(saturation, concurrency), on the real clock: run it with -race. Every
// request is dispatched (the scraper keeps refreshing the room), none
// overtakes the budget, and every count returns to zero.
func TestConcurrentScraper(t *testing.T) {
	sat, err := gate.Saturation(gate.SaturationConfig{MetricsStalenessThreshold: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	budget, err := gate.Concurrency(gate.ConcurrencyConfig{Mode: gate.ModeHybrid, MaxConcurrency: 4, MaxTokenConcurrency: 300})
	if err != nil {
		t.Fatal(err)
	}
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.All(sat, budget)})

	const callers, each = 8, 200
	var started, inFlight atomic.Int64
	stop := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Each endpoint reports room for 2; one of them leaves and
			// comes back now and then.
			sat.Update("a", gate.Metrics{Waiting: 3, KVCache: 0.4})
			if i%7 == 0 {
				sat.Remove("b")
			}
			sat.Update("b", gate.Metrics{Waiting: 3, KVCache: 0.4})
			_ = sat.Status()
			_ = sat.Saturation()
			runtime.Gosched()
		}
	}()

	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				adm, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{
					Key:  flowcontrol.FlowKey{ID: "t"},
					Cost: int64(1 + (c*each+i)%100),
				})
				if err != nil {
					t.Error(err)
					return
				}
				started.Add(1)
				if i%3 == 0 {
					adm.FirstToken()
				}
				if n := inFlight.Add(1); n > 4 {
					t.Errorf("%d requests in flight over a bound of 4", n)
				}
				inFlight.Add(-1)
				adm.Done()
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-scraped
	if got := started.Load(); got != callers*each {
		t.Fatalf("%d dispatched, want %d", got, callers*each)
	}
	if n, c := budget.InFlight(); n != 0 || c != 0 {
		t.Fatalf("budget holds %d requests and %d tokens after every Done", n, c)
	}
	if fc.InFlight() != 0 {
		t.Fatalf("controller holds %d", fc.InFlight())
	}
}
