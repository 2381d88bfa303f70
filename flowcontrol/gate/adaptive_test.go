package gate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// fill takes every slot the gate grants and returns how many.
func fill(g *gate.AdaptiveGate) int {
	n := 0
	for g.TryAcquire(0) {
		g.Took(gate.Slot{Cost: 1})
		n++
	}
	return n
}

// respond returns one slot with the given time to first token.
func respond(g *gate.AdaptiveGate, ttft time.Duration) {
	g.Returned(gate.Usage{Slot: gate.Slot{Cost: 1}, FirstToken: ttft, Held: 5 * time.Second})
}

func TestAdaptiveDecreasesOncePerHalfTheRequestsInFlight(t *testing.T) {
	g := must(t, gate.Adaptive, gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: 20})
	if n := fill(g); n != 20 {
		t.Fatalf("admitted %d, want the initial limit 20", n)
	}
	respond(g, 2*time.Second) // late: 20 × 0.9 = 18; the next 10 responses started before it
	if g.Limit() != 18 {
		t.Fatalf("limit %d after a late response, want 18", g.Limit())
	}
	for range 9 {
		respond(g, 3*time.Second)
	}
	if g.Limit() != 18 {
		t.Fatalf("limit %d: cut again within the guard of 10 responses", g.Limit())
	}
	respond(g, 3*time.Second) // the tenth since the cut
	if g.Limit() != 16 {
		t.Fatalf("limit %d after the guard, want 16 (18 × 0.9 = 16.2)", g.Limit())
	}
	if n := fill(g); n != 7 {
		t.Fatalf("admitted %d with 9 in flight under a limit of 16, want 7", n)
	}
}

func TestAdaptiveIncreasesOnlyOnClearlyTimelyResponsesWhileInUse(t *testing.T) {
	g := must(t, gate.Adaptive, gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: 10, Increase: 0.5})
	fill(g)
	respond(g, 600*time.Millisecond) // between T/2 and T: hold
	respond(g, time.Second)          // at T: hold
	if g.Limit() != 10 {
		t.Fatalf("limit %d after responses between T/2 and T, want 10", g.Limit())
	}
	respond(g, 500*time.Millisecond) // within T/2, 8 in flight of 10: +0.5
	respond(g, 100*time.Millisecond) // +0.5
	if g.Limit() != 11 {
		t.Fatalf("limit %d after two timely responses of +0.5, want 11", g.Limit())
	}
	// Below half the limit in use, timely responses prove nothing: of the
	// six remaining, only the first (6 in flight of 11) counts.
	for range 6 {
		respond(g, 100*time.Millisecond)
	}
	if g.Limit() != 11 {
		t.Fatalf("limit %d, want 11 (11.5)", g.Limit())
	}
	// No first token reported: the hold time stands in, here 5s, late.
	g.TryAcquire(0)
	g.Returned(gate.Usage{Held: 5 * time.Second, Slot: gate.Slot{Cost: 1}})
	if g.Limit() != 10 {
		t.Fatalf("limit %d after a response with no first token held 5s, want 10 (11.5 × 0.9)", g.Limit())
	}
	// A slot handed back unused teaches nothing.
	g.TryAcquire(0)
	g.Returned(gate.Usage{Unused: true})
	g.TryAcquire(0)
	g.Release(0)
	if g.Limit() != 10 || fill(g) != 10 {
		t.Fatal("an unused slot changed the limit or leaked")
	}
}

func TestAdaptiveStaysWithinItsBounds(t *testing.T) {
	g := must(t, gate.Adaptive, gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: 4, MinLimit: 3, MaxLimit: 5, Increase: 1})
	for range 20 {
		fill(g)
		for range g.Limit() {
			respond(g, 10*time.Millisecond)
		}
	}
	if g.Limit() != 5 {
		t.Fatalf("limit %d, want MaxLimit 5", g.Limit())
	}
	for range 20 {
		n := fill(g)
		for range n {
			respond(g, time.Minute)
		}
	}
	if g.Limit() != 3 {
		t.Fatalf("limit %d, want MinLimit 3", g.Limit())
	}
}

// Through a controller on a manual clock: the gate hears the first token
// the caller reports, and late first tokens lower the limit the next
// requests meet.
func TestAdaptiveLearnsFromFirstTokensThroughAController(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Adaptive, gate.AdaptiveConfig{TargetFirstToken: 200 * time.Millisecond, InitialLimit: 4, MinLimit: 1})
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g, Clock: clock})
	var adms []*flowcontrol.Admission
	for range 4 {
		adm, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		adms = append(adms, adm)
	}
	waiting := submit(fc, "b", 0)
	clock.Advance(time.Second) // the first tokens come after 1s: late
	for _, a := range adms {
		a.FirstToken()
	}
	clock.Advance(4 * time.Second)
	adms[0].Done() // 4 × 0.9 = 3.6: the limit is 3, and 3 are in flight
	if waiting.done {
		t.Fatal("started although the late first token lowered the limit to 3")
	}
	if g.Limit() != 3 {
		t.Fatalf("limit %d, want 3", g.Limit())
	}
	adms[1].Done() // inside the guard: no second cut; 2 in flight of 3
	if waiting.outcome(t) != flowcontrol.OutcomeDispatched || g.Limit() != 3 {
		t.Fatalf("waiting: %v, limit %d; want dispatched under a limit of 3", waiting.err, g.Limit())
	}
	for _, a := range append(adms[2:], waiting.adm) {
		a.Done()
	}
}

func TestAdaptiveConfigErrorsNameTheField(t *testing.T) {
	target := gate.AdaptiveConfig{TargetFirstToken: time.Second}
	with := func(f func(*gate.AdaptiveConfig)) gate.AdaptiveConfig { c := target; f(&c); return c }
	for _, tc := range []struct {
		cfg  gate.AdaptiveConfig
		want string
	}{
		{gate.AdaptiveConfig{}, "gate: TargetFirstToken 0s: required"},
		{with(func(c *gate.AdaptiveConfig) { c.TargetFirstToken = -time.Second }), "gate: TargetFirstToken -1s"},
		{with(func(c *gate.AdaptiveConfig) { c.InitialLimit = -1 }), "gate: InitialLimit -1"},
		{with(func(c *gate.AdaptiveConfig) { c.MinLimit, c.MaxLimit = 50, 10 }), "gate: MinLimit 50"},
		{with(func(c *gate.AdaptiveConfig) { c.InitialLimit, c.MaxLimit = 500, 100 }), "gate: InitialLimit 500"},
		{with(func(c *gate.AdaptiveConfig) { c.Backoff = 1 }), "gate: Backoff 1"},
		{with(func(c *gate.AdaptiveConfig) { c.Increase = -0.1 }), "gate: Increase -0.1"},
	} {
		_, err := gate.Adaptive(tc.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Adaptive(%+v) = %v, want an error starting %q", tc.cfg, err, tc.want)
		}
	}
	g := must(t, gate.Adaptive, target)
	if g.Limit() != gate.DefaultInitialLimit {
		t.Fatalf("default limit %d", g.Limit())
	}
	mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	if _, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g}); err == nil {
		t.Fatal("a second controller was accepted")
	}
}

// A first token heard while its request runs teaches the gate at once, and
// the same response does not teach it again when its slot comes back.
func TestAdaptiveLearnsFromFirstTokensOnce(t *testing.T) {
	g := must(t, gate.Adaptive, gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: 10, Backoff: 0.5})
	var _ gate.FirstTokenGate = g
	if n := fill(g); n != 10 {
		t.Fatalf("filled %d slots, want 10", n)
	}
	slot := gate.Slot{Cost: 1}
	g.FirstToken(slot, 3*time.Second) // late: the limit halves now
	if g.Limit() != 5 {
		t.Fatalf("limit %d after a late first token, want 5", g.Limit())
	}
	// Its slot comes back, already heard: nothing more is learnt (a second
	// lesson would be another cut, the guard being spent).
	g.Returned(gate.Usage{Slot: slot, Held: 10 * time.Second, FirstToken: 3 * time.Second, Heard: true})
	if g.Limit() != 5 {
		t.Fatalf("limit %d after the heard response returned, want still 5", g.Limit())
	}
	// Not heard: learnt at Returned, from its first token.
	g.Returned(gate.Usage{Slot: slot, Held: 10 * time.Second, FirstToken: 100 * time.Millisecond})
	if g.Limit() != 5 {
		t.Fatalf("limit %d: a timely response moved a limit that is not in use", g.Limit())
	}
}

// All hears first tokens only when one of its gates does, since each costs
// the controller a lock.
func TestAllIsAFirstTokenGateOnlyWithOne(t *testing.T) {
	conc, err := gate.Concurrency(gate.ConcurrencyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gate.All(conc).(gate.FirstTokenGate); ok {
		t.Fatal("All of a concurrency gate hears first tokens")
	}
	conc2, _ := gate.Concurrency(gate.ConcurrencyConfig{})
	a := must(t, gate.Adaptive, gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: 4, Backoff: 0.5})
	all, ok := gate.All(conc2, a).(gate.FirstTokenGate)
	if !ok {
		t.Fatal("All with an adaptive gate does not hear first tokens")
	}
	for all.TryAcquire(0) {
		all.Took(gate.Slot{Cost: 1})
	}
	all.FirstToken(gate.Slot{Cost: 1}, 2*time.Second)
	if a.Limit() != 2 {
		t.Fatalf("adaptive limit %d after All passed on a late first token, want 2", a.Limit())
	}
}
