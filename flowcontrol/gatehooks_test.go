package flowcontrol_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
)

// meterGate is a MeteredGate with n slots that records every call.
type meterGate struct {
	n, used  int
	took     []gate.Slot
	returned []gate.Usage
	released int
}

func (g *meterGate) TryAcquire(int) bool {
	if g.used >= g.n {
		return false
	}
	g.used++
	return true
}
func (g *meterGate) Release(int)           { g.used--; g.released++ }
func (g *meterGate) Took(s gate.Slot)      { g.took = append(g.took, s) }
func (g *meterGate) Returned(u gate.Usage) { g.used--; g.returned = append(g.returned, u) }

func TestMeteredGateHearsCostAndUsage(t *testing.T) {
	clock := clocktest.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	g := &meterGate{n: 1}
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 5}},
		Gate:  g,
		Clock: clock,
	})
	ctx := context.Background()

	// Immediate start: Took with the request's cost.
	first := submit(ctx, fc, flowcontrol.Request{Key: key("a", 5), Cost: 700})
	if first.outcome(t) != flowcontrol.OutcomeDispatched {
		t.Fatalf("first: %v", first.err)
	}
	// Queued: a non-positive cost counts as 1; the gate hears it when the
	// request is dispatched, not when it is offered.
	second := submit(ctx, fc, flowcontrol.Request{Key: key("b", 0), Cost: -3})
	if second.finished() {
		t.Fatal("second started with the only slot taken")
	}
	if len(g.took) != 1 || g.took[0] != (gate.Slot{Priority: 5, Cost: 700}) {
		t.Fatalf("took = %+v, want one slot {5 700}", g.took)
	}

	clock.Advance(40 * time.Millisecond)
	first.adm.FirstToken()
	clock.Advance(60 * time.Millisecond)
	first.adm.FirstToken() // only the first report counts
	first.adm.Done()
	if second.outcome(t) != flowcontrol.OutcomeDispatched {
		t.Fatalf("second: %v", second.err)
	}
	want := gate.Usage{
		Slot:       gate.Slot{Priority: 5, Cost: 700},
		Held:       100 * time.Millisecond,
		FirstToken: 40 * time.Millisecond,
	}
	if len(g.returned) != 1 || g.returned[0] != want {
		t.Fatalf("returned = %+v, want [%+v]", g.returned, want)
	}
	if len(g.took) != 2 || g.took[1] != (gate.Slot{Priority: 0, Cost: 1}) {
		t.Fatalf("took = %+v, want the second slot {0 1}", g.took)
	}

	// No first token reported: FirstToken is 0, Held still measured.
	clock.Advance(5 * time.Second)
	second.adm.Done()
	second.adm.Done()
	want = gate.Usage{Slot: gate.Slot{Priority: 0, Cost: 1}, Held: 5 * time.Second}
	if len(g.returned) != 2 || g.returned[1] != want {
		t.Fatalf("returned = %+v, want second %+v", g.returned, want)
	}
	if g.released != 0 || g.used != 0 {
		t.Fatalf("released %d, used %d: want Release never called and every slot back", g.released, g.used)
	}
}

// boundGate records the controller it is bound to, and may refuse it.
type boundGate struct {
	gate.Gate
	bound []gate.Controller
	err   error
}

func (g *boundGate) Bind(c gate.Controller) error {
	g.bound = append(g.bound, c)
	return g.err
}

func TestBoundGateIsBoundOnce(t *testing.T) {
	g := &boundGate{Gate: gate.MaxInFlight(1)}
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	if len(g.bound) != 1 || g.bound[0] != gate.Controller(fc) {
		t.Fatalf("bound to %v, want once to %p", g.bound, fc)
	}

	refusing := &boundGate{Gate: gate.MaxInFlight(1), err: errors.New("serves one controller")}
	_, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: refusing})
	if err == nil || !errors.Is(err, refusing.err) || !strings.Contains(err.Error(), "Gate") {
		t.Fatalf("New with a refusing Bind: %v, want an error naming Gate and wrapping %v", err, refusing.err)
	}
}

// poolGate is an EndpointGate over a number of endpoints, each with one
// slot; it nudges its controller when endpoints come and go.
type poolGate struct {
	endpoints, used int
	fc              gate.Controller
}

func (g *poolGate) TryAcquire(int) bool {
	if g.used >= g.endpoints {
		return false
	}
	g.used++
	return true
}
func (g *poolGate) Release(int)                  { g.used-- }
func (g *poolGate) NoEndpoints() bool            { return g.endpoints == 0 }
func (g *poolGate) Bind(c gate.Controller) error { g.fc = c; return nil }

// set changes the number of endpoints; the caller holds no lock the gate's
// methods take (the test is single-threaded), so it may nudge.
func (g *poolGate) set(n int) {
	g.endpoints = n
	g.fc.Nudge()
}

func TestNoEndpointsTTL(t *testing.T) {
	clock := clocktest.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	g := &poolGate{endpoints: 1}
	fc := mustNew(t, flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{{Priority: 0, TTL: time.Minute}},
		Gate:           g,
		Clock:          clock,
		NoEndpointsTTL: 10 * time.Second,
	})
	ctx := context.Background()

	running := submit(ctx, fc, req("run", 0))
	early := submit(ctx, fc, req("early", 0)) // waits: the one endpoint is busy
	clock.Advance(30 * time.Second)
	g.set(0) // the pool empties at 30s: early has waited 30s, but none of it without endpoints
	clock.Advance(5 * time.Second)
	late := submit(ctx, fc, req("late", 0)) // queued at 35s, with no endpoints
	clock.Advance(5*time.Second - time.Nanosecond)
	if early.finished() || late.finished() {
		t.Fatal("a request dropped before waiting NoEndpointsTTL with no endpoints")
	}
	clock.Advance(time.Nanosecond) // 40s: early has waited 10s with no endpoints
	if !early.finished() || late.finished() {
		t.Fatalf("at 40s: early finished %v, late finished %v; want only early", early.finished(), late.finished())
	}
	rej := early.rejection(t)
	if rej.Outcome != flowcontrol.OutcomeRejectedNoEndpoints || !errors.Is(rej, flowcontrol.ErrRejectedNoEndpoints) {
		t.Fatalf("early: %v, want rejected-no-endpoints", rej)
	}
	if got := rej.Outcome.HTTPStatus(); got != http.StatusServiceUnavailable {
		t.Fatalf("HTTPStatus = %d, want 503", got)
	}
	if rej.QueueTime != 40*time.Second || rej.RetryAfter != time.Second {
		t.Fatalf("QueueTime %v RetryAfter %v, want 40s and 1s (rejoin the queue soon)", rej.QueueTime, rej.RetryAfter)
	}

	// Endpoints come back before late's time is up: it waits for the slot,
	// and the empty spell no longer counts.
	clock.Advance(2 * time.Second)
	g.set(1)
	clock.Advance(20 * time.Second)
	if late.finished() {
		t.Fatalf("late dropped with endpoints back: %v", late.err)
	}
	running.adm.Done()
	if late.outcome(t) != flowcontrol.OutcomeDispatched {
		t.Fatalf("late: %v", late.err)
	}
	late.adm.Done()
}

func TestExpiryWithNoEndpointsIsReportedAsSuch(t *testing.T) {
	clock := clocktest.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	g := &poolGate{}
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: 3 * time.Second}},
		Gate:  g,
		Clock: clock,
	})
	g.fc = fc
	c := submit(context.Background(), fc, req("a", 0))
	clock.Advance(3 * time.Second)
	if got := c.outcome(t); got != flowcontrol.OutcomeRejectedNoEndpoints {
		t.Fatalf("outcome %v, want rejected-no-endpoints: the TTL ran out with no endpoints", got)
	}
	g.endpoints = 1
	g.used = 1
	d := submit(context.Background(), fc, req("b", 0))
	clock.Advance(3 * time.Second)
	if got := d.outcome(t); got != flowcontrol.OutcomeRejectedTTLExpired {
		t.Fatalf("outcome %v, want rejected-ttl-expired with an endpoint present", got)
	}
}

func TestFirstTokenWithoutMeteredGateIsFree(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}})
	adm, err := fc.EnqueueAndWait(context.Background(), req("a", 0))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, adm.FirstToken); n != 0 {
		t.Fatalf("FirstToken allocates %v", n)
	}
	adm.Done()
}

func TestGateRefusalsCountsEachRefusedOffer(t *testing.T) {
	g := &meterGate{n: 1}
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	ctx := context.Background()
	first := submit(ctx, fc, req("a", 0)) // starts: no refusal
	if first.outcome(t) != flowcontrol.OutcomeDispatched || fc.GateRefusals() != 0 {
		t.Fatalf("after a start: %d refusals, want 0", fc.GateRefusals())
	}
	second := submit(ctx, fc, req("b", 0)) // refused once at once, once as it queues
	if got := fc.GateRefusals(); got != 2 {
		t.Fatalf("after a request that had to wait: %d refusals, want 2 (its immediate attempt and its enqueue)", got)
	}
	fc.Nudge() // offered again, refused again
	if got := fc.GateRefusals(); got != 3 {
		t.Fatalf("after a Nudge: %d refusals, want 3", got)
	}
	first.adm.Done() // the freed slot goes to second
	if second.outcome(t) != flowcontrol.OutcomeDispatched || fc.GateRefusals() != 3 {
		t.Fatalf("after the dispatch: %d refusals, want still 3", fc.GateRefusals())
	}
	second.adm.Done()
}

// ftGate is a meterGate that also hears first tokens as they come.
type ftGate struct {
	meterGate
	heard []time.Duration
	grow  bool // a first token frees one more slot
}

func (g *ftGate) FirstToken(s gate.Slot, d time.Duration) {
	g.heard = append(g.heard, d)
	if g.grow {
		g.n++
	}
}

func TestFirstTokenGateHearsFirstTokensAtOnce(t *testing.T) {
	clock := clocktest.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	g := &ftGate{meterGate: meterGate{n: 1}, grow: true}
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g, Clock: clock})
	ctx := context.Background()
	first := submit(ctx, fc, req("a", 0))
	second := submit(ctx, fc, req("b", 0))
	if first.outcome(t) != flowcontrol.OutcomeDispatched || second.finished() {
		t.Fatal("want the first started and the second waiting")
	}
	clock.Advance(30 * time.Millisecond)
	first.adm.FirstToken()
	// The gate heard it at once, and the slot it then opened went to the
	// waiting request: the controller ran dispatch.
	if len(g.heard) != 1 || g.heard[0] != 30*time.Millisecond {
		t.Fatalf("heard %v, want [30ms]", g.heard)
	}
	if second.outcome(t) != flowcontrol.OutcomeDispatched {
		t.Fatalf("second: %v; the slot the first token opened was not used", second.err)
	}
	first.adm.FirstToken() // only the first report counts
	first.adm.Done()
	second.adm.Done()
	second.adm.FirstToken() // after Done: nothing
	if len(g.heard) != 1 {
		t.Fatalf("heard %v: a second report, or one after Done, reached the gate", g.heard)
	}
	want := []gate.Usage{
		{Slot: gate.Slot{Priority: 0, Cost: 1}, Held: 30 * time.Millisecond, FirstToken: 30 * time.Millisecond, Heard: true},
		{Slot: gate.Slot{Priority: 0, Cost: 1}},
	}
	if len(g.returned) != 2 || g.returned[0] != want[0] || g.returned[1] != want[1] {
		t.Fatalf("returned %+v, want %+v", g.returned, want)
	}
}

// TestNewThatFailsLeavesTheGateAsItWas: a controller whose gate refuses to
// be bound — the second gate of an All, here — leaves the gates bound
// before it unbound, and their counts plain: the same gates serve the next
// controller.
func TestNewThatFailsLeavesTheGateAsItWas(t *testing.T) {
	limit := gate.MaxInFlight(1)
	budget, err := gate.Concurrency(gate.ConcurrencyConfig{MaxConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	refusing := &boundGate{Gate: gate.MaxInFlight(8), err: errors.New("refused")}
	bands := []flowcontrol.BandConfig{{Priority: 0}}
	if _, err := flowcontrol.New(flowcontrol.Config{Bands: bands, Gate: gate.All(limit, budget, refusing)}); err == nil {
		t.Fatal("New with a gate that refuses to be bound succeeded")
	}
	if _, err := flowcontrol.New(flowcontrol.Config{Bands: bands, Gate: gate.Ceiling(gate.All(limit, refusing), gate.SoftReflectiveCeiling())}); err == nil {
		t.Fatal("New with a ceiling over a gate that refuses to be bound succeeded")
	}
	fc := mustNew(t, flowcontrol.Config{Bands: bands, Gate: gate.All(limit, budget)})
	a, err := fc.EnqueueAndWait(context.Background(), req("a", 0))
	if err != nil {
		t.Fatal(err)
	}
	a.Done()
}
