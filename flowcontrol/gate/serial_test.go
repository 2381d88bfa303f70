package gate_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// ExampleSerial runs a gate in a router that has no flow controller: a
// token budget of 100 tokens in flight, asked once per request.
func ExampleSerial() {
	budget, err := gate.Concurrency(gate.ConcurrencyConfig{Mode: gate.ModeTokens, MaxTokenConcurrency: 100})
	if err != nil {
		panic(err)
	}
	s, err := gate.NewSerial(budget, nil)
	if err != nil {
		panic(err)
	}
	big, ok := s.TryAcquire(0, 120) // under the budget when asked: admitted
	fmt.Println("120 tokens:", ok)
	_, ok = s.TryAcquire(0, 10) // the budget is spent
	fmt.Println("10 more:", ok)
	changed := s.Changed()
	big.Done(true) // the request ended
	<-changed      // a refused caller would wake here, and ask again
	small, ok := s.TryAcquire(0, 10)
	fmt.Println("10 after it ended:", ok)
	small.Done(true)
	// Output:
	// 120 tokens: true
	// 10 more: false
	// 10 after it ended: true
}

func newSerial(t *testing.T, g gate.Gate) *gate.Serial {
	t.Helper()
	s, err := gate.NewSerial(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSerialCountsCostAndGivesItBack: a metered gate hears Took with the
// request's cost and Returned with exactly that cost, once, whatever the
// number of Done calls.
func TestSerialCountsCostAndGivesItBack(t *testing.T) {
	budget, err := gate.Concurrency(gate.ConcurrencyConfig{Mode: gate.ModeHybrid, MaxConcurrency: 3, MaxTokenConcurrency: 50})
	if err != nil {
		t.Fatal(err)
	}
	s := newSerial(t, budget)
	a, _ := s.TryAcquire(1, 30)
	b, _ := s.TryAcquire(1, 0) // a cost below 1 counts as 1
	if n, c := budget.InFlight(); n != 2 || c != 31 {
		t.Fatalf("InFlight = %d, %d; want 2, 31", n, c)
	}
	a.Done(true)
	a.Done(true) // a second Done does nothing
	b.Done(false)
	if n, c := budget.InFlight(); n != 0 || c != 0 {
		t.Fatalf("InFlight after Done = %d, %d; want 0, 0", n, c)
	}
}

// TestSerialReturnsAStartThatNeverRan: the saturation gate keeps the start
// of a request that ran until the next metrics, and takes back one that
// never reached a model server.
func TestSerialReturnsAStartThatNeverRan(t *testing.T) {
	clock := newClock()
	sat, err := gate.Saturation(gate.SaturationConfig{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	s, err := gate.NewSerial(sat, clock)
	if err != nil {
		t.Fatal(err)
	}
	sat.Update("a", gate.Metrics{Waiting: 3}) // room for 2 starts
	ran, ok1 := s.TryAcquire(0, 1)
	never, ok2 := s.TryAcquire(0, 1)
	if _, ok3 := s.TryAcquire(0, 1); !ok1 || !ok2 || ok3 {
		t.Fatalf("starts granted %v %v %v, want the room of 2", ok1, ok2, ok3)
	}
	ran.Done(true)
	if _, ok := s.TryAcquire(0, 1); ok {
		t.Fatal("a request that ran gave its start back before the next metrics")
	}
	never.Done(false)
	if _, ok := s.TryAcquire(0, 1); !ok {
		t.Fatal("a start that never ran did not come back")
	}
}

// TestSerialTellsFirstTokens: an adaptive gate hears a first token at once
// and does not learn from it again at Done.
func TestSerialTellsFirstTokens(t *testing.T) {
	clock := newClock()
	ad, err := gate.Adaptive(gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: 4, MinLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := gate.NewSerial(ad, clock)
	if err != nil {
		t.Fatal(err)
	}
	var held []*gate.Start
	for range 4 {
		st, ok := s.TryAcquire(0, 1)
		if !ok {
			t.Fatal("refused under the limit")
		}
		held = append(held, st)
	}
	clock.Advance(3 * time.Second) // far above the target
	for _, st := range held {
		st.FirstToken()
	}
	cut := ad.Limit()
	if cut >= 4 {
		t.Fatalf("limit %d after slow first tokens, want it cut below 4", cut)
	}
	for _, st := range held {
		st.Done(true)
	}
	if ad.Limit() != cut {
		t.Fatalf("limit %d after Done, want %d: the first tokens were heard already", ad.Limit(), cut)
	}
}

// TestSerialRefusesAGateBoundElsewhere: a gate serves one controller, be it
// a flow controller or a Serial.
func TestSerialRefusesAGateBoundElsewhere(t *testing.T) {
	g := gate.MaxInFlight(1)
	mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	if _, err := gate.NewSerial(g, nil); err == nil || !strings.Contains(err.Error(), "MaxInFlight(1)") {
		t.Fatalf("NewSerial of a gate a controller holds: %v", err)
	}
	free := gate.MaxInFlight(1)
	newSerial(t, free)
	if _, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: free}); err == nil {
		t.Fatal("a controller took a gate a Serial holds")
	}
}

// TestSerialIsSafeForConcurrentUse: under the race detector, callers on
// many goroutines never hold more slots than the gate has.
func TestSerialIsSafeForConcurrentUse(t *testing.T) {
	const limit = 3
	s := newSerial(t, gate.MaxInFlight(limit))
	var held, most atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				st, ok := s.TryAcquire(0, 1)
				if !ok {
					continue
				}
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				held.Add(-1)
				st.Done(true)
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m > limit || m < 1 {
		t.Fatalf("at most %d held at once, want 1..%d", m, limit)
	}
	if got := s.Saturation(); got != 0 {
		t.Fatalf("saturation %v after every Done, want 0", got)
	}
}

// TestSerialChangedWakesOnDone: a caller waiting on Changed wakes at the
// next Done; a Done with nobody waiting allocates nothing.
func TestSerialChangedWakesOnDone(t *testing.T) {
	s := newSerial(t, gate.MaxInFlight(1))
	st, _ := s.TryAcquire(0, 1)
	changed := s.Changed()
	if _, ok := s.TryAcquire(0, 1); ok {
		t.Fatal("a second start under MaxInFlight(1)")
	}
	select {
	case <-changed:
		t.Fatal("Changed closed before any Done")
	default:
	}
	st.Done(true)
	select {
	case <-changed:
	default:
		t.Fatal("Changed still open after Done")
	}
	if n := testing.AllocsPerRun(100, func() {
		st, _ := s.TryAcquire(0, 1)
		st.Done(true)
	}); n > 1 {
		t.Fatalf("%v allocations per start and Done with nobody waiting, want the Start's 1 at most", n)
	}
}
