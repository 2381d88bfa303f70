package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// openGate admits every request.
type openGate struct{}

func (openGate) TryAcquire(int) bool { return true }
func (openGate) Release(int)         {}

// meterGate admits every request and keeps the Usage of each.
type meterGate struct {
	openGate
	usage []gate.Usage
}

func (*meterGate) Took(gate.Slot)          {}
func (g *meterGate) Returned(u gate.Usage) { g.usage = append(g.usage, u) }

// serverScenario is a tenant driven by the test over a pool of servers with
// their own queues.
func serverScenario(pool PoolConfig, gate func(*Pool, int) gate.Gate) Config {
	pool.ServerQueues = true
	return Config{
		Seed:        1,
		Duration:    time.Hour,
		Controller:  flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}},
		ReplicaGate: gate,
		Pool:        pool,
		Tenants:     []Tenant{{Name: "t", PromptTokens: Tokens{Mean: 100}, OutputTokens: Tokens{Mean: 10}}},
	}
}

// send sends a request of prompt and output tokens at elapsed time at.
func send(s *Sim, at time.Duration, prompt, output int) *Record {
	r := s.NewRecord(0)
	r.PromptTokens, r.OutputTokens = prompt, output
	s.Clock().At(at, func() { s.Send(r, func(Response) { s.End(r) }) })
	return r
}

// With ServerQueues, each request goes to the server with the fewest
// waiting, then the fewest running, and waits there for a slot; the
// first token is reported to a metered gate when the prefill ends, after
// that wait.
func TestServerQueuesRouteAndReportFirstTokens(t *testing.T) {
	g := &meterGate{}
	s, err := New(serverScenario(PoolConfig{Servers: 2, Slots: 1, Base: 10 * time.Millisecond, PerOutputToken: time.Millisecond},
		func(*Pool, int) gate.Gate { return g }))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*Record
	for range 5 {
		recs = append(recs, send(s, 0, 0, 90)) // 10ms prefill + 90ms decode
	}
	var at1ms [2]ServerMetrics
	s.Clock().At(time.Millisecond, func() { at1ms = [2]ServerMetrics{s.Pool().Metrics(0), s.Pool().Metrics(1)} })
	s.Run()
	// 0 → server 0 runs; 1 → server 1 runs; 2 → server 0 waits (both
	// have none waiting and one running: the lower index); 3 → server 1
	// waits; 4 → server 0 waits.
	if at1ms[0] != (ServerMetrics{Healthy: true, Waiting: 2, Running: 1}) || at1ms[1] != (ServerMetrics{Healthy: true, Waiting: 1, Running: 1}) {
		t.Fatalf("metrics at 1ms: %+v", at1ms)
	}
	if s.Pool().MaxWaiting() != 2 {
		t.Fatalf("MaxWaiting %d, want 2", s.Pool().MaxWaiting())
	}
	wantFirst := []time.Duration{10, 10, 110, 110, 210}
	for i, r := range recs {
		if ttft, _ := r.TTFT(); ttft != wantFirst[i]*time.Millisecond || !r.Served {
			t.Errorf("request %d: TTFT %v, want %vms", i, ttft, wantFirst[i])
		}
	}
	// The gate hears each first token from dispatch (all dispatched at 0).
	if len(g.usage) != 5 {
		t.Fatalf("%d usages", len(g.usage))
	}
	var got []time.Duration
	for _, u := range g.usage {
		got = append(got, u.FirstToken)
	}
	want := []time.Duration{10, 10, 110, 110, 210}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("first tokens heard %v, want %v ms", got, want)
		}
	}
}

// A paged KV cache: the head of a queue starts only when its context
// fits; when decoding outgrows the cache, the request started last is
// preempted by recompute: it keeps the tokens it decoded and its first
// token, waits at the head of the queue, and when it runs again prefills
// its prompt and those tokens before decoding the rest.
func TestKVCachePagesAndPreempts(t *testing.T) {
	s, err := New(serverScenario(PoolConfig{Servers: 1, Slots: 8, KVCacheTokens: 100, PerOutputToken: time.Millisecond},
		func(*Pool, int) gate.Gate { return openGate{} }))
	if err != nil {
		t.Fatal(err)
	}
	a := send(s, 0, 40, 30)                  // no prefill time: holds 40, then one more per ms, to 70 at 30ms
	b := send(s, 5*time.Millisecond, 40, 30) // fits (45+40): holds 40 from 5ms
	c := send(s, 6*time.Millisecond, 30, 10) // 46+41 = 87 held: 30 more do not fit; c waits
	var kv [3]ServerMetrics
	var preempted int
	s.Clock().At(6*time.Millisecond, func() { kv[0] = s.Pool().Metrics(0) })
	// At 13ms a holds 53 and b 48: 101 overflows the cache, and b, started
	// last, is preempted with its 8 tokens kept; its context (48) does not
	// fit beside a (54 at 14ms), so it waits at the head, c behind it.
	s.Clock().At(14*time.Millisecond, func() { kv[1], preempted = s.Pool().Metrics(0), s.Pool().Preemptions() })
	// At 30ms a ends: b runs again (48, recomputed) and c beside it (30).
	s.Clock().At(31*time.Millisecond, func() { kv[2] = s.Pool().Metrics(0) })
	s.Run()
	if kv[0] != (ServerMetrics{Healthy: true, Running: 2, Waiting: 1, KVCache: 0.87}) {
		t.Fatalf("at 6ms: %+v, want 2 running holding 87%%, c waiting", kv[0])
	}
	if kv[1] != (ServerMetrics{Healthy: true, Running: 1, Waiting: 2, KVCache: 0.54}) || preempted != 1 {
		t.Fatalf("at 14ms: %+v after %d preemptions, want a alone (54), b and c waiting, after 1", kv[1], preempted)
	}
	// b: 48 + 1 decoded; c: 30 + 1.
	if kv[2] != (ServerMetrics{Healthy: true, Running: 2, Waiting: 0, KVCache: 0.80}) {
		t.Fatalf("at 31ms: %+v, want b (49) and c (31) running", kv[2])
	}
	for _, r := range []*Record{a, b, c} {
		if !r.Served {
			t.Fatalf("%+v not served", *r)
		}
	}
	// b's first token came at 5ms, before its preemption, and stands; it
	// decodes its 22 tokens left from 30ms, after a prefill of 48 tokens
	// (no prefill time here), and ends at 52ms.
	if ttft, _ := b.TTFT(); ttft != 0 || b.End != 52*time.Millisecond || b.Preemptions != 1 || b.RecomputedTokens != 48 {
		t.Fatalf("b: TTFT %v, end %v, %d preemptions, %d tokens recomputed; want 0, 52ms, 1, 48", ttft, b.End, b.Preemptions, b.RecomputedTokens)
	}
	if a.End != 30*time.Millisecond || c.End != 40*time.Millisecond || a.Preemptions+c.Preemptions != 0 {
		t.Fatalf("a ended at %v, c at %v, %d and %d preemptions; want 30ms and 40ms, none", a.End, c.End, a.Preemptions, c.Preemptions)
	}
	sum := Summarize(s.Records(), nil)
	if sum.Preemptions != 1 || sum.RecomputedTokens != 48 || sum.ServedTokens != 70 || sum.GoodTokens != 70 || sum.WastedTokens != 0 {
		t.Fatalf("summary: %d preemptions, %d recomputed, %d served tokens, %d good, %d wasted; want 1, 48, 70, 70, 0",
			sum.Preemptions, sum.RecomputedTokens, sum.ServedTokens, sum.GoodTokens, sum.WastedTokens)
	}
}

// Replicas: each has its own controller and gate, made with its index;
// attempts go to them in turn.
func TestReplicas(t *testing.T) {
	var made []int
	gates := map[int]*meterGate{}
	cfg := serverScenario(PoolConfig{Servers: 1, Slots: 4, PerOutputToken: time.Millisecond},
		func(_ *Pool, replica int) gate.Gate {
			made = append(made, replica)
			gates[replica] = &meterGate{}
			return gates[replica]
		})
	cfg.Replicas = 3
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Controllers()) != 3 || s.Controller() != s.Controllers()[0] || len(made) != 3 || made[2] != 2 {
		t.Fatalf("controllers %d, gates made %v", len(s.Controllers()), made)
	}
	for i := range 7 {
		send(s, time.Duration(i)*time.Millisecond, 0, 1)
	}
	s.Run()
	if n := []int{len(gates[0].usage), len(gates[1].usage), len(gates[2].usage)}; n[0] != 3 || n[1] != 2 || n[2] != 2 {
		t.Fatalf("requests per replica %v, want 3 2 2", n)
	}

	shared := Config{Seed: 1, Duration: time.Second, Replicas: 2,
		Controller: flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(1)},
		Pool:       PoolConfig{Servers: 1, Slots: 1}}
	if _, err := New(shared); err == nil || !strings.Contains(err.Error(), "Replicas 2 share Controller.Gate") {
		t.Fatalf("two replicas sharing one gate: %v", err)
	}
}

// A phase's token sizes replace the tenant's for the requests that arrive
// in it.
func TestPhaseTokens(t *testing.T) {
	recs, err := Run(Config{
		Seed: 1, Duration: 20 * time.Second,
		Controller: flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}},
		Pool:       PoolConfig{Servers: 1, Slots: 100},
		Tenants: []Tenant{{Name: "t", PromptTokens: Tokens{Mean: 100}, OutputTokens: Tokens{Mean: 10},
			Phases: []Phase{{Rate: 10, For: 10 * time.Second}, {Rate: 10, PromptTokens: Tokens{Mean: 200}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		want := 100
		if r.Arrival >= 10*time.Second {
			want = 200
		}
		if r.PromptTokens != want || r.OutputTokens != 10 {
			t.Fatalf("request at %v: %d prompt, %d output tokens; want %d, 10", r.Arrival, r.PromptTokens, r.OutputTokens, want)
		}
	}
}

// A server that fails with ServerQueues fails the requests waiting in its
// queue too, and its metrics say it is down.
func TestServerQueueFailure(t *testing.T) {
	cfg := serverScenario(PoolConfig{Servers: 2, Slots: 1, PerOutputToken: time.Millisecond,
		Failures: []Failure{{Server: 0, At: 5 * time.Millisecond, For: time.Second}}},
		func(*Pool, int) gate.Gate { return openGate{} })
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*Record
	for range 4 {
		recs = append(recs, send(s, 0, 0, 100))
	}
	var down ServerMetrics
	s.Clock().At(6*time.Millisecond, func() { down = s.Pool().Metrics(0) })
	s.Run()
	if down.Healthy || down.Waiting != 0 || down.Running != 0 {
		t.Fatalf("server 0 after failing: %+v", down)
	}
	failed := 0
	for _, r := range recs {
		failed += r.Failures
	}
	if failed != 2 || !recs[1].Served || !recs[3].Served {
		t.Fatalf("%d failures, want server 0's running and waiting requests (2); served %v %v", failed, recs[1].Served, recs[3].Served)
	}
}
