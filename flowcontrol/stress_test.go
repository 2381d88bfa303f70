package flowcontrol_test

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// TestStressExactlyOneOutcome runs many goroutines against several bands with
// random cancellations, TTLs and deadlines on the real clock (it asserts
// nothing about timing), then closes the controller under load. Every
// request must get exactly one outcome, the observer must agree with the
// callers, admissions held must never exceed the gate, counters must return
// to zero, and no goroutine may be left inside the controller.
func TestStressExactlyOneOutcome(t *testing.T) {
	stress(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 5, RequestCapacity: bounded(12)},
			{Priority: 0, RequestCapacity: bounded(24), ByteCapacity: bounded(3000), Policy: ordering.EDF()},
			{Priority: -5, TTL: 2 * time.Millisecond},
		},
		RequestCapacity: bounded(30),
		DefaultTTL:      50 * time.Millisecond,
	}, 1)
}

// TestStressFlows is the same with a thousand flows, random costs, every
// fairness policy, cost capacities and fair admission displacing requests,
// half the requests admitted through Submit.
func TestStressFlows(t *testing.T) {
	stress(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 5, RequestCapacity: bounded(12), Fairness: flowcontrol.RoundRobin()},
			{Priority: 0, RequestCapacity: bounded(24), ByteCapacity: bounded(3000), CostCapacity: bounded(400),
				Policy: ordering.EDF(), Fairness: flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{Weights: map[string]int64{"f7": 4}})},
			{Priority: -5, TTL: 2 * time.Millisecond, FlowRequestCapacity: bounded(3)},
		},
		RequestCapacity: bounded(30),
		CostCapacity:    bounded(600),
		DefaultTTL:      50 * time.Millisecond,
	}, 1000)
}

// TestStressEviction is TestStressExactlyOneOutcome with in-flight
// eviction and a guarantee: revocations race the holders' Done, their
// Revoked and Err, cancellations, expiries and Close. Every revoked
// admission must be reported once to the Observer and once issued to
// Revocations, and end confirmed or timed out.
func TestStressEviction(t *testing.T) {
	stress(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 5, RequestCapacity: bounded(12), Guarantee: 0.5},
			{Priority: 0, RequestCapacity: bounded(24), Policy: ordering.EDF()},
			{Priority: -5, TTL: 2 * time.Millisecond},
		},
		RequestCapacity: bounded(30),
		DefaultTTL:      50 * time.Millisecond,
		Eviction:        &flowcontrol.Eviction{Below: 1, MaxPerDecision: 3, Grace: -1, Timeout: time.Millisecond},
	}, 1)
}

// numOutcomes is the number of outcomes, for arrays indexed by outcome.
const numOutcomes = int(flowcontrol.OutcomeEvictedPriority) + 1

// stress runs workers against a controller of cfg (its gate and observer
// set here), drawing each request's flow among flows IDs.
func stress(t *testing.T, cfg flowcontrol.Config, flows int) {
	const (
		workers  = 32
		requests = 10000 // before Close, which the load then runs into
		slots    = 4
	)
	// Every goroutine that exists now may outlive the test; no other may.
	baseline := goleak.IgnoreCurrent()

	var (
		observed [numOutcomes]atomic.Int64
		steps    [4]atomic.Int64 // by RevocationStep
	)
	cfg.Gate = gate.MaxInFlight(slots)
	cfg.Observer = func(ev flowcontrol.Event) { observed[ev.Outcome].Add(1) }
	var badVictim atomic.Value
	cfg.Revocations = func(r flowcontrol.Revocation) {
		steps[r.Step].Add(1)
		// Never a victim at or above the band it makes room for, and
		// eviction's only from the sheddable bands.
		if r.Victim.Priority >= r.For || r.Outcome == flowcontrol.OutcomeEvictedPriority && cfg.Eviction != nil && r.Victim.Priority >= cfg.Eviction.Below {
			badVictim.Store(r)
		}
	}
	fc, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}

	var (
		returned   [numOutcomes]atomic.Int64
		revoked    [numOutcomes]atomic.Int64 // admissions whose Err, after Done, names a revocation
		displacedN atomic.Int64              // returned rejected-saturated with ErrDisplaced
		held       atomic.Int64              // admissions returned and not yet Done
		overrun    atomic.Bool
		calls      atomic.Int64
	)
	priorities := []int{5, 0, -5, 3, 9} // 3 and 9 start unprovisioned
	// worker sends requests until Close rejects one.
	worker := func(seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 1))
		for {
			ctx, cancel := context.WithCancel(context.Background())
			switch rng.IntN(4) {
			case 0:
				ctx, cancel = context.WithTimeout(context.Background(), time.Duration(rng.IntN(5000))*time.Microsecond)
			case 1:
				spins := rng.IntN(50)
				go func() {
					for range spins {
						runtime.Gosched()
					}
					cancel()
				}()
			}
			req := flowcontrol.Request{
				Key:      flowcontrol.FlowKey{ID: "f" + strconv.Itoa(rng.IntN(flows)), Priority: priorities[rng.IntN(len(priorities))]},
				ByteSize: int64(rng.IntN(200)),
				Cost:     int64(rng.IntN(60)),
				TTL:      time.Duration(rng.IntN(20000)) * time.Microsecond,
			}
			calls.Add(1)
			var (
				a   *flowcontrol.Admission
				err error
			)
			if rng.IntN(2) == 0 {
				a, err = fc.EnqueueAndWait(ctx, req)
			} else {
				done := make(chan struct{})
				fc.Submit(ctx, req, func(adm *flowcontrol.Admission, e error) {
					a, err = adm, e
					close(done)
				})
				<-done
			}
			cancel()
			if err == nil {
				if held.Add(1) > slots {
					overrun.Store(true)
				}
				var stop <-chan struct{}
				if rng.IntN(2) == 0 {
					stop = a.Revoked() // racing the revocation
				}
				for range rng.IntN(20) {
					select {
					case <-stop:
					default:
						runtime.Gosched()
					}
				}
				held.Add(-1)
				a.Done()
				if rng.IntN(8) == 0 {
					a.Done()
				}
				returned[flowcontrol.OutcomeDispatched].Add(1)
				if err := a.Err(); err != nil { // settled once Done
					var rej *flowcontrol.RejectionError
					if !errors.As(err, &rej) || rej.RetryAfter <= 0 {
						t.Errorf("a revoked admission's Err: %v", err)
						return
					}
					revoked[rej.Outcome].Add(1)
				}
				continue
			}
			var rej *flowcontrol.RejectionError
			if a != nil || !errors.As(err, &rej) || rej.Outcome == flowcontrol.OutcomeDispatched {
				t.Errorf("EnqueueAndWait: admission %v, error %v", a, err)
				return
			}
			returned[rej.Outcome].Add(1)
			if errors.Is(rej, flowcontrol.ErrDisplaced) {
				displacedN.Add(1)
			}
			if rej.Outcome == flowcontrol.OutcomeRejectedShuttingDown {
				return
			}
		}
	}

	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { worker(uint64(i)) })
	}
	stopSide := make(chan struct{})
	var side sync.WaitGroup
	side.Go(func() { // nudges, provisioning and readers alongside
		for {
			select {
			case <-stopSide:
				return
			default:
			}
			fc.Nudge()
			if n := fc.InFlight(); n > slots {
				overrun.Store(true)
			}
			for _, p := range []int{5, 0, -5} {
				if s, err := fc.CapacitySnapshot(p); err != nil || !s.RequestCapacity.Allows(s.QueuedRequests) || s.QueuedRequests < 0 || s.QueuedBytes < 0 ||
					!s.CostCapacity.Allows(s.QueuedCost) || s.QueuedCost < 0 {
					t.Errorf("snapshot %v %v", s, err)
				}
			}
			runtime.Gosched()
		}
	})

	// Let the load run, provision a band under it, then close under it.
	for calls.Load() < requests/2 {
		runtime.Gosched()
	}
	if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: 3, TTL: time.Millisecond}); err != nil {
		t.Errorf("ProvisionBand: %v", err)
	}
	for calls.Load() < requests {
		runtime.Gosched()
	}
	fc.Close()
	wg.Wait()
	close(stopSide)
	side.Wait()

	if overrun.Load() {
		t.Error("more admissions held than the gate allows")
	}
	var total, evictions int64
	for o := range returned {
		r, ob := returned[o].Load()+revoked[o].Load(), observed[o].Load()
		if r != ob {
			t.Errorf("%v: %d returned or revoked, %d observed", flowcontrol.Outcome(o), r, ob)
		}
		total += returned[o].Load()
		evictions += revoked[o].Load()
	}
	issued, ended := steps[flowcontrol.RevocationIssued].Load(), steps[flowcontrol.RevocationConfirmed].Load()+steps[flowcontrol.RevocationTimedOut].Load()
	if issued != evictions || ended != evictions {
		t.Errorf("%d admissions revoked; Revocations heard %d issued, %d ended", evictions, issued, ended)
	}
	if r := badVictim.Load(); r != nil {
		t.Errorf("a victim at or above the band it was revoked for, or not sheddable: %+v", r)
	}
	if cfg.Eviction != nil && evictions == 0 {
		t.Error("eviction under load revoked nothing")
	}
	if total != calls.Load() {
		t.Errorf("%d calls, %d outcomes", calls.Load(), total)
	}
	for o := range returned {
		t.Logf("%v: %d returned, %d revoked", flowcontrol.Outcome(o), returned[o].Load(), revoked[o].Load())
	}
	if returned[flowcontrol.OutcomeRejectedShuttingDown].Load() == 0 {
		t.Error("Close under load rejected nothing")
	}
	if flows > 1 && displacedN.Load() == 0 {
		t.Error("a thousand flows against full bands displaced nothing")
	}
	if n := fc.InFlight(); n != 0 {
		t.Errorf("InFlight %d after every admission is done", n)
	}
	for _, p := range []int{5, 3, 0, -5} {
		if s, err := fc.CapacitySnapshot(p); err != nil || s.QueuedRequests != 0 || s.QueuedBytes != 0 || s.QueuedCost != 0 {
			t.Errorf("band %d: %v %v", p, s, err)
		}
	}
	goleak.VerifyNone(t, baseline)
}

// stressRequests sizes TestStressPanickingCallbacks; .ci/run sets it to 10⁶
// under -race, the default keeps go test ./... quick.
var stressRequests = flag.Int("stress.requests", 20000, "requests TestStressPanickingCallbacks submits")

// TestStressPanickingCallbacks submits -stress.requests requests through
// Submit from several goroutines into two bands with capacities small
// enough to queue, displace and reject. Each callback either calls Done at
// once, calls Done and then panics, or panics without Done (keeping the
// admission, which the test ends later), or panics on a rejection. The
// panics reach the goroutine of whatever Submit or Done delivered them,
// which recovers and goes on. Every request must get exactly one callback,
// and once all have, nothing may be in flight, queued or held by the gate,
// and no goroutine may be left.
//
// There are no TTLs or cancellations here: their outcomes are delivered on
// timer and AfterFunc goroutines, where a panic cannot be recovered (the
// other stress tests cover them).
func TestStressPanickingCallbacks(t *testing.T) {
	n := *stressRequests
	const (
		workers = 8
		slots   = 4
	)
	baseline := goleak.IgnoreCurrent()
	gt := &switchGate{}
	gt.set(slots)
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 1, RequestCapacity: bounded(8), Fairness: flowcontrol.RoundRobin()},
			{Priority: 0, RequestCapacity: bounded(16), CostCapacity: bounded(64)},
		},
		RequestCapacity: bounded(20),
		Gate:            gt,
	})
	if err != nil {
		t.Fatal(err)
	}

	var (
		calls    = make([]atomic.Int32, n) // callbacks per request
		called   atomic.Int64              // requests with a callback
		outcomes [numOutcomes]atomic.Int64
		kept     = make(chan *flowcontrol.Admission, n) // held by callbacks that panicked without Done
		panics   atomic.Int64                           // panics recovered by the workers
		next     atomic.Int64
	)
	// recovering runs f and counts the panic it raises, if any.
	recovering := func(f func()) {
		defer func() {
			if r := recover(); r != nil {
				if r != "callback boom" {
					panic(r)
				}
				panics.Add(1)
			}
		}()
		f()
	}
	// release ends the admissions kept so far.
	release := func() {
		for {
			select {
			case a := <-kept:
				recovering(a.Done)
			default:
				return
			}
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				mode := rng.IntN(16)
				req := flowcontrol.Request{
					Key:  flowcontrol.FlowKey{ID: "f" + strconv.Itoa(rng.IntN(5)), Priority: rng.IntN(2)},
					Cost: int64(rng.IntN(8)),
				}
				recovering(func() {
					fc.Submit(context.Background(), req, func(a *flowcontrol.Admission, err error) {
						if calls[i].Add(1) != 1 {
							return // counted as doubled below
						}
						called.Add(1)
						if err != nil {
							var rej *flowcontrol.RejectionError
							if !errors.As(err, &rej) {
								panic(err)
							}
							outcomes[rej.Outcome].Add(1)
							if mode == 0 {
								panic("callback boom")
							}
							return
						}
						outcomes[flowcontrol.OutcomeDispatched].Add(1)
						switch mode {
						case 1, 2: // Done, then panic
							a.Done()
							panic("callback boom")
						case 3: // panic, keeping the admission
							kept <- a
							panic("callback boom")
						}
						a.Done()
					})
				})
				if i%64 == 0 {
					release()
				}
			}
		})
	}
	wg.Wait()
	// What waits now needs only the kept admissions to end.
	for called.Load() < int64(n) {
		before := called.Load()
		release()
		recovering(fc.Nudge)
		if called.Load() == before && len(kept) == 0 {
			runtime.Gosched()
			if gt.inFlightNow() == 0 && called.Load() == before && len(kept) == 0 {
				break // nothing can move any more
			}
		}
	}
	release()
	fc.Close()

	for i := range calls {
		if c := calls[i].Load(); c != 1 {
			t.Fatalf("request %d: %d callbacks", i, c)
		}
	}
	var total int64
	for o := range outcomes {
		total += outcomes[o].Load()
		t.Logf("%v: %d", flowcontrol.Outcome(o), outcomes[o].Load())
	}
	t.Logf("%d requests, %d panics recovered", n, panics.Load())
	if total != int64(n) {
		t.Errorf("%d outcomes for %d requests", total, n)
	}
	if outcomes[flowcontrol.OutcomeDispatched].Load() == 0 || panics.Load() == 0 {
		t.Error("the load dispatched nothing or panicked nowhere")
	}
	if got := fc.InFlight(); got != 0 {
		t.Errorf("InFlight %d once every admission is done", got)
	}
	if got := gt.inFlightNow(); got != 0 || gt.overrun {
		t.Errorf("the gate holds %d slots (overrun %v)", got, gt.overrun)
	}
	for _, p := range []int{1, 0} {
		if s, err := fc.CapacitySnapshot(p); err != nil || s.QueuedRequests != 0 || s.QueuedBytes != 0 || s.QueuedCost != 0 {
			t.Errorf("band %d: %v %v", p, s, err)
		}
	}
	goleak.VerifyNone(t, baseline)
}
