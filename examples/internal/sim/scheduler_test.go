package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"pgregory.net/rapid"
)

// The tenants of the scheduler tests, by band: the router hands each
// request's band to its server as the priority −band (PriorityOf), so
// the higher band runs first.
const (
	hiTenant  = iota // band 10: priority −10
	midTenant        // band 0: priority 0
	loTenant         // band −1: priority 1
)

func handOff(band int) int { return -band }

// schedScenario is a pool of servers with their own queues behind a gate
// that admits everything, so that every request reaches a server at once
// and the servers' schedulers alone decide.
func schedScenario(pool PoolConfig) Config {
	pool.ServerQueues = true
	return Config{
		Seed: 1, Duration: time.Hour,
		Controller: flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}, {Priority: -1}}},
		Gate:       func(*Pool) gate.Gate { return openGate{} },
		Pool:       pool,
		Tenants:    []Tenant{hiTenant: {Name: "hi", Priority: 10}, midTenant: {Name: "mid", Priority: 0}, loTenant: {Name: "lo", Priority: -1}},
	}
}

// sendFrom sends a request of tenant with prompt and output tokens at
// elapsed time at.
func sendFrom(s *Sim, tenant int, at time.Duration, prompt, output int) *Record {
	r := s.NewRecord(tenant)
	r.PromptTokens, r.OutputTokens = prompt, output
	s.Clock().At(at, func() { s.Send(r, func(Response) { s.End(r) }) })
	return r
}

// ms is n milliseconds, for the tables of expected instants.
func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// The priority scheduler runs a server's queue by (priority, arrival):
// a high-priority request overtakes the low ones queued before it, and a
// running request of the same priority is not preempted. First come runs
// the queue in arrival order, and so does the priority scheduler without
// a hand-off (every request at priority 0).
func TestSchedulerOrdersTheQueue(t *testing.T) {
	for _, tc := range []struct {
		name      string
		scheduler Scheduler
		priority  func(int) int
		// ends of h0, l1, l2, m3, h4: each runs 20ms (10ms prefill, 10
		// tokens of 1ms) after the one before it.
		ends [5]float64
	}{
		{"fcfs", FirstCome, nil, [5]float64{20, 40, 60, 80, 100}},
		{"priority without hand-off", Priority, nil, [5]float64{20, 40, 60, 80, 100}},
		{"priority", Priority, handOff, [5]float64{20, 80, 100, 60, 40}},
	} {
		s, err := New(schedScenario(PoolConfig{Servers: 1, Slots: 1, Base: 10 * time.Millisecond, PerOutputToken: time.Millisecond,
			Scheduler: tc.scheduler, PriorityOf: tc.priority}))
		if err != nil {
			t.Fatal(err)
		}
		recs := []*Record{
			sendFrom(s, hiTenant, 0, 0, 10),
			sendFrom(s, loTenant, ms(1), 0, 10),
			sendFrom(s, loTenant, ms(1), 0, 10),
			sendFrom(s, midTenant, ms(1), 0, 10),
			sendFrom(s, hiTenant, ms(1), 0, 10),
		}
		s.Run()
		for i, r := range recs {
			if r.End != ms(tc.ends[i]) || r.Preemptions != 0 {
				t.Errorf("%s: request %d ended at %v after %d preemptions, want %vms and none", tc.name, i, r.End, r.Preemptions, tc.ends[i])
			}
		}
	}
}

// A waiting request that finds no free slot preempts the running request
// of lowest priority — not the one started last — which keeps its first
// token and the tokens it decoded, goes back to the queue ahead of the
// requests of its priority that arrived after it, and, when it runs
// again, prefills its prompt and those tokens before decoding the rest.
// Among running requests of the same priority the latest arrival goes.
// First come preempts nothing.
func TestPriorityPreemptsTheLowestForAWaitingRequest(t *testing.T) {
	// 10ms + 100µs per prompt token, 1ms per output token: a 100-token
	// prompt prefills in 20ms.
	pool := PoolConfig{Servers: 1, Slots: 2, Base: 10 * time.Millisecond, PerPromptToken: 100 * time.Microsecond,
		PerOutputToken: time.Millisecond, Scheduler: Priority, PriorityOf: handOff}
	type want struct {
		ttft, end               time.Duration
		preemptions, recomputed int
	}
	for _, tc := range []struct {
		name    string
		pool    PoolConfig
		second  int // the tenant of the request that runs beside a
		a, b, d want
		h       want
	}{{
		// a (lo) and b (mid) run; d (lo) waits. At 40ms h finds both
		// slots taken and preempts a, lower than b although b started
		// later, with 20 tokens decoded (from 20ms). h runs 40–70ms; then
		// a, ahead of d, prefills 120 tokens (22ms) and decodes its 80
		// left: 70 + 22 + 80 = 172ms. d runs when b ends, at 121ms.
		name: "priority", pool: pool, second: midTenant,
		a: want{ms(20), ms(172), 1, 120}, b: want{ms(20), ms(121), 0, 0},
		d: want{ms(139), ms(241), 0, 0}, h: want{ms(20), ms(70), 0, 0},
	}, {
		// a and b both lo: b, the later arrival, goes, with 19 tokens
		// (from 21ms); it prefills 119 tokens (21.9ms) from 70ms and
		// decodes its 81 left.
		name: "priority, a tie", pool: pool, second: loTenant,
		a: want{ms(20), ms(120), 0, 0}, b: want{ms(20), ms(172.9), 1, 119},
		d: want{ms(138), ms(240), 0, 0}, h: want{ms(20), ms(70), 0, 0},
	}, {
		// First come: h waits for a slot, behind d.
		name: "fcfs", pool: PoolConfig{Servers: 1, Slots: 2, Base: 10 * time.Millisecond, PerPromptToken: 100 * time.Microsecond,
			PerOutputToken: time.Millisecond}, second: midTenant,
		a: want{ms(20), ms(120), 0, 0}, b: want{ms(20), ms(121), 0, 0},
		d: want{ms(138), ms(240), 0, 0}, h: want{ms(101), ms(151), 0, 0},
	}} {
		s, err := New(schedScenario(tc.pool))
		if err != nil {
			t.Fatal(err)
		}
		a := sendFrom(s, loTenant, 0, 100, 100)
		b := sendFrom(s, tc.second, ms(1), 100, 100)
		d := sendFrom(s, loTenant, ms(2), 100, 100)
		h := sendFrom(s, hiTenant, ms(40), 100, 10)
		var at50 ServerMetrics
		s.Clock().At(ms(50), func() { at50 = s.Pool().Metrics(0) })
		s.Run()
		for name, c := range map[string]struct {
			r *Record
			w want
		}{"a": {a, tc.a}, "b": {b, tc.b}, "d": {d, tc.d}, "h": {h, tc.h}} {
			r, w := c.r, c.w
			if ttft, served := r.TTFT(); !served || ttft != w.ttft || r.End != w.end || r.Preemptions != w.preemptions || r.RecomputedTokens != w.recomputed {
				t.Errorf("%s: %s: TTFT %v, end %v, %d preemptions, %d tokens recomputed; want %+v",
					tc.name, name, ttft, r.End, r.Preemptions, r.RecomputedTokens, w)
			}
		}
		// Priority: h and b run, a and d wait; first come: a and b run, d
		// and h wait.
		if at50.Waiting != 2 || at50.Running != 2 {
			t.Errorf("%s: at 50ms %+v: want 2 running, 2 waiting", tc.name, at50)
		}
		sum := Summarize(s.Records(), nil)
		if sum.Preemptions != tc.a.preemptions+tc.b.preemptions || sum.RecomputedTokens != tc.a.recomputed+tc.b.recomputed ||
			sum.ServedTokens != 310 || sum.GoodTokens != 310 || sum.WastedTokens != 0 {
			t.Errorf("%s: summary %+v", tc.name, sum)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// With a KV-cache budget, a waiting request preempts a lower one when its
// context does not fit, even with slots free; a lower one that does not
// fit waits, and preempts nothing. When decoding outgrows the cache, the
// priority scheduler preempts the lowest priority, not the one started
// last.
func TestPriorityPreemptsForKVCache(t *testing.T) {
	t.Run("for a waiting request", func(t *testing.T) {
		s, err := New(schedScenario(PoolConfig{Servers: 1, Slots: 8, KVCacheTokens: 100, PerOutputToken: time.Millisecond,
			Scheduler: Priority, PriorityOf: handOff}))
		if err != nil {
			t.Fatal(err)
		}
		lo := sendFrom(s, loTenant, 0, 60, 30)       // holds 60, and 1 more per ms
		hi := sendFrom(s, hiTenant, ms(10), 50, 20)  // 70 + 50 > 100: preempts lo, which keeps 10
		mid := sendFrom(s, midTenant, ms(12), 20, 5) // overtakes lo: 52 + 20 fits
		lo2 := sendFrom(s, loTenant, ms(20), 10, 5)  // would fit, but lo (70) is the head and cannot
		var at13 ServerMetrics
		s.Clock().At(ms(13), func() { at13 = s.Pool().Metrics(0) })
		s.Run()
		// At 13ms: hi 53, mid 21; lo waits, and preempts nothing of a
		// higher priority.
		if at13 != (ServerMetrics{Healthy: true, Running: 2, Waiting: 1, KVCache: 0.74}) {
			t.Errorf("at 13ms %+v: want hi (53) and mid (21) running, lo waiting", at13)
		}
		// hi ends at 30ms; lo prefills its 70 tokens then and decodes its
		// 20 left, lo2 beside it.
		if lo.Preemptions != 1 || lo.RecomputedTokens != 70 || lo.End != ms(50) || hi.End != ms(30) || mid.End != ms(17) ||
			lo2.End != ms(35) || hi.Preemptions+mid.Preemptions+lo2.Preemptions != 0 {
			t.Errorf("lo: %d preemptions, %d recomputed, ends %v; hi ends %v, mid %v, lo2 %v; want 1, 70, 50ms; 30ms, 17ms, 35ms",
				lo.Preemptions, lo.RecomputedTokens, lo.End, hi.End, mid.End, lo2.End)
		}
	})
	t.Run("when decoding outgrows it", func(t *testing.T) {
		for _, tc := range []struct {
			scheduler       Scheduler
			priority        func(int) int
			loEnd, hiEnd    time.Duration
			loKept, hiKept  int
			preemptedTenant int
		}{
			// lo started first: the priority scheduler preempts it at
			// 13ms with 13 tokens; it runs again when hi ends (35ms).
			{Priority, handOff, ms(52), ms(35), 13, 0, loTenant},
			// First come preempts hi, started last, with 8 tokens; it runs
			// again when lo ends (30ms).
			{FirstCome, nil, ms(30), ms(52), 0, 8, hiTenant},
		} {
			s, err := New(schedScenario(PoolConfig{Servers: 1, Slots: 8, KVCacheTokens: 100, PerOutputToken: time.Millisecond,
				Scheduler: tc.scheduler, PriorityOf: tc.priority}))
			if err != nil {
				t.Fatal(err)
			}
			lo := sendFrom(s, loTenant, 0, 40, 30)
			hi := sendFrom(s, hiTenant, ms(5), 40, 30)
			s.Run()
			if lo.End != tc.loEnd || hi.End != tc.hiEnd || lo.RecomputedTokens != boolInt(tc.loKept > 0)*(40+tc.loKept) ||
				hi.RecomputedTokens != boolInt(tc.hiKept > 0)*(40+tc.hiKept) || s.Pool().Preemptions() != 1 {
				t.Errorf("%v: lo ends %v (%d recomputed), hi %v (%d), %d preemptions; want %v, %v, one preemption of tenant %d",
					tc.scheduler, lo.End, lo.RecomputedTokens, hi.End, hi.RecomputedTokens, s.Pool().Preemptions(), tc.loEnd, tc.hiEnd, tc.preemptedTenant)
			}
		}
	})
}

// A preempted attempt that the router aborts while it waits loses the
// tokens it kept: they count as wasted.
func TestAbortAfterPreemptionWastesTheKeptTokens(t *testing.T) {
	s, err := New(schedScenario(PoolConfig{Servers: 1, Slots: 1, PerOutputToken: time.Millisecond, Scheduler: Priority, PriorityOf: handOff}))
	if err != nil {
		t.Fatal(err)
	}
	lo := sendFrom(s, loTenant, 0, 10, 100)
	sendFrom(s, hiTenant, ms(25), 10, 100)
	s.Clock().At(ms(30), func() { s.Pool().Abort(lo) })
	s.Run()
	if lo.Preemptions != 1 || lo.Aborts != 1 || lo.WastedTokens != 25 || lo.Served {
		t.Fatalf("lo %+v: want preempted with 25 tokens, then aborted with them wasted", *lo)
	}
}

// The scheduler's configuration is checked: priority needs the servers'
// own queues, and a hand-off needs the priority scheduler.
func TestSchedulerConfiguration(t *testing.T) {
	for _, tc := range []struct {
		pool PoolConfig
		want string
	}{
		{PoolConfig{Servers: 1, Slots: 1, Scheduler: Priority}, "Pool.Scheduler is Priority without ServerQueues"},
		{PoolConfig{Servers: 1, Slots: 1, ServerQueues: true, PriorityOf: handOff}, "Pool.PriorityOf is set but Pool.Scheduler is FirstCome"},
		{PoolConfig{Servers: 1, Slots: 1, ServerQueues: true, Scheduler: 7}, "Pool.Scheduler Scheduler(7)"},
	} {
		cfg := schedScenario(tc.pool)
		cfg.Pool.ServerQueues = tc.pool.ServerQueues
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one with %q", tc.pool, err, tc.want)
		}
	}
	if FirstCome.String() != "fcfs" || Priority.String() != "priority" {
		t.Errorf("names %q, %q: want vLLM's fcfs and priority", FirstCome, Priority)
	}
}

// Whatever arrives, the priority scheduler never leaves a priority
// inversion standing: after every event, a server whose queue is not
// empty runs nothing of a higher priority value than the head of its
// queue. Every request is served, with its first token once, and the
// tokens recomputed are at least each resumed run's prompt.
func TestPrioritySchedulerProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		kv := rapid.SampledFrom([]int{0, 200, 400}).Draw(rt, "kv")
		pool := PoolConfig{Servers: rapid.IntRange(1, 3).Draw(rt, "servers"), Slots: rapid.IntRange(1, 3).Draw(rt, "slots"),
			KVCacheTokens: kv, Base: time.Millisecond, PerPromptToken: 10 * time.Microsecond, PerOutputToken: time.Millisecond,
			Scheduler: Priority, PriorityOf: handOff}
		s, err := New(schedScenario(pool))
		if err != nil {
			rt.Fatal(err)
		}
		n := rapid.IntRange(1, 30).Draw(rt, "requests")
		var recs []*Record
		for i := range n {
			tenant := rapid.IntRange(0, 2).Draw(rt, "tenant")
			at := ms(float64(rapid.IntRange(0, 200).Draw(rt, "at")))
			prompt, output := rapid.IntRange(1, 150).Draw(rt, "prompt"), rapid.IntRange(1, 40).Draw(rt, "output")
			recs = append(recs, sendFrom(s, tenant, at, prompt, output))
			// A check just after each arrival and at a few instants
			// between: the state between two events.
			s.Clock().At(at+time.Nanosecond, func() { checkNoInversion(rt, s, i) })
		}
		for k := range 40 {
			s.Clock().At(ms(float64(10*k))+time.Nanosecond, func() { checkNoInversion(rt, s, -1) })
		}
		s.Run()
		for i, r := range recs {
			if !r.Served || r.RecomputedTokens < r.Preemptions*r.PromptTokens || (r.Preemptions == 0) != (r.RecomputedTokens == 0) {
				rt.Fatalf("request %d: %+v", i, *r)
			}
			if ttft, _ := r.TTFT(); ttft < pool.Base || r.End-r.Arrival < pool.Base+time.Duration(r.OutputTokens)*pool.PerOutputToken {
				rt.Fatalf("request %d ran faster than a server can: %+v", i, *r)
			}
		}
	})
}

func checkNoInversion(rt *rapid.T, s *Sim, after int) {
	p := s.Pool()
	for i := range p.servers {
		sv := &p.servers[i]
		if len(sv.queue) == 0 {
			continue
		}
		for _, j := range sv.running {
			if j.priority > sv.queue[0].priority {
				rt.Fatalf("at %v (after request %d), server %d runs priority %d while %d waits", s.Clock().Elapsed(), after, i, j.priority, sv.queue[0].priority)
			}
		}
	}
}

// The hand-off gets the band each attempt was admitted from: a request
// asking for a priority that has no band runs in the fallback band, and
// its server sees that band's priority.
func TestHandOffIsTheEffectiveBand(t *testing.T) {
	var seen []int
	cfg := schedScenario(PoolConfig{Servers: 1, Slots: 1, Scheduler: Priority,
		PriorityOf: func(band int) int { seen = append(seen, band); return -band }})
	cfg.Controller.FallbackPriority = -1
	cfg.Tenants = append(cfg.Tenants, Tenant{Name: "unbanded", Priority: 5})
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sendFrom(s, 3, 0, 1, 1)
	sendFrom(s, hiTenant, ms(1), 1, 1)
	s.Run()
	if len(seen) != 2 || seen[0] != -1 || seen[1] != 10 {
		t.Fatalf("PriorityOf saw bands %v, want [-1 10]: the fallback band, then chat's", seen)
	}
}
