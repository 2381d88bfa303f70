package fleet_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
)

const period = 100 * time.Millisecond

// replica is one router of a test fleet: a controller whose gate is its
// View's.
type replica struct {
	t     *testing.T
	store *testStore
	view  *fleet.View
	fc    *flowcontrol.FlowController
	adms  map[int][]*flowcontrol.Admission // by band, in admission order
	err   error                            // the last Sync's
	// onAdmit, if set, hears each admission.
	onAdmit func()
	// lossy tolerates capacity rejections.
	lossy bool
}

// testFleet is replicas sharing one Memory store on one manual clock.
type testFleet struct {
	clock *clocktest.Clock
	store *fleet.Memory
	r     []*replica
}

func newFleet(t *testing.T, n int, budget int64, edit func(*fleet.Config)) *testFleet {
	t.Helper()
	clock := clocktest.New(time.Unix(1000, 0))
	f := &testFleet{clock: clock, store: fleet.NewMemory(clock.Now)}
	for i := range n {
		store := &testStore{m: f.store, clock: clock}
		cfg := fleet.Config{
			Store: store, ID: string(rune('a' + i)), Replicas: n, Budget: budget,
			Period: period, Clock: clock,
		}
		if edit != nil {
			edit(&cfg)
		}
		v, err := fleet.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		fc, err := flowcontrol.New(flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{
				{Priority: 10, RequestCapacity: capacity.Bounded(100)},
				{Priority: -1, RequestCapacity: capacity.Bounded(100)},
			},
			FallbackPriority: -1,
			Gate:             v.Gate(),
			Clock:            clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fc.Close)
		f.r = append(f.r, &replica{t: t, store: store, view: v, fc: fc, adms: map[int][]*flowcontrol.Admission{}})
	}
	return f
}

// submit sends n requests of band priority to r; those admitted are kept.
func (r *replica) submit(priority, n int) {
	for range n {
		r.fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "t", Priority: priority}},
			func(a *flowcontrol.Admission, err error) {
				if errors.Is(err, flowcontrol.ErrRejectedShuttingDown) || (r.lossy && errors.Is(err, flowcontrol.ErrRejectedSaturated)) {
					return // the test's end
				}
				if err != nil {
					r.t.Errorf("band %d: %v", priority, err)
					return
				}
				r.adms[priority] = append(r.adms[priority], a)
				if r.onAdmit != nil {
					r.onAdmit()
				}
			})
	}
}

// finish ends the n oldest admissions of band priority.
func (r *replica) finish(priority, n int) {
	for _, a := range r.adms[priority][:n] {
		a.Done()
	}
	r.adms[priority] = r.adms[priority][n:]
}

func (r *replica) running(priority int) int { return len(r.adms[priority]) }

// round advances the clock by a period and syncs the replicas in order.
func (f *testFleet) round(which ...int) {
	f.clock.Advance(period)
	if len(which) == 0 {
		for i := range f.r {
			which = append(which, i)
		}
	}
	for _, i := range which {
		f.r[i].err = f.r[i].view.Sync(context.Background())
	}
}

func TestNewNamesTheField(t *testing.T) {
	store := fleet.NewMemory(nil)
	good := fleet.Config{Store: store, ID: "a", Replicas: 2, Budget: 8, Period: period}
	if _, err := fleet.New(good); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	cases := []struct {
		field string
		edit  func(*fleet.Config)
	}{
		{"Store", func(c *fleet.Config) { c.Store = nil }},
		{"ID", func(c *fleet.Config) { c.ID = "" }},
		{"ID", func(c *fleet.Config) { c.ID = "a\x00" }},
		{"Replicas", func(c *fleet.Config) { c.Replicas = 0 }},
		{"Replicas", func(c *fleet.Config) { c.Replicas = fleet.MaxReplicas + 1 }},
		{"Budget", func(c *fleet.Config) { c.Budget = -1 }},
		{"Budget", func(c *fleet.Config) { c.Budget = fleet.MaxCount + 1 }},
		{"Period", func(c *fleet.Config) { c.Period = 0 }},
		{"Period", func(c *fleet.Config) { c.Period = time.Microsecond }},
		{"Lease", func(c *fleet.Config) { c.Lease = period / 2 }},
		{"Lease", func(c *fleet.Config) { c.Lease = -time.Second }},
		{"Stale", func(c *fleet.Config) { c.Stale = period / 2 }},
		{"MaxSkew", func(c *fleet.Config) { c.MaxSkew = -time.Second }},
		{"MaxSkew", func(c *fleet.Config) { c.MaxSkew = time.Hour }},
		{"Timeout", func(c *fleet.Config) { c.Timeout = -time.Second }},
		{"Overdraft", func(c *fleet.Config) { c.Overdraft = -1 }},
		{"Overdraft", func(c *fleet.Config) { c.Overdraft = fleet.MaxCount + 1 }},
	}
	for _, c := range cases {
		cfg := good
		c.edit(&cfg)
		_, err := fleet.New(cfg)
		if err == nil || !strings.Contains(err.Error(), "Config."+c.field+":") {
			t.Errorf("%s: New = %v, want an error naming Config.%s", c.field, err, c.field)
		}
	}
}

// The budget follows the fleet's highest waiting band: a replica with only
// batch yields to one with chat waiting, slot by slot as its batch ends.
func TestHigherBandTakesTheBudget(t *testing.T) {
	f := newFleet(t, 2, 8, nil)
	a, b := f.r[0], f.r[1]
	if st := a.view.Status(); st.Fallback != fleet.FallbackNotRead || st.Share != 4 {
		t.Fatalf("before any round: %+v, want the static share 4, not read", st)
	}
	a.submit(-1, 8)
	if a.running(-1) != 4 {
		t.Fatalf("static share: %d batch running, want 4", a.running(-1))
	}
	f.round()
	if st := a.view.Status(); st.Fallback != fleet.FallbackNotRead {
		t.Fatalf("after one round: %v, want not-read (the others may not have published)", st.Fallback)
	}
	f.round()
	if st := a.view.Status(); st.Fallback != fleet.Synced || st.Live != 2 || st.Share != 8 {
		t.Fatalf("after two rounds: %+v, want synced, 2 live, share 8", st)
	}
	if a.running(-1) != 8 || b.view.Share() != 0 {
		t.Fatalf("A runs %d batch (want 8, nudged by its grown share), B's share %d (want 0)", a.running(-1), b.view.Share())
	}

	f.round() // A publishes its 8 in flight
	b.submit(10, 3)
	f.round(1, 0) // B publishes chat waiting; A reads it
	if got := b.view.Share(); got != 0 {
		t.Errorf("B's share with A holding all 8: %d, want 0", got)
	}
	if st := a.view.Status(); st.Share != 5 || st.Bands[0].Priority != 10 || st.Bands[0].Granted != 3 || st.Bands[1].Granted != 5 {
		t.Errorf("A's status: %+v, want share 5 of 8, chat granted 3, batch 5", st)
	}
	a.finish(-1, 3)
	if a.running(-1) != 5 {
		t.Fatalf("A started batch over its share: %d running, want 5", a.running(-1))
	}
	f.round(0, 1) // A publishes 5 in flight; B reads it
	if b.running(10) != 3 || b.view.Share() != 3 {
		t.Errorf("B runs %d chat with share %d, want 3 and 3", b.running(10), b.view.Share())
	}
}

// fullOfBatch returns a synced fleet of 2 replicas and a budget of 8, set
// by opt, each replica running its share of 4 batch requests (band -1)
// with 4 more waiting; the lowest band starts nothing past the share.
func fullOfBatch(t *testing.T, opt func(*fleet.Config)) *testFleet {
	t.Helper()
	f := newFleet(t, 2, 8, opt)
	a, b := f.r[0], f.r[1]
	a.submit(-1, 8)
	b.submit(-1, 8)
	f.round()
	f.round()
	f.round()
	if a.running(-1) != 4 || b.running(-1) != 4 || a.view.Share() != 4 {
		t.Fatalf("synced: %d and %d batch running, a's share %d; want 4, 4 and 4", a.running(-1), b.running(-1), a.view.Share())
	}
	a.submit(-1, 1) // the lowest band: never past the share
	if a.running(-1) != 4 {
		t.Fatalf("batch started beyond the share: %d running, want 4", a.running(-1))
	}
	return f
}

// The overdraft: a higher band starts up to B beyond the share while a
// lower band holds one of the replica's slots, and only while synced; the
// lowest band never uses it; the next rounds count what it started, and
// the lower band's slots are not refilled until the fleet is back within
// its budget.
func TestOverdraft(t *testing.T) {
	overdraft := func(c *fleet.Config) { c.Overdraft = 2 }
	fallback := newFleet(t, 2, 8, overdraft).r[0]
	fallback.submit(-1, 6)
	fallback.submit(10, 1)
	if fallback.running(-1) != 4 || fallback.running(10) != 0 {
		t.Fatalf("in fallback: %d batch and %d chat running, want 4 and 0 (the static share, no overdraft)", fallback.running(-1), fallback.running(10))
	}

	f := fullOfBatch(t, overdraft)
	a, b := f.r[0], f.r[1]
	a.submit(10, 3) // chat while batch holds a's slots: 2 start at once, the third waits
	if a.running(10) != 2 || f.inFlight() != 10 {
		t.Fatalf("chat beyond a full share: %d running, fleet %d in flight; want 2 (the overdraft) and 10", a.running(10), f.inFlight())
	}
	// The rounds count the chat as demand: batch ends are not refilled
	// until the fleet is back within 8, and the waiting chat starts in
	// turn.
	for range 4 {
		f.round()
		a.finish(-1, 1)
		b.finish(-1, 1)
		if got := f.inFlight(); got > 10 {
			t.Fatalf("fleet %d in flight, over C + B = 10", got)
		}
	}
	f.round()
	f.round()
	if a.running(10) != 3 || f.inFlight() > 8 {
		t.Errorf("after the rounds: %d chat running, fleet %d in flight; want all 3 and at most 8", a.running(10), f.inFlight())
	}
}

// With PriorityScheduling a higher band passes the share while a lower
// band holds a slot of the replica, while fewer requests of that band and
// above than the budget are in flight fleet-wide (the others' as last
// read); in fallback, up to the static share. The lowest band never
// does, nor a band with nothing lower in flight here.
func TestPriorityScheduling(t *testing.T) {
	ps := func(c *fleet.Config) { c.PriorityScheduling = true }
	fallback := newFleet(t, 2, 8, ps).r[0]
	fallback.submit(-1, 6)
	fallback.submit(10, 6)
	if fallback.running(-1) != 4 || fallback.running(10) != 4 {
		t.Fatalf("in fallback: %d batch and %d chat running, want 4 and 4 (the static share, and as much chat past it)", fallback.running(-1), fallback.running(10))
	}

	f := fullOfBatch(t, ps)
	a, b := f.r[0], f.r[1]
	a.submit(10, 10) // chat while batch holds a's slots: the budget's 8 start at once
	if a.running(10) != 8 {
		t.Fatalf("chat past a full share: %d running, want the budget's 8", a.running(10))
	}
	f.round()
	b.submit(10, 1) // b reads a's 8: none passes
	if b.running(10) != 0 {
		t.Errorf("b started %d chat with the fleet's 8 in flight on a, want 0", b.running(10))
	}
	a.finish(10, 4)
	f.round()
	b.submit(10, 1)
	if b.running(10) == 0 {
		t.Errorf("b started no chat once a held 4 of the budget's 8")
	}

	off := newFleet(t, 2, 8, func(*fleet.Config) {}).r[0]
	off.submit(-1, 4)
	off.submit(10, 1)
	if off.running(10) != 0 {
		t.Errorf("without PriorityScheduling, in fallback: %d chat past the share, want 0", off.running(10))
	}
}

// A band's fleet-wide capacity is divided as the waiting requests and the
// arrivals are, and the headroom read through Reader is the fleet's.
func TestCapacityAndHeadroomAreTheFleets(t *testing.T) {
	f := newFleet(t, 2, 4, func(c *fleet.Config) { c.Capacities = map[int]int64{-1: 20} })
	a, b := f.r[0], f.r[1]
	ra := a.view.Reader(a.fc)
	if got := a.view.Capacity(-1); got != capacity.Bounded(10) {
		t.Errorf("fallback: Capacity = %v, want ⌊20/2⌋", got)
	}
	if s, _ := ra.CapacitySnapshot(-1); s.RequestCapacity != capacity.Bounded(10) {
		t.Errorf("fallback: headroom capacity %v, want the static 10", s.RequestCapacity)
	}
	if got := a.view.Capacity(10); got != capacity.Unbounded() {
		t.Errorf("a band without a fleet capacity: %v, want unbounded", got)
	}
	a.submit(-1, 8) // 2 run (static share), 6 wait
	b.submit(-1, 2) // both run
	f.round()
	f.round()
	// Waiting: a 6, b 0; the room, 14, goes by arrival rate, which is
	// 8:2 between them.
	ca, cb := a.view.Capacity(-1), b.view.Capacity(-1)
	na, _ := ca.Value()
	nb, _ := cb.Value()
	if na+nb != 20 || na <= 6+7 {
		t.Errorf("Capacity: a %v, b %v; want a sum of 20, a more than its 6 waiting and half the room", ca, cb)
	}
	s, err := ra.CapacitySnapshot(-1)
	if err != nil || s.RequestCapacity != capacity.Bounded(20) {
		t.Fatalf("headroom capacity %v, %v; want the fleet's 20", s.RequestCapacity, err)
	}
	local, _ := a.fc.CapacitySnapshot(-1)
	if s.QueuedRequests != local.QueuedRequests {
		t.Errorf("fleet queue %d, want a's live %d and b's none", s.QueuedRequests, local.QueuedRequests)
	}
	a.submit(-1, 1) // live: counted at once
	if s2, _ := ra.CapacitySnapshot(-1); s2.QueuedRequests != s.QueuedRequests+1 {
		t.Errorf("after one more: %d queued, want %d", s2.QueuedRequests, s.QueuedRequests+1)
	}
	rb := b.view.Reader(b.fc)
	if s, _ := rb.CapacitySnapshot(-1); s.QueuedRequests != 6 {
		t.Errorf("b reads %d queued in the fleet, want a's 6 as of the last read", s.QueuedRequests)
	}
}

// testStore is one replica's way to the shared Memory: it can be cut off
// (every call fails), and its publishes can take delay to be seen.
type testStore struct {
	m     *fleet.Memory
	clock *clocktest.Clock
	down  bool
	delay time.Duration
}

var errDown = errors.New("store unreachable")

func (s *testStore) Publish(ctx context.Context, r fleet.Replica, lease time.Duration) error {
	if s.down {
		return errDown
	}
	if s.delay > 0 {
		s.clock.AfterFunc(s.delay, func() { _ = s.m.Publish(ctx, r, lease) })
		return nil
	}
	return s.m.Publish(ctx, r, lease)
}

func (s *testStore) Read(ctx context.Context) ([]fleet.Replica, error) {
	if s.down {
		return nil, errDown
	}
	return s.m.Read(ctx)
}

// inFlight is the fleet's requests in flight.
func (f *testFleet) inFlight() int {
	n := 0
	for _, r := range f.r {
		n += r.fc.InFlight()
	}
	return n
}

// Run makes a round at once and one every Period, on the view's clock,
// until its context is done.
func TestRunRoundsEveryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rounds []time.Time
		v, err := fleet.New(fleet.Config{Store: fleet.NewMemory(nil), ID: "a", Replicas: 1, Budget: 4, Period: period,
			OnRound: func(st fleet.Status) { rounds = append(rounds, st.At) }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		start := time.Now()
		go func() { done <- v.Run(ctx) }()
		time.Sleep(3*period + period/2)
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
		if len(rounds) != 4 {
			t.Fatalf("%d rounds in 3.5 periods, want 4 (one at once)", len(rounds))
		}
		for i, at := range rounds {
			if got := at.Sub(start); got != time.Duration(i)*period {
				t.Errorf("round %d at %v, want %v", i, got, time.Duration(i)*period)
			}
		}
		if st := v.Status(); st.Fallback != fleet.Synced || st.Share != 4 {
			t.Errorf("after Run: %+v, want synced with the whole budget", st)
		}
	})
}

// A slot granted to a higher band is kept from the lower ones until a
// round gives it back; that round nudges the controller, so the lower
// band's queue starts at once, though the share did not change.
func TestBandLimitThatGrowsNudges(t *testing.T) {
	f := newFleet(t, 1, 8, nil)
	a := f.r[0]
	a.submit(10, 2)
	a.submit(-1, 16)
	f.round()
	f.round()
	for range 20 { // the chat arrival rate decays to nothing
		f.round()
	}
	if a.running(10) != 2 || a.running(-1) != 6 {
		t.Fatalf("running %d chat, %d batch; want 2 and 6", a.running(10), a.running(-1))
	}
	a.finish(10, 2)
	if a.running(-1) != 6 {
		t.Fatalf("chat's slots went to batch before a round: %d batch running, want 6", a.running(-1))
	}
	f.round()
	if st := a.view.Status(); st.Share != 8 || a.running(-1) != 8 {
		t.Errorf("after the round: share %d, %d batch running; want 8 and 8, started by the round's nudge", st.Share, a.running(-1))
	}
}

// A replica with more bands than a state carries (MaxBands) publishes
// every slot it holds: the bands past the last it publishes are counted
// in that one, so that the others' caps count them.
func TestStatePastMaxBandsCountsEverySlot(t *testing.T) {
	clock := clocktest.New(time.Unix(1000, 0))
	store := fleet.NewMemory(clock.Now)
	v, err := fleet.New(fleet.Config{Store: store, ID: "a", Replicas: 1, Budget: 100, Period: period, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	var bands []flowcontrol.BandConfig
	for p := range fleet.MaxBands + 6 {
		bands = append(bands, flowcontrol.BandConfig{Priority: p})
	}
	fc, err := flowcontrol.New(flowcontrol.Config{Bands: bands, Gate: v.Gate(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	var adms []*flowcontrol.Admission
	for p := range 8 { // the 8 lowest bands, 6 of them past the 64th
		a, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "t", Priority: p}})
		if err != nil {
			t.Fatal(err)
		}
		adms = append(adms, a)
	}
	if err := v.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	read, err := store.Read(context.Background())
	if err != nil || len(read) != 1 {
		t.Fatalf("Read = %v, %v; want a's state", read, err)
	}
	var inFlight int64
	for _, b := range read[0].Bands {
		inFlight += b.InFlight
	}
	if len(read[0].Bands) != fleet.MaxBands || inFlight != int64(len(adms)) {
		t.Errorf("published %d bands holding %d in flight, want %d bands holding all %d", len(read[0].Bands), inFlight, fleet.MaxBands, len(adms))
	}
	for _, a := range adms {
		a.Done()
	}
}

// A band the last round did not see (provisioned since) passes the share
// as any other, bounded by what the others hold of the bands above it.
func TestPrioritySchedulingNewBand(t *testing.T) {
	f := fullOfBatch(t, func(c *fleet.Config) { c.PriorityScheduling = true })
	a, b := f.r[0], f.r[1]
	b.submit(10, 2) // chat past b's share
	f.round()
	f.round() // a has read b's state since
	if err := a.fc.ProvisionBand(flowcontrol.BandConfig{Priority: 5}); err != nil {
		t.Fatal(err)
	}
	a.submit(5, 10)
	if got := a.running(5); got != 6 {
		t.Errorf("a new band 5 past a's share: %d running, want the budget's 8 less b's 2 chat", got)
	}
}

// The view's gate says its servers preempt exactly when
// Config.PriorityScheduling is on.
func TestGateServersPreempt(t *testing.T) {
	for _, ps := range []bool{false, true} {
		f := newFleet(t, 1, 4, func(c *fleet.Config) { c.PriorityScheduling = ps })
		pg, ok := f.r[0].view.Gate().(gate.PreemptingGate)
		if !ok || pg.ServersPreempt() != ps {
			t.Errorf("PriorityScheduling %v: a PreemptingGate %v reporting %v", ps, ok, ok && pg.ServersPreempt())
		}
	}
}
