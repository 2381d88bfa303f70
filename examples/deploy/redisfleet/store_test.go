package redisfleet_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicegate/sluice/examples/deploy/redisfleet"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
)

// setup starts a miniredis whose TTLs follow its clock, which the test
// moves with SetTime, so TIME, PX and the index agree as on a real Redis.
func setup(t *testing.T, opts redisfleet.Options) (*miniredis.Miniredis, *redis.Client, *redisfleet.Store, *time.Time) {
	t.Helper()
	mr, client, now := newRedis(t)
	s, err := redisfleet.New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return mr, client, s, now
}

// newRedis starts a miniredis whose TTLs follow its clock, set to a fixed
// time, and a client of it closed when the test ends.
func newRedis(t *testing.T) (*miniredis.Miniredis, *redis.Client, *time.Time) {
	t.Helper()
	mr := miniredis.RunT(t)
	now := time.Unix(1_800_000_000, 0)
	mr.SetTime(now)
	mr.ClockTTL(true)
	client := redisfleet.NewClient(mr.Addr(), "", time.Second)
	t.Cleanup(func() { client.Close() })
	return mr, client, &now
}

func state(id string, waiting int64) fleet.Replica {
	return fleet.Replica{
		ID: id,
		At: time.Unix(1_800_000_000, 0),
		Bands: []fleet.Band{
			{Priority: 10, Waiting: waiting, InFlight: 4, Demand: 1.5},
			{Priority: 0, Waiting: 2 * waiting, InFlight: 8, Demand: 30},
		},
	}
}

func ids(rs []fleet.Replica) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r.ID)
	}
	return b.String()
}

func TestPublishReadRoundTrip(t *testing.T) {
	_, _, s, _ := setup(t, redisfleet.Options{})
	ctx := context.Background()
	for _, id := range []string{"router-b", "router-a", "router-c"} {
		if err := s.Publish(ctx, state(id, 3), 3*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// A second publish replaces the first.
	if err := s.Publish(ctx, state("router-b", 7), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids(got) != "router-a,router-b,router-c" {
		t.Fatalf("Read = %s, want the three replicas sorted by ID", ids(got))
	}
	want := state("router-b", 7)
	if g := got[1]; !g.At.Equal(want.At) || fmt.Sprint(g.Bands) != fmt.Sprint(want.Bands) {
		t.Errorf("router-b read back as %+v, want %+v", g, want)
	}
	if n, _ := s.Dropped(); n != 0 {
		t.Errorf("Dropped = %d after clean reads", n)
	}
}

func TestLeaseExpiresOnRedisClock(t *testing.T) {
	mr, _, s, now := setup(t, redisfleet.Options{})
	ctx := context.Background()
	if err := s.Publish(ctx, state("a", 1), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, state("b", 1), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	mr.SetTime(now.Add(1999 * time.Millisecond))
	if got, _ := s.Read(ctx); ids(got) != "a,b" {
		t.Fatalf("1.999 s in: Read = %s, want a,b", ids(got))
	}
	mr.SetTime(now.Add(2 * time.Second))
	if got, _ := s.Read(ctx); ids(got) != "b" {
		t.Fatalf("2 s in: Read = %s, want b alone (a's lease ran out)", ids(got))
	}
	mr.SetTime(now.Add(5 * time.Second))
	if got, _ := s.Read(ctx); len(got) != 0 {
		t.Fatalf("5 s in: Read = %s, want nothing", ids(got))
	}
	// The index itself expires with the longest lease: nothing is left.
	if keys := mr.Keys(); len(keys) != 0 {
		t.Errorf("keys left after every lease ran out: %v", keys)
	}
}

// The replica's own clock (At) plays no part in its lease: a replica whose
// clock is an hour off stays exactly as long as one whose clock is right.
func TestClockSkewMovesNoLease(t *testing.T) {
	mr, _, s, now := setup(t, redisfleet.Options{})
	ctx := context.Background()
	ahead, behind := state("ahead", 1), state("behind", 1)
	ahead.At = ahead.At.Add(time.Hour)
	behind.At = behind.At.Add(-time.Hour)
	for _, r := range []fleet.Replica{ahead, behind} {
		if err := s.Publish(ctx, r, 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	mr.SetTime(now.Add(1999 * time.Millisecond))
	got, _ := s.Read(ctx)
	if ids(got) != "ahead,behind" || !got[0].At.Equal(ahead.At) {
		t.Fatalf("Read = %+v, want both, their own At kept", got)
	}
	mr.SetTime(now.Add(2 * time.Second))
	if got, _ := s.Read(ctx); len(got) != 0 {
		t.Fatalf("Read = %s, want both leases over", ids(got))
	}
}

func TestPrefixesSeparateFleets(t *testing.T) {
	mr, client, one, _ := setup(t, redisfleet.Options{Prefix: "fleet-one"})
	two, err := redisfleet.New(client, redisfleet.Options{Prefix: "fleet-two"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := one.Publish(ctx, state("x", 1), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := two.Publish(ctx, state("y", 1), time.Second); err != nil {
		t.Fatal(err)
	}
	g1, _ := one.Read(ctx)
	g2, _ := two.Read(ctx)
	if ids(g1) != "x" || ids(g2) != "y" {
		t.Errorf("fleet-one reads %s, fleet-two %s; want x and y", ids(g1), ids(g2))
	}
	for _, k := range mr.Keys() {
		if !strings.HasPrefix(k, "fleet-one:") && !strings.HasPrefix(k, "fleet-two:") {
			t.Errorf("key %q outside both prefixes", k)
		}
	}
}

// Values an attacker or a bug writes straight into Redis are dropped and
// counted; the honest replica beside them is read as usual.
func TestHostileValuesAreDropped(t *testing.T) {
	mr, client, s, now := setup(t, redisfleet.Options{Prefix: "p", MaxValueBytes: 4096})
	ctx := context.Background()
	if err := s.Publish(ctx, state("honest", 1), time.Minute); err != nil {
		t.Fatal(err)
	}
	score := float64(now.Add(time.Minute).UnixMilli())
	plant := func(id, value string) {
		t.Helper()
		if err := client.ZAdd(ctx, "p:idx", redis.Z{Score: score, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
		if value != "" {
			if err := client.Set(ctx, "p:r:"+id, value, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	huge := `{"v":1,"id":"huge","at":1,"bands":[` + strings.Repeat(`{"p":0},`, 1000) + `{"p":0}]}`
	plant("garbage", "\x00\xff not json")
	plant("huge", huge)
	plant("infinite", `{"v":1,"id":"infinite","at":1,"bands":[{"p":0,"w":9223372036854775807}]}`)
	plant("negative", `{"v":1,"id":"negative","at":1,"bands":[{"p":0,"f":-5}]}`)
	plant("overflow", `{"v":1,"id":"overflow","at":1,"bands":[{"p":0,"w":1e30}]}`)
	plant("impostor", `{"v":1,"id":"honest","at":1,"bands":[{"p":0,"w":1}]}`)
	plant("future", `{"v":2,"id":"future","at":1,"bands":[]}`)
	plant("unordered", `{"v":1,"id":"unordered","at":1,"bands":[{"p":0},{"p":5}]}`)
	plant("no-time", `{"v":1,"id":"no-time","bands":[]}`)
	plant(strings.Repeat("L", fleet.MaxIDLength+1), "")
	if err := client.HSet(ctx, "p:r:hash", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	plant("hash", "")
	plant("gone", "") // indexed, no key: expired between, not an error
	got, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids(got) != "honest" || got[0].Bands[0].Waiting != 1 {
		t.Fatalf("Read = %+v, want the honest replica alone, unchanged", got)
	}
	n, last := s.Dropped()
	if n != 11 || last == "" {
		t.Errorf("Dropped = %d (%q), want 11 with a reason", n, last)
	}
	// The missing one is pruned from the index; the rest stay there for
	// their owner (or their TTL) to replace.
	members, err := mr.ZMembers("p:idx")
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 12 || slices.Contains(members, "gone") || !slices.Contains(members, "huge") {
		t.Errorf("index after the read: %d members %q, want the 12 with a key, gone pruned", len(members), members)
	}
}

func TestTooManyReplicas(t *testing.T) {
	_, client, s, now := setup(t, redisfleet.Options{Prefix: "p"})
	ctx := context.Background()
	members := make([]redis.Z, fleet.MaxReplicas)
	for i := range members {
		members[i] = redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: fmt.Sprintf("r%04d", i)}
	}
	if err := client.ZAdd(ctx, "p:idx", members...).Err(); err != nil {
		t.Fatal(err)
	}
	// MaxReplicas indexed: a new replica is refused, the read still works
	// (none of the planted entries has a value, so it reads nothing).
	err := s.Publish(ctx, state("one-more", 1), time.Second)
	if err == nil || !strings.Contains(err.Error(), "FLEETFULL") {
		t.Fatalf("Publish past MaxReplicas = %v, want FLEETFULL", err)
	}
	if got, err := s.Read(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Read = %v, %v; want nothing and no error", got, err)
	}
	// Read pruned the ones without values; fill the index past the bound
	// again with members that have values.
	for i := range members {
		id := members[i].Member.(string)
		if err := s.Publish(ctx, state(id, 1), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.ZAdd(ctx, "p:idx", redis.Z{Score: members[0].Score, Member: "extra"}).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read(ctx); err == nil || !strings.Contains(err.Error(), "FLEETFULL") {
		t.Fatalf("Read of %d replicas = %d, %v; want a FLEETFULL error, not a partial fleet", fleet.MaxReplicas+1, len(got), err)
	}
}

// A FLUSHALL (or a Redis restart without persistence) loses every key;
// each replica's next publish puts it back.
func TestFlushAllRebuilds(t *testing.T) {
	mr, _, s, _ := setup(t, redisfleet.Options{})
	ctx := context.Background()
	publishAll := func() {
		for _, id := range []string{"a", "b", "c"} {
			if err := s.Publish(ctx, state(id, 1), 3*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	publishAll()
	mr.FlushAll()
	if got, err := s.Read(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after FLUSHALL: Read = %s, %v; want an empty fleet, no error", ids(got), err)
	}
	publishAll()
	if got, err := s.Read(ctx); err != nil || ids(got) != "a,b,c" {
		t.Fatalf("after the next publishes: Read = %s, %v; want a,b,c", ids(got), err)
	}
}

// A Redis that is down or slow costs a call no more than the timeout, and
// says so with an error (the view then falls back); a Redis that returns
// is used again at once.
func TestDownSlowAndBack(t *testing.T) {
	mr, _, _, _ := setup(t, redisfleet.Options{})
	client := redisfleet.NewClient(mr.Addr(), "", 200*time.Millisecond)
	defer client.Close()
	s, err := redisfleet.New(client, redisfleet.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Publish(ctx, state("a", 1), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	mr.Close()
	if err := s.Publish(ctx, state("a", 1), 3*time.Second); err == nil {
		t.Fatal("Publish with Redis down: want an error")
	}
	if _, err := s.Read(ctx); err == nil {
		t.Fatal("Read with Redis down: want an error")
	}
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	waitRedis(t, client)
	if err := s.Publish(ctx, state("a", 1), 3*time.Second); err != nil {
		t.Fatalf("Publish after Redis returned: %v", err)
	}
	if got, err := s.Read(ctx); err != nil || ids(got) != "a" {
		t.Fatalf("Read after Redis returned = %s, %v; want a", ids(got), err)
	}
	// A context already over fails at once, with its error.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Read(done); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestPublishRefusesBadInput(t *testing.T) {
	_, _, s, _ := setup(t, redisfleet.Options{})
	ctx := context.Background()
	bad := state("a", 1)
	bad.Bands[0].Waiting = -1
	if err := s.Publish(ctx, bad, time.Second); !errors.Is(err, fleet.ErrInvalid) {
		t.Errorf("Publish of an invalid state = %v, want ErrInvalid", err)
	}
	if err := s.Publish(ctx, state("a", 1), 0); err == nil {
		t.Error("Publish with a zero lease: want an error")
	}
}

func TestNewNamesTheField(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	for _, c := range []struct {
		opts  redisfleet.Options
		field string
	}{
		{redisfleet.Options{Prefix: "has space"}, "Prefix"},
		{redisfleet.Options{Prefix: strings.Repeat("p", redisfleet.MaxPrefixLength+1)}, "Prefix"},
		{redisfleet.Options{Timeout: -time.Second}, "Timeout"},
		{redisfleet.Options{MaxValueBytes: -1}, "MaxValueBytes"},
		{redisfleet.Options{MaxValueBytes: 1 << 21}, "MaxValueBytes"},
	} {
		if _, err := redisfleet.New(client, c.opts); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("New(%+v) = %v, want an error naming %s", c.opts, err, c.field)
		}
	}
	if _, err := redisfleet.New(nil, redisfleet.Options{}); err == nil {
		t.Error("New(nil): want an error")
	}
}

// A Redis that accepts connections and never answers (hung, or a network
// that drops replies) costs a call its timeout, and the call fails.
func TestSilentRedisTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	defer func() {
		ln.Close()
		<-accepted
	}()
	client := redisfleet.NewClient(ln.Addr().String(), "", 100*time.Millisecond)
	defer client.Close()
	s, err := redisfleet.New(client, redisfleet.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(context.Background()); err == nil {
		t.Fatal("Read from a silent Redis: want an error")
	}
	if err := s.Publish(context.Background(), state("a", 1), time.Second); err == nil {
		t.Fatal("Publish to a silent Redis: want an error")
	}
}
