package gate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"pgregory.net/rapid"
)

// acquireBand takes every start the gate grants band p, up to 1000, and
// returns how many it granted.
func acquireBand(g gate.Gate, p int) int {
	n := 0
	for n < 1000 && g.TryAcquire(p) {
		n++
	}
	return n
}

const (
	chat  = 10
	batch = -1
)

func TestPrioritySchedulingLetsAHigherBandPastLowerWork(t *testing.T) {
	clock := newClock()
	cfg := gate.SaturationConfig{Clock: clock, SlotsPerEndpoint: 4, QueueDepthThreshold: 2}
	plain := must(t, gate.Saturation, cfg)
	cfg.PriorityScheduling = true
	g := must(t, gate.Saturation, cfg)
	for _, sg := range []*gate.SaturationGate{plain, g} {
		sg.Update("a", gate.Metrics{Running: 4}) // room 2
		sg.Update("b", gate.Metrics{Running: 4}) // room 2
		if n := acquireBand(sg, batch); n != 4 {
			t.Fatalf("batch took %d starts, want the room, 4", n)
		}
	}
	// The queues are full by llm-d's rule. Without PriorityScheduling chat
	// waits behind batch; with it, chat starts while fewer than the
	// 2 × 4 = 8 slots hold chat requests.
	if n := acquireBand(plain, chat); n != 0 {
		t.Fatalf("without PriorityScheduling chat took %d starts past the full queues", n)
	}
	if n := acquireBand(g, chat); n != 8 {
		t.Fatalf("chat took %d starts past batch's queued work, want the 2 × 4 = 8 slots", n)
	}
	if n := acquireBand(g, batch); n != 0 {
		t.Fatalf("batch took %d starts past the full queues", n)
	}
	// A chat request ends: one more may start. One comes back unused: so
	// may another.
	g.Returned(gate.Usage{Slot: gate.Slot{Priority: chat, Cost: 1}, Held: time.Second})
	g.Returned(gate.Usage{Slot: gate.Slot{Priority: chat}, Unused: true})
	if n := acquireBand(g, chat); n != 2 {
		t.Fatalf("chat took %d starts after two came back, want 2", n)
	}
	// A middle band jumps batch too, and counts against chat's room.
	if n := acquireBand(g, 0); n != 0 {
		t.Fatalf("band 0 took %d starts with 8 of band 10 in flight, want 0: they are above it", n)
	}
	g.Release(chat) // a caller that knows only Gate
	if n := acquireBand(g, 0); n != 1 {
		t.Fatalf("band 0 took %d starts after a chat request ended, want 1", n)
	}

	// Once every lower request has ended nothing is left to jump: the
	// queues hold chat's own work, and llm-d's rule alone decides.
	for range 4 {
		g.Returned(gate.Usage{Slot: gate.Slot{Priority: batch, Cost: 1}, Held: time.Second})
	}
	// Band 0 does not count against chat's room: chat runs ahead of it.
	if n := acquireBand(g, chat); n != 1 {
		t.Fatalf("chat took %d starts with 7 of its own in flight, want 1", n)
	}
	g.Returned(gate.Usage{Slot: gate.Slot{Priority: 0, Cost: 1}, Held: time.Second})
	for i := range 8 {
		g.Returned(gate.Usage{Slot: gate.Slot{Priority: chat, Cost: 1}, Held: time.Second})
		if i == 0 {
			if n := acquireBand(g, chat); n != 0 {
				t.Fatalf("chat took %d starts with no lower band in flight, past the full queues", n)
			}
		}
	}
}

func TestPrioritySchedulingFailsClosedOnStaleMetrics(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock, SlotsPerEndpoint: 4, PriorityScheduling: true})
	g.Update("a", gate.Metrics{Running: 4, Waiting: 4}) // room 1
	if n := acquireBand(g, batch); n != 1 {
		t.Fatalf("batch took %d, want 1", n)
	}
	clock.Advance(gate.DefaultMetricsStalenessThreshold)
	if n := acquireBand(g, chat); n != 0 {
		t.Fatalf("chat took %d starts with every endpoint stale, want 0", n)
	}
	g.Update("a", gate.Metrics{Running: 4, Waiting: 5}) // fresh, full
	if n := acquireBand(g, chat); n != 4 {
		t.Fatalf("chat took %d starts once fresh again, want the 4 slots", n)
	}
}

// Between two readings a PriorityScheduling gate gives a start back for
// each of its requests that ended after the newest refresh; llm-d's rule
// alone gives none.
func TestPrioritySchedulingEndsBetweenReadings(t *testing.T) {
	ran := gate.Usage{Slot: gate.Slot{Priority: batch, Cost: 1}, Held: time.Second}
	for _, ps := range []bool{false, true} {
		clock := newClock()
		g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock, SlotsPerEndpoint: 2, QueueDepthThreshold: 1,
			PriorityScheduling: ps})
		g.Update("a", gate.Metrics{Running: 2}) // room 1
		if n := acquireBand(g, batch); n != 1 {
			t.Fatalf("PriorityScheduling %v: %d starts on a room of 1", ps, n)
		}
		g.Returned(ran)
		want := 0
		if ps {
			want = 1
		}
		if n := acquireBand(g, batch); n != want {
			t.Fatalf("PriorityScheduling %v: %d starts after an end, want %d", ps, n, want)
		}
		if !ps {
			continue
		}
		g.Returned(ran) // before the next reading, which shows it
		clock.Advance(time.Millisecond)
		g.Update("a", gate.Metrics{Running: 2, Waiting: 1}) // full
		if n := acquireBand(g, batch); n != 0 {
			t.Fatalf("%d starts on a full reading taken after the end, want 0", n)
		}
		g.Returned(ran) // against the contract: nothing of batch is in flight
		if n := acquireBand(g, batch); n != 0 {
			t.Fatalf("%d starts after an end of nothing, want 0", n)
		}
		clock.Advance(time.Millisecond)
		g.Update("a", gate.Metrics{Running: 2}) // room 1
		if n := acquireBand(g, batch); n != 1 {
			t.Fatalf("%d starts on a room of 1, want 1", n)
		}
		g.Returned(gate.Usage{Slot: gate.Slot{Priority: batch, Cost: 1}, Unused: true})
		if n := acquireBand(g, batch); n != 1 {
			t.Fatalf("%d starts after the start was handed back unused, want its 1", n)
		}
		g.Release(batch)
		if n := acquireBand(g, batch); n != 1 {
			t.Fatalf("%d starts after a Release, want 1", n)
		}
	}
}

func TestPrioritySchedulingNeedsSlots(t *testing.T) {
	_, err := gate.Saturation(gate.SaturationConfig{PriorityScheduling: true})
	if err == nil || !strings.Contains(err.Error(), "SlotsPerEndpoint") {
		t.Fatalf("PriorityScheduling without SlotsPerEndpoint: err = %v, want one naming SlotsPerEndpoint", err)
	}
}

func TestPrioritySchedulingReplicaSharesSumToTheRoom(t *testing.T) {
	for replicas := 1; replicas <= 5; replicas++ {
		total := 0
		for r := range replicas {
			clock := newClock()
			g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock, SlotsPerEndpoint: 16, PriorityScheduling: true,
				Replicas: replicas, Replica: r})
			g.Update("a", gate.Metrics{Running: 16, Waiting: 9})
			g.Update("b", gate.Metrics{Running: 16, Waiting: 9})
			g.Update("c", gate.Metrics{Running: 16}) // room 5: batch takes this replica's share
			if acquireBand(g, batch) == 0 {
				t.Fatalf("%d replicas, replica %d: batch took no start", replicas, r)
			}
			clock.Advance(time.Millisecond)
			g.Update("c", gate.Metrics{Running: 16, Waiting: 9}) // full: only the jump is left
			total += acquireBand(g, chat)
		}
		if want := 3 * 16; total != want {
			t.Errorf("%d replicas: chat room sums to %d, want %d", replicas, total, want)
		}
	}
}

// The counts behind PriorityScheduling against a model: whatever the
// order of starts and ends, and whatever a caller hands back that it
// never took, a band jumps the queues only while a lower band is in
// flight and fewer than the room of its band and above are; and each end
// of a request that ran gives the budget one start back, an end of one
// that never started none.
func TestPrioritySchedulingModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := newClock()
		g, err := gate.Saturation(gate.SaturationConfig{Clock: clock, SlotsPerEndpoint: 2, QueueDepthThreshold: 1,
			PriorityScheduling: true})
		if err != nil {
			t.Fatal(err)
		}
		const room = 2 * 2
		g.Update("a", gate.Metrics{Running: 2, Waiting: 0}) // room 1 by llm-d's rule
		g.Update("b", gate.Metrics{Running: 2, Waiting: 0}) // room 1
		inFlight := map[int]int{}
		budget := 2
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			p := rapid.IntRange(-2, 2).Draw(t, "band")
			if rapid.Bool().Draw(t, "start") {
				above, below := 0, 0
				for q, n := range inFlight {
					if q >= p {
						above += n
					} else {
						below += n
					}
				}
				want := budget > 0 || below > 0 && above < room
				if got := g.TryAcquire(p); got != want {
					t.Fatalf("TryAcquire(%d) = %v with %v in flight and budget %d, want %v", p, got, inFlight, budget, want)
				}
				if want {
					inFlight[p]++
					budget--
				}
				continue
			}
			// An end: of a request in flight, or (against the contract) of
			// one that never started, which must not make room grow; or a
			// start handed back unused, which gives its start back and
			// counts no end.
			switch rapid.IntRange(0, 2).Draw(t, "end") {
			case 0:
				g.Returned(gate.Usage{Slot: gate.Slot{Priority: p, Cost: 1}, Held: time.Millisecond})
			case 1:
				g.Release(p)
			default:
				if inFlight[p] == 0 {
					continue // an unused start is one that was taken
				}
				g.Returned(gate.Usage{Slot: gate.Slot{Priority: p, Cost: 1}, Unused: true})
			}
			if inFlight[p] > 0 {
				inFlight[p]--
				budget++
			}
		}
	})
}

// PriorityMaxInFlight through a controller: batch fills the slots; chat
// then starts past them, up to the slots of chat, while batch runs; batch
// starts again only below the slots.
func TestPriorityMaxInFlightThroughAController(t *testing.T) {
	g := gate.PriorityMaxInFlight(4)
	fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: chat}, {Priority: batch}}, FallbackPriority: batch, Gate: g})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	started := map[int][]*flowcontrol.Admission{}
	submit := func(p, n int) {
		for range n {
			fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{Priority: p}},
				func(a *flowcontrol.Admission, err error) {
					if err == nil {
						started[p] = append(started[p], a)
					}
				})
		}
	}
	count := func() (int, int) { return len(started[chat]), len(started[batch]) }
	submit(batch, 6)
	if c, b := count(); c != 0 || b != 4 {
		t.Fatalf("after 6 batch: %d chat, %d batch started; want 0 and the 4 slots", c, b)
	}
	submit(chat, 6)
	if c, b := count(); c != 4 || b != 4 {
		t.Fatalf("after 6 chat: %d chat, %d batch started; want 4 chat past the slots", c, b)
	}
	if s := g.(gate.SaturationDetector).Saturation(); s != 1 {
		t.Errorf("Saturation() = %v with 8 in flight of 4, want 1", s)
	}
	started[chat][0].Done() // one chat ends: the next chat starts
	if c, b := count(); c != 5 || b != 4 {
		t.Fatalf("after a chat ended: %d chat, %d batch started; want 5, 4", c, b)
	}
	for _, a := range started[batch] {
		a.Done()
	}
	// No batch in flight: 4 chat are, at the limit; the last chat and the
	// 2 batch wait for a slot.
	if c, b := count(); c != 5 || b != 4 {
		t.Fatalf("after the batch ended: %d chat, %d batch started; want 5, 4", c, b)
	}
	started[chat][1].Done()
	if c, b := count(); c != 6 || b != 4 {
		t.Fatalf("after another chat ended: %d chat, %d batch started; want the last chat", c, b)
	}
	for _, a := range started[chat][2:] {
		a.Done()
	}
	if c, b := count(); c != 6 || b != 6 {
		t.Fatalf("after every chat ended: %d chat, %d batch started; want the 2 batch too", c, b)
	}
	for _, a := range started[batch][4:] {
		a.Done()
	}
	if n := fc.InFlight(); n != 0 {
		t.Errorf("%d in flight at the end", n)
	}
}

func TestPriorityMaxInFlightBinding(t *testing.T) {
	if got := gate.PriorityMaxInFlight(64).(fmt.Stringer).String(); got != "PriorityMaxInFlight(64)" {
		t.Errorf("String() = %q", got)
	}
	bands := []flowcontrol.BandConfig{{Priority: 0}}
	if _, err := flowcontrol.New(flowcontrol.Config{Bands: bands, Gate: gate.PriorityMaxInFlight(-1)}); err == nil || !strings.Contains(err.Error(), "negative limit") {
		t.Errorf("a negative limit: %v, want it refused", err)
	}
	g := gate.PriorityMaxInFlight(1)
	fc, err := flowcontrol.New(flowcontrol.Config{Bands: bands, Gate: g})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if _, err := flowcontrol.New(flowcontrol.Config{Bands: bands, Gate: g}); err == nil {
		t.Error("a second controller bound the gate")
	}
	if s := g.(gate.SaturationDetector).Saturation(); s != 0 {
		t.Errorf("Saturation() = %v idle", s)
	}
	if s := gate.PriorityMaxInFlight(0).(gate.SaturationDetector).Saturation(); s != 1 {
		t.Errorf("Saturation() of a limit of 0 = %v, want 1", s)
	}
}

// The gate against a model, as for the saturation gate's counts.
func TestPriorityMaxInFlightModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const limit = 3
		g := gate.PriorityMaxInFlight(limit)
		inFlight := map[int]int{}
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			p := rapid.IntRange(-2, 2).Draw(t, "band")
			if rapid.Bool().Draw(t, "start") {
				total, above, below := 0, 0, 0
				for q, n := range inFlight {
					total += n
					if q >= p {
						above += n
					} else {
						below += n
					}
				}
				want := total < limit || below > 0 && above < limit
				if got := g.TryAcquire(p); got != want {
					t.Fatalf("TryAcquire(%d) = %v with %v in flight, want %v", p, got, inFlight, want)
				}
				if want {
					inFlight[p]++
				}
				continue
			}
			if inFlight[p] > 0 { // the contract: only what was taken comes back
				g.Release(p)
				inFlight[p]--
			}
		}
	})
}

// The gates in front of servers that preempt say so, and only they: a
// composition says so when every gate in it does or only refuses without
// endpoints, and a ceiling never does.
func TestServersPreempt(t *testing.T) {
	sat := func(ps bool) gate.Gate {
		cfg := gate.SaturationConfig{SlotsPerEndpoint: 16, PriorityScheduling: ps}
		return must(t, gate.Saturation, cfg)
	}
	for name, tc := range map[string]struct {
		g    gate.Gate
		want bool
	}{
		"PriorityMaxInFlight":                    {gate.PriorityMaxInFlight(4), true},
		"Saturation with PriorityScheduling":     {sat(true), true},
		"Saturation":                             {sat(false), false},
		"All of PriorityMaxInFlight, Endpoints":  {gate.All(gate.Endpoints(1), gate.PriorityMaxInFlight(4)), true},
		"All in All":                             {gate.All(gate.Endpoints(1), gate.All(sat(true))), true},
		"All with MaxInFlight":                   {gate.All(gate.PriorityMaxInFlight(4), gate.MaxInFlight(4)), false},
		"All with a Saturation that is not told": {gate.All(gate.PriorityMaxInFlight(4), sat(false)), false},
		"All of Endpoints alone":                 {gate.All(gate.Endpoints(1)), false},
		"All of nothing":                         {gate.All(), false},
		"Ceiling":                                {gate.Ceiling(sat(true), gate.SoftReflectiveCeiling()), false},
	} {
		pg, ok := tc.g.(gate.PreemptingGate)
		if got := ok && pg.ServersPreempt(); got != tc.want {
			t.Errorf("%s: ServersPreempt %v, want %v", name, got, tc.want)
		}
	}
}
