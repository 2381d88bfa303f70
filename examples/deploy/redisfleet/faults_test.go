package redisfleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicegate/sluice/examples/deploy/redisfleet"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
	"github.com/sluicegate/sluice/internal/clocktest"
)

// The faults of a fleet on Redis, end to end through fleet.View on the
// Redis store: three replicas of a budget of 12, each with its own manual
// clock (skewed as a test says), one miniredis whose clock the test moves
// with theirs.
const (
	faultBudget = 12
	faultPeriod = 100 * time.Millisecond
	faultLease  = 300 * time.Millisecond
)

type faultFleet struct {
	t       *testing.T
	mr      *miniredis.Miniredis
	now     time.Time
	clocks  []*clocktest.Clock
	clients []*redis.Client
	skew    []time.Duration
	views   []*fleet.View
}

func newFaultFleet(t *testing.T, skew ...time.Duration) *faultFleet {
	t.Helper()
	mr := miniredis.RunT(t)
	f := &faultFleet{t: t, mr: mr, now: time.Unix(1_800_000_000, 0), skew: skew}
	mr.SetTime(f.now)
	mr.ClockTTL(true)
	for i, s := range skew {
		client := redisfleet.NewClient(mr.Addr(), "", time.Second)
		t.Cleanup(func() { client.Close() })
		store, err := redisfleet.New(client, redisfleet.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		f.clients = append(f.clients, client)
		clock := clocktest.New(f.now.Add(s))
		v, err := fleet.New(fleet.Config{
			Store: store, ID: string(rune('a' + i)), Replicas: len(skew), Budget: faultBudget,
			Period: faultPeriod, Lease: faultLease, Clock: clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		f.clocks = append(f.clocks, clock)
		f.views = append(f.views, v)
	}
	return f
}

// round moves every clock, Redis's included, one period on, and runs a
// round on each replica in alive (all when nil).
func (f *faultFleet) round(alive ...int) {
	f.now = f.now.Add(faultPeriod)
	f.mr.SetTime(f.now)
	for i, c := range f.clocks {
		c.Set(f.now.Add(f.skew[i]))
	}
	if alive == nil {
		for i := range f.views {
			alive = append(alive, i)
		}
	}
	for _, i := range alive {
		_ = f.views[i].Sync(context.Background())
	}
}

func (f *faultFleet) expect(what string, i int, fallback fleet.Fallback, live int, share int64) {
	f.t.Helper()
	st := f.views[i].Status()
	if st.Fallback != fallback || st.Live != live || st.Share != share {
		f.t.Errorf("%s: replica %d: fallback %s, live %d, share %d; want %s, %d, %d (err %v)",
			what, i, st.Fallback, st.Live, st.Share, fallback, live, share, st.Err)
	}
}

func TestFleetFaultsOnRedis(t *testing.T) {
	f := newFaultFleet(t, 0, 0, 0)
	for range 2 {
		f.round()
	}
	for i := range 3 {
		f.expect("synced", i, fleet.Synced, 3, faultBudget/3)
	}

	// Redis down: within Stale (2 periods) every replica takes the
	// static share, and says why.
	f.mr.Close()
	for range 3 {
		f.round()
	}
	for i := range 3 {
		f.expect("Redis down", i, fleet.FallbackStale, 3, faultBudget/3)
		if f.views[i].Status().Err == nil {
			t.Errorf("Redis down: replica %d reports no error", i)
		}
	}

	// Redis back, with every key lost (miniredis restarts with its data;
	// a redis-server without persistence does not): two rounds and the
	// fleet is whole again.
	if err := f.mr.Restart(); err != nil {
		t.Fatal(err)
	}
	f.mr.FlushAll()
	for _, c := range f.clients {
		waitRedis(t, c)
	}
	f.round()
	for i := range 3 {
		if st := f.views[i].Status(); st.Fallback == fleet.Synced {
			t.Errorf("replica %d synced after one round back: the others may not have published yet", i)
		}
	}
	f.round()
	for i := range 3 {
		f.expect("Redis back", i, fleet.Synced, 3, faultBudget/3)
	}

	// Replica c killed without warning: within its lease (from its last
	// publish) and the skew allowed, a and b split the budget.
	deadline := f.now.Add(faultLease + faultPeriod) // Lease + MaxSkew (its default: Period)
	for f.now.Before(deadline) {
		f.round(0, 1)
	}
	f.round(0, 1)
	for i := range 2 {
		f.expect("c killed", i, fleet.Synced, 2, faultBudget/2)
	}
}

// A replica whose clock is off by less than MaxSkew (one period by
// default) counts; one off by more is ignored, and said to be.
func TestFleetClockSkewOnRedis(t *testing.T) {
	f := newFaultFleet(t, 0, faultPeriod/2, -faultPeriod/2, 3*faultPeriod)
	for range 2 {
		f.round()
	}
	for i := range 3 {
		f.expect("skewed within the bound", i, fleet.Synced, 3, faultBudget/3)
		if st := f.views[i].Status(); st.Ignored != 1 {
			t.Errorf("replica %d ignored %d entries, want 1 (the replica %v ahead)", i, st.Ignored, 3*faultPeriod)
		}
	}
}

// waitRedis waits until c reaches Redis again: after failed dials,
// go-redis redials in the background, once a second.
func waitRedis(t *testing.T, c *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the client did not reach Redis again within 10 s")
		}
		time.Sleep(10 * time.Millisecond) // polling for a state
	}
}
