package sim

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// scenario is five simulated minutes of about 10,000 requests: two tenants
// over a pool of 16 slots, one steady and interactive, one batch that
// bursts after an idle gap and retries.
func scenario() Config {
	return Config{
		Seed:     1,
		Duration: 5 * time.Minute,
		Controller: flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{
				{Priority: 10, RequestCapacity: capacity.Bounded(32), TTL: 5 * time.Second},
				{Priority: 0, RequestCapacity: capacity.Bounded(64), TTL: 2 * time.Second},
			},
		},
		Pool: PoolConfig{Servers: 4, Slots: 4, Base: 20 * time.Millisecond,
			PerPromptToken: 50 * time.Microsecond, PerOutputToken: 4 * time.Millisecond},
		Tenants: []Tenant{
			{Name: "chat", Priority: 10, SLO: time.Second,
				PromptTokens: Tokens{Mean: 800, Sigma: 0.6}, OutputTokens: Tokens{Mean: 60, Sigma: 0.6},
				Phases: []Phase{{Rate: 25}}},
			{Name: "batch", Priority: 0,
				PromptTokens: Tokens{Mean: 2000, Sigma: 0.4}, OutputTokens: Tokens{Mean: 150, Sigma: 0.4},
				Phases: []Phase{{Rate: 10, For: 40 * time.Second}, {Rate: 0, For: 30 * time.Second}, {Rate: 60, For: 5 * time.Second}},
				Retry:  SDKRetry},
		},
	}
}

func run(t testing.TB, cfg Config) []*Record {
	t.Helper()
	recs, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// dump prints every record, one line each.
func dump(recs []*Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%+v\n", *r)
	}
	return b.String()
}

func TestRunIsDeterministic(t *testing.T) {
	cfg := scenario()
	first, second := dump(run(t, cfg)), dump(run(t, cfg))
	if first != second {
		t.Fatal("same seed, different records")
	}
	cfg.Seed++
	if dump(run(t, cfg)) == first {
		t.Fatal("seeds 1 and 2 gave the same records")
	}
}

// Every request ends exactly once, its attempts add up, and the controller
// and the pool are empty at the end.
func TestEveryRequestEnds(t *testing.T) {
	cfg := scenario()
	cfg.Pool.Failures = []Failure{{Server: 1, At: 30 * time.Second, For: 20 * time.Second}}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := s.Run()
	if n := len(recs); n < 9000 || n > 11000 {
		t.Errorf("%d requests, want about 10,000", n)
	}
	sum := Summarize(recs, nil)
	if sum.Requests != len(recs) {
		t.Errorf("%d of %d requests ended", sum.Requests, len(recs))
	}
	if sum.Served+sum.GaveUp != sum.Requests {
		t.Errorf("served %d + gave up %d != %d requests", sum.Served, sum.GaveUp, sum.Requests)
	}
	drops := 0
	for _, n := range sum.Drops {
		drops += n
	}
	if sum.Attempts != sum.Served+drops+sum.Failures {
		t.Errorf("%d attempts, want served %d + drops %d + failures %d", sum.Attempts, sum.Served, drops, sum.Failures)
	}
	if sum.Failures == 0 {
		t.Error("no attempt failed with the server")
	}
	if sum.CapacityRejections() == 0 || sum.Drops[flowcontrol.OutcomeRejectedTTLExpired] == 0 {
		t.Errorf("drops %v: want capacity rejections and expiries", sum.Drops)
	}
	if in := s.Controller().InFlight(); in != 0 {
		t.Errorf("%d admissions in flight at the end", in)
	}
	for _, p := range []int{10, 0} {
		if snap, _ := s.Controller().CapacitySnapshot(p); snap.QueuedRequests != 0 {
			t.Errorf("band %d: %d queued at the end", p, snap.QueuedRequests)
		}
	}
	if s.Pool().Running() != 0 || s.Pool().HealthySlots() != 16 {
		t.Errorf("pool: %d running, %d healthy slots at the end", s.Pool().Running(), s.Pool().HealthySlots())
	}
}

// Open-loop arrivals follow their phases: nothing arrives in an idle gap,
// and a phase's count is close to rate × length.
func TestPhases(t *testing.T) {
	cfg := scenario()
	cfg.Tenants = cfg.Tenants[1:]
	cfg.Tenants[0].Phases = []Phase{{Rate: 0, For: 10 * time.Second}, {Rate: 100, For: 10 * time.Second}}
	cfg.Duration = 40 * time.Second
	var counts [4]int
	for _, r := range run(t, cfg) {
		counts[r.Arrival/(10*time.Second)]++
	}
	if counts[0] != 0 || counts[2] != 0 {
		t.Errorf("arrivals per 10s: %v, want none in the idle phases", counts)
	}
	for _, i := range []int{1, 3} {
		if counts[i] < 900 || counts[i] > 1100 {
			t.Errorf("arrivals per 10s: %v, want about 1000 in the busy phases", counts)
		}
	}
}

// Closed-loop clients have at most one request each outstanding.
func TestClosedLoop(t *testing.T) {
	cfg := scenario()
	cfg.Tenants = []Tenant{{Name: "c", Clients: 5, Think: 100 * time.Millisecond,
		OutputTokens: Tokens{Mean: 100}}}
	cfg.Duration = time.Minute
	recs := run(t, cfg)
	// With 5 clients over 16 slots nobody waits: each request takes
	// 20ms + 100×4ms = 420ms, plus a think time.
	sum := Summarize(recs, nil)
	if sum.GaveUp != 0 || Percentile(sum.Latency, 100) != 420*time.Millisecond {
		t.Errorf("gave up %d, max latency %v: want 0 and 420ms", sum.GaveUp, Percentile(sum.Latency, 100))
	}
	// Each client cycles every 420ms + 100ms on average.
	if n := len(recs); n < 520 || n > 640 {
		t.Errorf("%d requests, want about 577", n)
	}
}

// Retries honour the Retry-After they are given, and fall back to the
// backoff without one.
func TestRetryDelays(t *testing.T) {
	cfg := scenario()
	cfg.Tenants = []Tenant{{Name: "r", Phases: []Phase{{Rate: 1, For: 0}}, OutputTokens: Tokens{Mean: 10},
		Retry: Retry{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: time.Second, MaxRetryAfter: time.Minute}}}
	cfg.Controller.Bands = []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(0)}}
	cfg.Duration = 10 * time.Second
	cfg.RetryAfter = func(*Sim, *flowcontrol.RejectionError) time.Duration { return 7 * time.Second }
	for _, r := range run(t, cfg) {
		if r.Served || r.Attempts != 3 || r.Wasted != 2 || r.Latency() != 14*time.Second {
			t.Fatalf("record %+v: want 3 attempts rejected 7s apart", *r)
		}
	}
	cfg.RetryAfter = func(*Sim, *flowcontrol.RejectionError) time.Duration { return 0 }
	for _, r := range run(t, cfg) {
		// Backoff 1s, then 1s capped, each shortened by up to 25%.
		if l := r.Latency(); r.Attempts != 3 || l < 1500*time.Millisecond || l > 2*time.Second {
			t.Fatalf("record %+v: want 3 attempts within 1.5–2s", *r)
		}
	}
}

// An expiry's Retry-After reaches the client as a capacity rejection's
// does, and the client honours it: the controller's own value (the band
// measured not to drain, 30s, after each 2s wait), or Config.RetryAfter's.
func TestRetryAfterOfAnExpiry(t *testing.T) {
	cfg := scenario()
	cfg.Tenants = []Tenant{{Name: "r", Phases: []Phase{{Rate: 1, For: 0}}, OutputTokens: Tokens{Mean: 10},
		Retry: Retry{MaxAttempts: 2, Backoff: time.Second, MaxBackoff: time.Second, MaxRetryAfter: time.Minute}}}
	cfg.Controller.Bands = []flowcontrol.BandConfig{{Priority: 0, TTL: 2 * time.Second}}
	cfg.Gate = func(*Pool) gate.Gate { return gate.MaxInFlight(0) } // nothing ever starts
	cfg.Duration = 3 * time.Second
	for _, r := range run(t, cfg) {
		if r.Served || r.Attempts != 2 || r.Drops[flowcontrol.OutcomeRejectedTTLExpired] != 2 || r.Latency() != 34*time.Second {
			t.Fatalf("record %+v: want 2 attempts, each expired after 2s, 30s apart", *r)
		}
	}
	cfg.RetryAfter = func(_ *Sim, rej *flowcontrol.RejectionError) time.Duration {
		if rej.Outcome != flowcontrol.OutcomeRejectedTTLExpired {
			t.Fatalf("Config.RetryAfter called for %v", rej.Outcome)
		}
		return 5 * time.Second
	}
	for _, r := range run(t, cfg) {
		if r.Attempts != 2 || r.Latency() != 9*time.Second {
			t.Fatalf("record %+v: want 2 attempts 2s + 5s + 2s", *r)
		}
	}
}

func TestPercentile(t *testing.T) {
	var v []time.Duration
	for i := 1; i <= 200; i++ {
		v = append(v, time.Duration(i))
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 100}, {95, 190}, {99, 198}, {100, 200}, {0.1, 1}} {
		if got := Percentile(v, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		field string
		mod   func(*Config)
	}{
		{"Duration", func(c *Config) { c.Duration = 0 }},
		{"Horizon", func(c *Config) { c.Horizon = -1 }},
		{"Clock", func(c *Config) { c.Controller.Clock = NewClock(epoch) }},
		{"Servers", func(c *Config) { c.Pool.Servers = 0 }},
		{"Slots", func(c *Config) { c.Pool.Slots = 0 }},
		{"Failures[0]", func(c *Config) { c.Pool.Failures = []Failure{{Server: 4, For: 1}} }},
		{"Phases[0]", func(c *Config) { c.Tenants[0].Phases[0].Rate = 1e9 }},
		{"tokens", func(c *Config) { c.Tenants[0].OutputTokens.Sigma = -1 }},
		{"Clients", func(c *Config) { c.Tenants[0].Clients = 2 }},
		{"Backoff", func(c *Config) { c.Tenants[1].Retry.Backoff = 0 }},
		{"Bands", func(c *Config) { c.Controller.Bands = nil }},
	} {
		cfg := scenario()
		tc.mod(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got error %v, want one naming it", tc.field, err)
		}
	}
}

// BenchmarkFiveMinutes runs the five-minute, 10,000-request scenario: the
// figure to hold against "well under a second".
func BenchmarkFiveMinutes(b *testing.B) {
	cfg := scenario()
	for b.Loop() {
		if _, err := Run(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// A minute of a steady tenant over two servers: each request goes through
// the real controller on the virtual clock.
func Example() {
	recs, err := Run(Config{
		Seed:     1,
		Duration: time.Minute,
		Controller: flowcontrol.Config{Bands: []flowcontrol.BandConfig{
			{Priority: 0, RequestCapacity: capacity.Bounded(20), TTL: 10 * time.Second},
		}},
		Pool: PoolConfig{Servers: 2, Slots: 4, Base: 50 * time.Millisecond, PerOutputToken: 5 * time.Millisecond},
		Tenants: []Tenant{{
			Name:         "chat",
			SLO:          2 * time.Second,
			OutputTokens: Tokens{Mean: 200, Sigma: 0.5},
			Phases:       []Phase{{Rate: 7}},
			Retry:        SDKRetry,
		}},
	})
	if err != nil {
		panic(err)
	}
	s := Summarize(recs, nil)
	fmt.Fprintf(os.Stdout, "requests %d, served %d, SLO met %.1f%%, p50 %v, p99 %v, retries %d (wasted %d), gave up %d\n",
		s.Requests, s.Served, 100*s.SLOShare(), Percentile(s.Latency, 50).Round(time.Millisecond),
		Percentile(s.Latency, 99).Round(time.Millisecond), s.Retries, s.WastedRetries, s.GaveUp)
	// Output:
	// requests 433, served 433, SLO met 100.0%, p50 1.195s, p99 3.507s, retries 0 (wasted 0), gave up 0
}

// Record.Drops has room for every outcome the controller defines.
func TestDropsHoldEveryOutcome(t *testing.T) {
	for o := flowcontrol.OutcomeDispatched; ; o++ {
		if strings.HasPrefix(o.String(), "Outcome(") {
			if int(o) > NumOutcomes {
				t.Errorf("outcomes 0..%d exist, Record.Drops holds %d: raise NumOutcomes", o-1, NumOutcomes)
			}
			return
		}
	}
}
