package fleet_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/fleet"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// The tests of the consistency promise written on View.Gate, each on the
// Memory store and a manual clock.

// admission is one admission of the fleet, in the order they were made.
type admission struct {
	replica int
	at      time.Time
}

// The fleet over-admits by at most the overdraft and what the other
// replicas admitted within 2P + δ of the fleet's latest admission: fleet
// in flight ≤ C + B + Σ_{j≠r} a_j(2P + δ), under random arrivals and ends,
// with staggered rounds and a store that shows each publish δ late;
// without an overdraft (B = 0) and with one (B = 2).
func TestOverAdmissionBound(t *testing.T) {
	const (
		replicas = 3
		budget   = 12
		step     = 10 * time.Millisecond
		delay    = 30 * time.Millisecond
	)
	window := 2*period + delay
	for _, overdraft := range []int64{0, 2} {
		sawOver, sawOverdraft := false, false
		for seed := range uint64(8) {
			rng := rand.New(rand.NewPCG(seed, 0))
			f := newFleet(t, replicas, budget, func(c *fleet.Config) { c.Overdraft = overdraft })
			var log []admission
			for _, r := range f.r {
				r.lossy = true
			}
			for i, r := range f.r {
				r.store.delay = delay
				r.onAdmit = func() { log = append(log, admission{i, f.clock.Now()}) }
			}
			for n := range 600 {
				f.clock.Advance(step)
				for i, r := range f.r {
					if n%10 == (i*10/replicas)%10 { // each replica's round, staggered
						r.err = r.view.Sync(context.Background())
					}
					if rng.IntN(3) == 0 {
						r.submit([]int{10, -1}[rng.IntN(2)], 1+rng.IntN(3))
					}
					for _, p := range []int{10, -1} {
						if k := r.running(p); k > 0 && rng.IntN(4) == 0 {
							r.finish(p, 1+rng.IntN(k))
						}
					}
					if int64(r.fc.InFlight()) > r.view.Share() {
						sawOverdraft = true
					}
				}
				if len(log) == 0 {
					continue
				}
				last := log[len(log)-1]
				bound := budget + int(overdraft)
				for _, a := range log {
					if a.replica != last.replica && !a.at.Before(last.at.Add(-window)) {
						bound++
					}
				}
				if got := f.inFlight(); got > bound {
					t.Fatalf("B = %d, seed %d, step %d: %d in flight, more than C + B + the others' admissions within 2P+δ = %d", overdraft, seed, n, got, bound)
				} else if got > budget {
					sawOver = true
				}
			}
		}
		if !sawOver {
			t.Errorf("B = %d: the fleet never held more than C: the test does not reach the bound's term", overdraft)
		}
		if overdraft > 0 && !sawOverdraft {
			t.Errorf("B = %d: no replica held more than its share: the overdraft was never used", overdraft)
		}
	}
}

// A replica cut off from the store keeps its share while its view is
// fresh, takes the static ⌊C/R⌋ once it is older than Stale (by Stale +
// Period), refuses nothing below that share, and uses the fleet's state
// again two rounds after the store returns.
func TestFallbackAndReturn(t *testing.T) {
	f := newFleet(t, 2, 8, nil)
	a, b := f.r[0], f.r[1]
	b.submit(10, 6)
	f.round()
	f.round()
	if st := a.view.Status(); st.Fallback != fleet.Synced || a.view.Share() == 4 {
		t.Fatalf("synced: %+v, want a share other than the static 4", st)
	}
	a.store.down = true
	a.submit(-1, 10)
	for i, want := range []fleet.Fallback{fleet.Synced, fleet.Synced, fleet.FallbackStale} {
		f.round(0) // ages 100ms, 200ms (= Stale: still fresh), 300ms
		st := a.view.Status()
		if st.Fallback != want || st.Err == nil {
			t.Fatalf("failed round %d: %v (err %v), want %v with the error", i+1, st.Fallback, st.Err, want)
		}
	}
	if st := a.view.Status(); st.Share != 4 || st.Age != 3*period || a.running(-1) != 4 {
		t.Fatalf("stale: share %d, age %v, %d running; want the static 4, 300ms, and 4 running", st.Share, st.Age, a.running(-1))
	}
	a.store.down = false
	f.round(0)
	if st := a.view.Status(); st.Fallback != fleet.FallbackNotRead || st.Share != 4 {
		t.Fatalf("first round back: %v, share %d; want not-read at the static 4", st.Fallback, st.Share)
	}
	f.round(1, 0)
	if st := a.view.Status(); st.Fallback != fleet.Synced || st.Live != 2 {
		t.Fatalf("second round back: %+v, want synced with 2 live", st)
	}
}

// A replica that stops (killed without warning) gives its share back
// within its lease and the skew tolerance: the others count its last state
// until Lease + MaxSkew after it was taken, then, at their next round,
// divide the budget among themselves.
func TestDeadReplicaShareReturns(t *testing.T) {
	f := newFleet(t, 2, 8, nil)
	a, b := f.r[0], f.r[1]
	a.submit(-1, 20)
	b.submit(-1, 20)
	f.round()
	f.round()
	f.round()
	if a.running(-1) != 4 || b.running(-1) != 4 {
		t.Fatalf("running %d and %d, want 4 each", a.running(-1), b.running(-1))
	}
	b.finish(-1, 4) // b's requests end, then b dies: its last state says 0 in flight, 16 waiting
	f.round(1)
	killed := f.clock.Now()
	lease := fleet.DefaultLeasePeriods*period + period // Lease + MaxSkew, the defaults
	for f.clock.Now().Sub(killed) < lease+period {
		f.round(0)
		live := a.view.Status().Live
		switch age := f.clock.Now().Sub(killed); {
		case age < lease && live != 2:
			t.Fatalf("%v after b's last publish: %d live, want b still counted", age, live)
		case age >= lease+period && live != 1:
			t.Fatalf("%v after b's last publish: %d live, want b gone", age, live)
		}
	}
	if a.view.Share() != 8 || a.running(-1) != 8 {
		t.Errorf("after b's lease: share %d, %d running; want all 8", a.view.Share(), a.running(-1))
	}
}

// States are taken on each replica's own clock: one up to MaxSkew ahead,
// or up to Lease + MaxSkew old, counts; one further off is ignored.
func TestClockSkew(t *testing.T) {
	f := newFleet(t, 1, 8, nil)
	a := f.r[0]
	f.round()
	f.round()
	lease, skew := fleet.DefaultLeasePeriods*period, period // the defaults
	publish := func(id string, at time.Time) {
		err := f.store.Publish(context.Background(), fleet.Replica{ID: id, At: at,
			Bands: []fleet.Band{{Priority: -1, Waiting: 4}}}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
	}
	now := f.clock.Now().Add(period) // the next round's
	publish("ahead-ok", now.Add(skew))
	publish("ahead-bad", now.Add(skew+time.Millisecond))
	publish("old-ok", now.Add(-lease-skew))
	publish("old-bad", now.Add(-lease-skew-time.Millisecond))
	f.round()
	if st := a.view.Status(); st.Live != 3 || st.Ignored != 2 {
		t.Errorf("Live %d, Ignored %d; want a and the two within the bounds, the two outside ignored", st.Live, st.Ignored)
	}
}

// A store that restarts empty loses nothing the fleet counts on: each
// replica keeps the others' last states until their leases run out, so a
// replica holding the whole budget is still counted until it publishes
// again.
func TestStoreRestartLosesNothing(t *testing.T) {
	f := newFleet(t, 2, 8, nil)
	a, b := f.r[0], f.r[1]
	b.submit(-1, 20)
	for range 4 {
		f.round()
	}
	if b.running(-1) != 8 {
		t.Fatalf("b runs %d, want 8", b.running(-1))
	}
	f.store.Forget()
	a.submit(-1, 5)
	f.round(0) // a publishes alone into the empty store
	if a.view.Share() != 0 || a.running(-1) != 0 || a.view.Status().Live != 2 {
		t.Fatalf("after the store's restart: a's share %d, %d running, %d live; want 0, 0, b still counted",
			a.view.Share(), a.running(-1), a.view.Status().Live)
	}
	b.finish(-1, 4) // b refills its 8 at once from its queue
	f.round(1, 0)
	bq, _ := b.fc.CapacitySnapshot(-1)
	if st := a.view.Status(); f.inFlight() > 8 || st.Bands[1].OtherWaiting != bq.QueuedRequests {
		t.Errorf("after b republished: fleet in flight %d, a counts %d waiting on b; want at most 8, and b's %d",
			f.inFlight(), st.Bands[1].OtherWaiting, bq.QueuedRequests)
	}
}

// A partition: k replicas cut off fall back to ⌊C/R⌋ each, and once
// their leases have run out the others divide C among themselves, so the
// fleet holds at most C + k·⌊C/R⌋, and more than C.
func TestPartitionBound(t *testing.T) {
	const budget, replicas = 9, 3
	f := newFleet(t, replicas, budget, nil)
	for _, r := range f.r {
		r.submit(-1, 30)
	}
	cut := f.r[2]
	most := 0
	for n := range 20 {
		if n == 3 {
			cut.store.down = true
		}
		f.round()
		most = max(most, f.inFlight())
		if f.inFlight() > budget+budget/replicas {
			t.Fatalf("round %d: %d in flight, more than C + ⌊C/R⌋ = %d", n, f.inFlight(), budget+budget/replicas)
		}
	}
	if st := cut.view.Status(); st.Fallback != fleet.FallbackStale || cut.running(-1) != budget/replicas {
		t.Errorf("the cut-off replica: %v, %d running; want stale at the static %d", st.Fallback, cut.running(-1), budget/replicas)
	}
	if most <= budget {
		t.Errorf("the fleet held at most %d, want more than C = %d once the others stop counting the cut-off replica", most, budget)
	}
}

// The headroom a replica reports is the fleet's, the others' part at most
// P + δ old: a change of another replica's queue shows in this replica's
// reader after that replica's next publish is seen and this one's next
// round, never before it is published.
func TestHeadroomStaleness(t *testing.T) {
	const delay = 30 * time.Millisecond
	f := newFleet(t, 2, 0, nil) // a budget of 0: everything waits
	a, b := f.r[0], f.r[1]
	for _, r := range f.r {
		r.store.delay = delay
	}
	f.round()
	f.round()
	reader := a.view.Reader(a.fc)
	queued := func() int64 {
		s, err := reader.CapacitySnapshot(-1)
		if err != nil {
			t.Fatal(err)
		}
		return s.QueuedRequests
	}
	if got := queued(); got != 0 {
		t.Fatalf("before: %d queued, want 0", got)
	}
	b.submit(-1, 5)
	f.clock.Advance(period / 2)
	_ = b.view.Sync(context.Background()) // b publishes at t
	published := f.clock.Now()
	for f.clock.Now().Sub(published) <= period+delay {
		f.clock.Advance(10 * time.Millisecond)
		if f.clock.Now().Sub(published) >= period/2 && f.clock.Now().Sub(published) < period/2+10*time.Millisecond {
			_ = a.view.Sync(context.Background())
		}
		seenBy := f.clock.Now().Sub(published)
		switch got := queued(); {
		case seenBy < delay && got != 0:
			t.Fatalf("%v after b's publish: %d queued, before the store could show it", seenBy, got)
		case seenBy >= period+delay && got != 5:
			t.Fatalf("%v after b's publish: %d queued, want b's 5 within P + δ", seenBy, got)
		}
	}
	if got := queued(); got != 5 {
		t.Errorf("after P + δ: %d queued, want 5", got)
	}
}

// hostileStore returns whatever it is given to return, as a corrupt or
// crafted store would.
type hostileStore struct{ entries []fleet.Replica }

func (hostileStore) Publish(context.Context, fleet.Replica, time.Duration) error { return nil }
func (h hostileStore) Read(context.Context) ([]fleet.Replica, error)             { return h.entries, nil }

// What a store returns is checked before it counts: an invalid state, a
// state past its lease, an entry under this replica's ID (its live state
// stands for it) and a second entry under one ID (the newest counts)
// never grant more than the budget, and the share stays within [0, C]
// whatever the counts.
func TestHostileStoreIsBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := fakeNow{now}
	huge := fleet.Band{Priority: -1, InFlight: fleet.MaxCount, Waiting: fleet.MaxCount, Demand: fleet.MaxDemand}
	entries := []fleet.Replica{
		{ID: "me", At: now, Bands: []fleet.Band{{Priority: -1, InFlight: fleet.MaxCount}}}, // under my ID
		{ID: "bad", At: now, Bands: []fleet.Band{{Priority: -1, InFlight: -5}}},            // invalid
		{ID: "", At: now}, // invalid
		{ID: "old", At: now.Add(-time.Hour), Bands: []fleet.Band{huge}}, // past its lease
		{ID: "twice", At: now.Add(-time.Millisecond), Bands: []fleet.Band{huge}},
		{ID: "twice", At: now, Bands: []fleet.Band{{Priority: -1, Waiting: 2}}},
	}
	v, err := fleet.New(fleet.Config{Store: hostileStore{entries}, ID: "me", Replicas: 2, Budget: 8, Period: period, Clock: &clock})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := v.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	st := v.Status()
	if st.Fallback != fleet.Synced || st.Live != 2 || st.Ignored != 3 {
		t.Fatalf("%+v: want synced, this replica and twice live, the 3 bad or old entries ignored", st)
	}
	if st.Share < 0 || st.Share > 8 || st.Bands[0].Waiting != 2 {
		t.Errorf("share %d, band %+v: want a share in [0, 8] and twice's newest state (2 waiting)", st.Share, st.Bands[0])
	}
}

// fakeNow is a clock that stands still.
type fakeNow struct{ t time.Time }

func (c *fakeNow) Now() time.Time { return c.t }
func (c *fakeNow) AfterFunc(time.Duration, func()) gate.Timer {
	return stopped{}
}

type stopped struct{}

func (stopped) Stop() bool { return false }
