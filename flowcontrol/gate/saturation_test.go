package gate_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"pgregory.net/rapid"
)

// acquireAll takes every start the gate grants, up to 1000, and returns
// how many it granted.
func acquireAll(g gate.Gate) int {
	n := 0
	for n < 1000 && g.TryAcquire(0) {
		n++
	}
	return n
}

func TestSaturationBudgetIsTheRoomUnderTheThresholds(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock})
	// Defaults: queue threshold 5, KV threshold 0.8.
	g.Update("a", gate.Metrics{Waiting: 2, Running: 8, KVCache: 0.5}) // room 3
	g.Update("b", gate.Metrics{Waiting: 7, Running: 8, KVCache: 0.5}) // over the queue threshold: 0
	g.Update("c", gate.Metrics{Waiting: 0, Running: 3, KVCache: 0.8}) // at the KV threshold: 0
	g.Update("d", gate.Metrics{Waiting: 0, Running: 1, KVCache: 0.1}) // room 5
	want := gate.SaturationStatus{Endpoints: 4, Fresh: 4, Saturated: 2, Room: 8, Budget: 8}
	if got := g.Status(); got != want {
		t.Fatalf("Status = %+v, want %+v", got, want)
	}
	if n := acquireAll(g); n != 8 {
		t.Fatalf("granted %d starts before the next refresh, want the room, 8", n)
	}
	g.Returned(gate.Usage{Unused: true})                           // a composing gate hands one back, before any Took
	g.Returned(gate.Usage{Slot: gate.Slot{Cost: 1}, Unused: true}) // a request that never ran
	g.Returned(gate.Usage{Held: time.Second})                      // a request that ran returns nothing
	g.Release(0)                                                   // nor does one whose caller knows only Gate
	if n := acquireAll(g); n != 2 {
		t.Fatalf("granted %d after two starts came back unused, want 2", n)
	}

	// The next scrape, 10 ms later, one endpoint at a time. a took 3 of
	// the 8 and d 5; both still queue them. Until every endpoint refreshed
	// since the starts, the starts count against all the room: a and d
	// report no room, so nothing may start, whatever b and c say.
	clock.Advance(10 * time.Millisecond)
	g.Update("a", gate.Metrics{Waiting: 5, KVCache: 0.6})
	g.Update("d", gate.Metrics{Waiting: 4, KVCache: 0.3}) // room 1, but the old b and c refreshes predate 8 starts
	if n := acquireAll(g); n != 0 {
		t.Fatalf("granted %d with b and c not yet refreshed since 8 starts", n)
	}
	g.Update("b", gate.Metrics{Waiting: 3, KVCache: 0.5}) // room 2
	g.Update("c", gate.Metrics{Waiting: 0, KVCache: 0.9}) // 0
	if n := acquireAll(g); n != 3 {
		t.Fatalf("granted %d after a full refresh, want the new room 1+2 = 3", n)
	}
}

func TestSaturationCountsAReadingOnce(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock})
	read := clock.Now()
	g.Update("a", gate.Metrics{Waiting: 1, ReadAt: read})
	if n := acquireAll(g); n != 4 {
		t.Fatalf("granted %d, want 4", n)
	}
	g.Update("a", gate.Metrics{Waiting: 1, ReadAt: read})                        // the same reading again
	g.Update("a", gate.Metrics{Waiting: 0, ReadAt: read.Add(-time.Millisecond)}) // an older one, late
	if n := acquireAll(g); n != 0 {
		t.Fatalf("granted %d more on a repeated and an older reading", n)
	}
}

func TestSaturationStaleMetricsFailClosed(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock, MetricsStalenessThreshold: 200 * time.Millisecond})
	g.Update("a", gate.Metrics{Waiting: 0, ReadAt: clock.Now().Add(-50 * time.Millisecond)})
	clock.Advance(149 * time.Millisecond) // 199 ms old
	if got := g.Status(); got.Fresh != 1 || got.Budget != 5 {
		t.Fatalf("at 199ms: %+v, want fresh with budget 5", got)
	}
	clock.Advance(time.Millisecond) // 200 ms old: stale
	if g.TryAcquire(0) {
		t.Fatal("granted a start on stale metrics")
	}
	if got, want := g.Status(), (gate.SaturationStatus{Endpoints: 1, Saturated: 1}); got != want {
		t.Fatalf("stale: %+v, want %+v", got, want)
	}
	if s := g.Saturation(); s != 1 {
		t.Fatalf("Saturation() = %v with stale metrics, want 1", s)
	}
	if g.NoEndpoints() {
		t.Fatal("NoEndpoints with a stale endpoint: stale is saturated, not gone")
	}

	// A reading already too old when it arrives is stale at once.
	g.Update("a", gate.Metrics{Waiting: 0, ReadAt: clock.Now().Add(-250 * time.Millisecond)})
	if g.TryAcquire(0) {
		t.Fatal("granted a start on metrics 250ms old")
	}
	g.Update("a", gate.Metrics{Waiting: 3})
	if n := acquireAll(g); n != 2 {
		t.Fatalf("granted %d on fresh metrics, want 2", n)
	}
	// A refresh re-arms the timer: the first reading's timer must not
	// make the second one stale early.
	clock.Advance(150 * time.Millisecond)
	g.Update("a", gate.Metrics{Waiting: 4})
	clock.Advance(150 * time.Millisecond)
	if got := g.Status(); got.Fresh != 1 || got.Budget != 1 {
		t.Fatalf("150ms after a refresh: %+v, want fresh with budget 1", got)
	}
}

func TestSaturationReplicaSharesSumToTheRoom(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		replicas := rapid.IntRange(1, 8).Draw(t, "replicas")
		endpoints := rapid.IntRange(1, 6).Draw(t, "endpoints")
		clock := newClock()
		gates := make([]*gate.SaturationGate, replicas)
		for i := range gates {
			g, err := gate.Saturation(gate.SaturationConfig{Clock: clock, Replicas: replicas, Replica: i, QueueDepthThreshold: 9})
			if err != nil {
				t.Fatal(err)
			}
			gates[i] = g
		}
		for scrape := range 3 {
			clock.Advance(time.Duration(rapid.IntRange(1, 100_000_000).Draw(t, "gap")))
			read := clock.Now()
			var room int64
			rooms := make([]int64, endpoints)
			for e := range endpoints {
				m := gate.Metrics{
					Waiting: rapid.IntRange(0, 12).Draw(t, "waiting"),
					KVCache: rapid.Float64Range(0, 1).Draw(t, "kv"),
					ReadAt:  read,
				}
				if m.KVCache < 0.8 {
					rooms[e] = int64(max(9-m.Waiting, 0))
					room += rooms[e]
				}
				for _, g := range gates {
					g.Update(fmt.Sprint("ep", e), m)
				}
			}
			var budgets, granted int64
			for i, g := range gates {
				s := g.Status()
				budgets += s.Budget
				// Each replica's share of the room is within one of an
				// equal split.
				if lo, hi := room/int64(replicas)-int64(endpoints), room/int64(replicas)+int64(endpoints); s.Room < lo || s.Room > hi {
					t.Fatalf("scrape %d replica %d: room %d outside [%d, %d]", scrape, i, s.Room, lo, hi)
				}
				granted += int64(acquireAll(g))
			}
			if budgets != room || granted != room {
				t.Fatalf("scrape %d: replicas' budgets sum to %d and they granted %d, want the room %d (per endpoint %v)",
					scrape, budgets, granted, room, rooms)
			}
		}
	})
}

func TestSaturationNoEndpointsThroughAController(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock})
	fc := mustNew(t, flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{{Priority: 0, TTL: time.Minute}},
		Gate:           g,
		Clock:          clock,
		NoEndpointsTTL: time.Second,
	})
	if !g.NoEndpoints() {
		t.Fatal("NoEndpoints is false before any metrics")
	}
	early := submit(fc, "early", 0)
	clock.Advance(time.Second - time.Nanosecond)
	if early.done {
		t.Fatal("dropped before NoEndpointsTTL")
	}
	clock.Advance(time.Nanosecond)
	if got := early.outcome(t); got != flowcontrol.OutcomeRejectedNoEndpoints {
		t.Fatalf("outcome %v, want rejected-no-endpoints", got)
	}
	if got := flowcontrol.OutcomeRejectedNoEndpoints.HTTPStatus(); got != 503 {
		t.Fatalf("status %d, want 503", got)
	}

	// An endpoint with room for one: the first request starts, the second
	// waits for the next refresh.
	g.Update("a", gate.Metrics{Waiting: 4})
	first, second := submit(fc, "first", 0), submit(fc, "second", 0)
	if first.outcome(t) != flowcontrol.OutcomeDispatched || second.done {
		t.Fatalf("first done %v err %v, second done %v: want first started, second waiting", first.done, first.err, second.done)
	}
	// The endpoint leaves the pool: Remove nudges the controller, which
	// notes the empty pool, and the waiting request is dropped a
	// NoEndpointsTTL later.
	clock.Advance(50 * time.Millisecond)
	g.Remove("a")
	clock.Advance(time.Second)
	if got := second.outcome(t); got != flowcontrol.OutcomeRejectedNoEndpoints {
		t.Fatalf("second: %v, want rejected-no-endpoints after the pool emptied", got)
	}
	first.adm.Done()
}

func TestSaturationUpdateNudgesTheController(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock})
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g, Clock: clock})
	g.Update("a", gate.Metrics{Waiting: 5}) // saturated
	calls := []*call{submit(fc, "a", 0), submit(fc, "b", 0), submit(fc, "c", 0)}
	for _, c := range calls {
		if c.done {
			t.Fatal("started with the queue at its threshold")
		}
	}
	clock.Advance(100 * time.Millisecond)
	// The scrape shows room for two: two start at once, with no other
	// event, and the third waits.
	g.Update("a", gate.Metrics{Waiting: 3})
	if !calls[0].done || !calls[1].done || calls[2].done {
		t.Fatalf("after the refresh: done %v %v %v, want the first two", calls[0].done, calls[1].done, calls[2].done)
	}
	for _, c := range calls[:2] {
		if c.outcome(t) != flowcontrol.OutcomeDispatched {
			t.Fatal(c.err)
		}
		c.adm.Done()
	}
	if calls[2].done {
		t.Fatal("a Done returned budget: starts are bounded by the metrics, not by completions")
	}
}

// DetectorSaturation is llm-d-router's utilization-detector reading, for
// its gauge: each endpoint's queue depth or KV cache against its
// threshold, capped at 1, averaged.
func TestSaturationDetectorGauge(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock, QueueDepthThreshold: 4, KVCacheUtilThreshold: 0.5})
	if s := g.DetectorSaturation(); s != 1 {
		t.Fatalf("no endpoints: %v, want 1", s)
	}
	g.Update("a", gate.Metrics{Waiting: 1, KVCache: 0.1})  // max(0.25, 0.2) = 0.25
	g.Update("b", gate.Metrics{Waiting: 0, KVCache: 0.25}) // 0.5
	g.Update("c", gate.Metrics{Waiting: 9, KVCache: 0.9})  // capped at 1
	if s, want := g.DetectorSaturation(), (0.25+0.5+1)/3; math.Abs(s-want) > 1e-12 {
		t.Fatalf("DetectorSaturation() = %v, want %v", s, want)
	}
	// The share of the pool in use is the KV cache's without declared
	// slots, whatever the queues: (0.1 + 0.25 + 0.9) / 3.
	if s, want := g.Saturation(), (0.1+0.25+0.9)/3; math.Abs(s-want) > 1e-12 {
		t.Fatalf("Saturation() = %v, want %v", s, want)
	}
}

// With SlotsPerEndpoint declared, the saturation band ceilings read is the
// share of the servers' slots taken — running or queued for one — or of
// their KV cache where that is fuller, stale and invalid endpoints full,
// plus the starts no reading has seen yet; the queue-depth threshold,
// which decides what the gate admits, plays no part in it.
func TestSaturationCountsDeclaredSlots(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock, SlotsPerEndpoint: 16, QueueDepthThreshold: 5})
	if s := g.Saturation(); s != 1 {
		t.Fatalf("no endpoints: %v, want 1", s)
	}
	g.Update("a", gate.Metrics{Running: 4})                // 4 slots
	g.Update("b", gate.Metrics{Running: 6, Waiting: 2})    // 8 slots
	g.Update("c", gate.Metrics{Running: 2, KVCache: 0.75}) // 12 of its 16: the KV cache is fuller
	g.Update("d", gate.Metrics{Running: 16, Waiting: 9})   // all 16, not 25
	if s, want := g.Saturation(), (4.0+8+12+16)/64; s != want {
		t.Fatalf("Saturation() = %v, want %v", s, want)
	}
	if s := g.DetectorSaturation(); s == g.Saturation() {
		t.Fatalf("DetectorSaturation() = %v, the same as the slots' share: it reads the queues", s)
	}

	// Three starts the next scrape has not seen count as three slots.
	for range 3 {
		if !g.TryAcquire(0) {
			t.Fatal("refused with room at a, b and c")
		}
	}
	if s, want := g.Saturation(), (4.0+8+12+16+3)/64; s != want {
		t.Fatalf("after 3 starts: Saturation() = %v, want %v", s, want)
	}
	// A start handed back unused no longer counts.
	g.Returned(gate.Usage{Unused: true})
	if s, want := g.Saturation(), (4.0+8+12+16+2)/64; s != want {
		t.Fatalf("after one start handed back: Saturation() = %v, want %v", s, want)
	}
	// Once every endpoint is scraped again, the readings hold the starts.
	clock.Advance(time.Millisecond)
	for _, name := range []string{"a", "b", "c", "d"} {
		g.Update(name, gate.Metrics{Running: 5})
	}
	if s, want := g.Saturation(), 20.0/64; s != want {
		t.Fatalf("after a full scrape: Saturation() = %v, want %v", s, want)
	}
	// A stale endpoint is full.
	clock.Advance(time.Millisecond)
	g.Update("a", gate.Metrics{Running: 5})
	g.Update("b", gate.Metrics{Running: 5})
	g.Update("c", gate.Metrics{Running: 5})
	clock.Advance(gate.DefaultMetricsStalenessThreshold - time.Millisecond)
	if s, want := g.Saturation(), (5.0+5+5+16)/64; s != want {
		t.Fatalf("with d stale: Saturation() = %v, want %v", s, want)
	}
	// Removed, it is no part of the pool.
	g.Remove("d")
	if s, want := g.Saturation(), 15.0/48; s != want {
		t.Fatalf("with d removed: Saturation() = %v, want %v", s, want)
	}
}

// A ceiling below 1 holds its band back once the declared slots are
// taken, although the queues leave the gate room; a ceiling of 1 leaves
// the decision to the gate, which admits into that room.
func TestSaturationCeilingIsAShareOfTheSlots(t *testing.T) {
	clock := newClock()
	g := must(t, gate.Saturation, gate.SaturationConfig{Clock: clock, SlotsPerEndpoint: 4, QueueDepthThreshold: 5, MetricsStalenessThreshold: time.Hour})
	g.Update("a", gate.Metrics{Running: 4}) // every slot taken, the queue empty: room 5
	for _, tc := range []struct {
		ceiling float64
		want    bool
	}{{0.5, false}, {0.99, false}, {1, true}} {
		c := gate.Ceiling(g, fixedPolicy{ceiling: tc.ceiling})
		if got := c.TryAcquire(0); got != tc.want {
			t.Errorf("ceiling %v with every slot taken: TryAcquire = %v, want %v", tc.ceiling, got, tc.want)
		}
	}
}

func TestSaturationConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg  gate.SaturationConfig
		want string
	}{
		{gate.SaturationConfig{QueueDepthThreshold: -1}, "QueueDepthThreshold (llm-d queueDepthThreshold) -1"},
		{gate.SaturationConfig{KVCacheUtilThreshold: 1.5}, "KVCacheUtilThreshold (llm-d kvCacheUtilThreshold) 1.5"},
		{gate.SaturationConfig{KVCacheUtilThreshold: -0.1}, "KVCacheUtilThreshold"},
		{gate.SaturationConfig{KVCacheUtilThreshold: math.NaN()}, "KVCacheUtilThreshold"},
		{gate.SaturationConfig{MetricsStalenessThreshold: -time.Second}, "MetricsStalenessThreshold (llm-d metricsStalenessThreshold) -1s"},
		{gate.SaturationConfig{SlotsPerEndpoint: -1}, "SlotsPerEndpoint -1: negative"},
		{gate.SaturationConfig{Replicas: -2}, "Replicas -2"},
		{gate.SaturationConfig{Replicas: 2, Replica: 2}, "Replica 2"},
		{gate.SaturationConfig{Replica: -1}, "Replica -1"},
	} {
		_, err := gate.Saturation(tc.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), "gate: "+tc.want) {
			t.Errorf("Saturation(%+v) = %v, want an error starting %q", tc.cfg, err, "gate: "+tc.want)
		}
	}
	if _, err := gate.Saturation(gate.SaturationConfig{KVCacheUtilThreshold: 1, Replicas: 3, Replica: 2}); err != nil {
		t.Errorf("valid configuration refused: %v", err)
	}
}

func TestSaturationServesOneController(t *testing.T) {
	g := must(t, gate.Saturation, gate.SaturationConfig{})
	mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	_, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	if err == nil || !strings.Contains(err.Error(), "another controller") {
		t.Fatalf("a second controller: %v, want refused", err)
	}
	var target interface{ Unwrap() error }
	if !errors.As(err, &target) {
		t.Fatalf("%v does not wrap the gate's error", err)
	}
}

// Ready says why the gate fails closed, and nothing once it has fresh
// metrics.
func TestSaturationReady(t *testing.T) {
	clock := newClock()
	g, err := gate.Saturation(gate.SaturationConfig{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Ready(); err == nil || !strings.Contains(err.Error(), "no endpoint has reported") {
		t.Fatalf("no endpoints: %v", err)
	}
	g.Update("a", gate.Metrics{Waiting: 9}) // fresh, though saturated: ready
	if err := g.Ready(); err != nil {
		t.Fatalf("fresh metrics: %v", err)
	}
	clock.Advance(gate.DefaultMetricsStalenessThreshold)
	if err := g.Ready(); err == nil || !strings.Contains(err.Error(), "none of its 1 endpoints has fresh metrics") {
		t.Fatalf("stale metrics: %v", err)
	}
}

// TestSaturationIsTheSameForTheSameReadings: each saturation — the KV
// cache's, the detector's, the slots' — is a sum over the endpoints taken
// in the order of their names, so the same readings give the same bits
// whatever order they arrived in (a sum in map order
// reads 0.30000000000000004 one time and 0.29999999999999999 the next).
func TestSaturationIsTheSameForTheSameReadings(t *testing.T) {
	readings := map[string]gate.Metrics{}
	for i := range 12 {
		readings[fmt.Sprintf("ep-%02d", i)] = gate.Metrics{Waiting: i % 5, Running: i % 7, KVCache: float64(i) / 17}
	}
	var names []string
	for n := range readings {
		names = append(names, n)
	}
	var want [3]uint64
	for round := range 50 {
		clock := newClock()
		g, err := gate.Saturation(gate.SaturationConfig{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		slots, err := gate.Saturation(gate.SaturationConfig{Clock: clock, SlotsPerEndpoint: 7})
		if err != nil {
			t.Fatal(err)
		}
		rand.New(rand.NewPCG(uint64(round), 1)).Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		for _, n := range names {
			g.Update(n, readings[n])
			slots.Update(n, readings[n])
		}
		got := [3]uint64{math.Float64bits(g.Saturation()), math.Float64bits(g.DetectorSaturation()), math.Float64bits(slots.Saturation())}
		if round == 0 {
			want = got
		} else if got != want {
			t.Fatalf("round %d: saturations (KV cache, detector, slots) %v, round 0 read %v from the same readings", round, floats(got), floats(want))
		}
	}
}

func floats(bits [3]uint64) [3]float64 {
	return [3]float64{math.Float64frombits(bits[0]), math.Float64frombits(bits[1]), math.Float64frombits(bits[2])}
}
