package redisfleet_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicegate/sluice/examples/deploy/redisfleet"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
)

// syncers starts a miniredis on a clock the test moves and returns a
// Syncer for each replica named, sharing it.
func syncers(t *testing.T, lease time.Duration, replicas ...string) (*miniredis.Miniredis, *redis.Client, *time.Time, []*redisfleet.Syncer) {
	t.Helper()
	mr, client, now := newRedis(t)
	var out []*redisfleet.Syncer
	for _, r := range replicas {
		s, err := redisfleet.NewSyncer(client, redisfleet.SyncerOptions{Replica: r, Lease: lease, MaxValueBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return mr, client, now, out
}

// values returns a Get's values as replica=value, sorted.
func values(t *testing.T, s *redisfleet.Syncer, key, endpoint string) string {
	t.Helper()
	vs, err := s.Get(context.Background(), key, endpoint)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", key, endpoint, err)
	}
	var parts []string
	for _, v := range vs {
		parts = append(parts, v.Replica+"="+string(v.Value))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// Each replica's value for a key and an endpoint is its own, every
// replica reads them all, and Delete takes back only its own.
func TestSyncerSetGetDelete(t *testing.T) {
	_, _, _, s := syncers(t, 2*time.Second, "gw-a", "gw-b")
	ctx := context.Background()
	for i, v := range []string{`{"inflight":3}`, `{"inflight":5}`} {
		if err := s[i].Set(ctx, "load", "10.0.0.1:8000", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s[0].Set(ctx, "load", "10.0.0.2:8000", []byte(`{"inflight":1}`)); err != nil {
		t.Fatal(err)
	}
	want := `gw-a={"inflight":3},gw-b={"inflight":5}`
	if got := values(t, s[1], "load", "10.0.0.1:8000"); got != want {
		t.Errorf("Get = %s, want %s", got, want)
	}
	if got := values(t, s[0], "load", "10.0.0.2:8000"); got != `gw-a={"inflight":1}` {
		t.Errorf("the other endpoint's Get = %s", got)
	}
	if err := s[0].Delete(ctx, "load", "10.0.0.1:8000"); err != nil {
		t.Fatal(err)
	}
	if got := values(t, s[0], "load", "10.0.0.1:8000"); got != `gw-b={"inflight":5}` {
		t.Errorf("after gw-a's Delete, Get = %s", got)
	}
	if got := values(t, s[0], "other", "10.0.0.1:8000"); got != "" {
		t.Errorf("a key nobody set: Get = %s, want nothing (a miss)", got)
	}
}

// A replica's value lasts its lease on Redis's clock, and no longer; a
// new Set brings it back.
func TestSyncerLeaseOnRedisClock(t *testing.T) {
	mr, _, now, s := syncers(t, 2*time.Second, "gw-a", "gw-b")
	ctx := context.Background()
	_ = s[0].Set(ctx, "k", "e", []byte("1"))
	mr.SetTime(now.Add(time.Second))
	_ = s[1].Set(ctx, "k", "e", []byte("2"))
	mr.SetTime(now.Add(1999 * time.Millisecond))
	if got := values(t, s[0], "k", "e"); got != "gw-a=1,gw-b=2" {
		t.Errorf("within both leases: %s", got)
	}
	mr.SetTime(now.Add(2 * time.Second))
	if got := values(t, s[0], "k", "e"); got != "gw-b=2" {
		t.Errorf("gw-a's lease over: %s, want gw-b's alone", got)
	}
	mr.SetTime(now.Add(3 * time.Second))
	if got := values(t, s[0], "k", "e"); got != "" {
		t.Errorf("both leases over: %s, want nothing", got)
	}
	_ = s[0].Set(ctx, "k", "e", []byte("3"))
	if got := values(t, s[1], "k", "e"); got != "gw-a=3" {
		t.Errorf("after a new Set: %s", got)
	}
}

// Keys and endpoints holding the separator do not share a hash.
func TestSyncerKeysDoNotCollide(t *testing.T) {
	_, _, _, s := syncers(t, time.Second, "gw-a")
	ctx := context.Background()
	_ = s[0].Set(ctx, "a:b", "c", []byte("x"))
	_ = s[0].Set(ctx, "a", "b:c", []byte("y"))
	if got := values(t, s[0], "a:b", "c"); got != "gw-a=x" {
		t.Errorf("Get(a:b, c) = %s", got)
	}
	if got := values(t, s[0], "a", "b:c"); got != "gw-a=y" {
		t.Errorf("Get(a, b:c) = %s", got)
	}
}

// GetOrSet settles a value once for every replica, until its TTL runs
// out.
func TestSyncerGetOrSet(t *testing.T) {
	mr, _, now, s := syncers(t, time.Second, "gw-a", "gw-b")
	ctx := context.Background()
	v, existed, err := s[0].GetOrSet(ctx, "decision", "req-1", []byte("pod-7"), 10*time.Second)
	if err != nil || existed || string(v) != "pod-7" {
		t.Fatalf("first GetOrSet = %q, %v, %v; want pod-7, false", v, existed, err)
	}
	v, existed, err = s[1].GetOrSet(ctx, "decision", "req-1", []byte("pod-9"), 10*time.Second)
	if err != nil || !existed || string(v) != "pod-7" {
		t.Fatalf("second GetOrSet = %q, %v, %v; want the first's pod-7, true", v, existed, err)
	}
	mr.SetTime(now.Add(10 * time.Second))
	v, existed, err = s[1].GetOrSet(ctx, "decision", "req-1", []byte("pod-9"), 10*time.Second)
	if err != nil || existed || string(v) != "pod-9" {
		t.Fatalf("after the TTL, GetOrSet = %q, %v, %v; want pod-9, false", v, existed, err)
	}
}

// What another writer leaves in Redis is bounded before it leaves it: a
// value past MaxValueBytes is withheld and counted, one without a lease
// is deleted, and neither stops the others' values.
func TestSyncerHostileValues(t *testing.T) {
	_, client, _, s := syncers(t, time.Second, "gw-a")
	ctx := context.Background()
	_ = s[0].Set(ctx, "k", "e", []byte("ok"))
	key := redisfleet.DefaultPrefix + ":s:1:k:e"
	client.HSet(ctx, key, "big", "9999999999999:"+strings.Repeat("x", 1000))
	client.HSet(ctx, key, "nolease", "garbage")
	if got := values(t, s[0], "k", "e"); got != "gw-a=ok" {
		t.Errorf("Get = %s, want gw-a's alone", got)
	}
	if n := s[0].Dropped(); n != 1 {
		t.Errorf("Dropped = %d, want 1 (the long value)", n)
	}
	if client.HExists(ctx, key, "nolease").Val() {
		t.Error("a value without a lease was left in Redis")
	}
	client.Set(ctx, redisfleet.DefaultPrefix+":g:1:d:x", strings.Repeat("y", 1000), 0)
	if _, _, err := s[0].GetOrSet(ctx, "d", "x", []byte("z"), time.Second); err == nil {
		t.Error("GetOrSet returned a stored value over MaxValueBytes")
	}
}

// A Store and a Syncer on one prefix keep apart.
func TestSyncerBesideStore(t *testing.T) {
	_, client, _, s := syncers(t, time.Second, "gw-a")
	store, err := redisfleet.New(client, redisfleet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := store.Publish(ctx, state("gw-a", 1), time.Second); err != nil {
		t.Fatal(err)
	}
	_ = s[0].Set(ctx, "r", "gw-a", []byte("x"))
	rs, err := store.Read(ctx)
	if err != nil || ids(rs) != "gw-a" {
		t.Errorf("Read beside a Syncer = %v, %v", ids(rs), err)
	}
	if n, _ := store.Dropped(); n != 0 {
		t.Errorf("the Store dropped %d entries beside a Syncer", n)
	}
}

// NewSyncer names the field it refuses, and the calls refuse bad input.
func TestSyncerRefuses(t *testing.T) {
	_, client, _, s := syncers(t, time.Second, "gw-a")
	for name, opts := range map[string]redisfleet.SyncerOptions{
		"Replica":       {Lease: time.Second},
		"Lease":         {Replica: "gw-a"},
		"Prefix":        {Replica: "gw-a", Lease: time.Second, Prefix: "a b"},
		"Timeout":       {Replica: "gw-a", Lease: time.Second, Timeout: -1},
		"MaxValueBytes": {Replica: "gw-a", Lease: time.Second, MaxValueBytes: 2 << 20},
	} {
		if _, err := redisfleet.NewSyncer(client, opts); err == nil || !strings.Contains(err.Error(), "SyncerOptions."+name) {
			t.Errorf("%s: err %v, want one naming SyncerOptions.%s", name, err, name)
		}
	}
	ctx := context.Background()
	long := strings.Repeat("k", redisfleet.MaxSyncKeyLength+1)
	for what, err := range map[string]error{
		"an empty key":      s[0].Set(ctx, "", "e", nil),
		"a long endpoint":   s[0].Set(ctx, "k", long, nil),
		"a long value":      s[0].Set(ctx, "k", "e", make([]byte, 65)),
		"a zero ttl":        func() error { _, _, err := s[0].GetOrSet(ctx, "k", "i", nil, 0); return err }(),
		"an empty id":       func() error { _, _, err := s[0].GetOrSet(ctx, "k", "", nil, time.Second); return err }(),
		"a long key to Get": func() error { _, err := s[0].Get(ctx, long, "e"); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", what)
		}
	}
}

// A hash keeps at most fleet.MaxReplicas live values: one more replica is
// refused, until a lease runs out and makes room.
func TestSyncerFullUntilALeaseEnds(t *testing.T) {
	mr, client, now, s := syncers(t, time.Second, "first")
	ctx := context.Background()
	if err := s[0].Set(ctx, "k", "e", []byte("x")); err != nil {
		t.Fatal(err)
	}
	mr.SetTime(now.Add(500 * time.Millisecond))
	for i := 1; i < fleet.MaxReplicas; i++ {
		r, err := redisfleet.NewSyncer(client, redisfleet.SyncerOptions{Replica: fmt.Sprintf("r%d", i), Lease: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Set(ctx, "k", "e", []byte("x")); err != nil {
			t.Fatalf("replica %d of %d: %v", i+1, fleet.MaxReplicas, err)
		}
	}
	late, _ := redisfleet.NewSyncer(client, redisfleet.SyncerOptions{Replica: "late", Lease: time.Second})
	if err := late.Set(ctx, "k", "e", []byte("x")); err == nil {
		t.Fatal("a replica past fleet.MaxReplicas was kept")
	}
	mr.SetTime(now.Add(time.Second)) // the first one's lease is over
	if err := late.Set(ctx, "k", "e", []byte("x")); err != nil {
		t.Fatalf("with a lease over, the late replica is still refused: %v", err)
	}
	vs, err := late.Get(ctx, "k", "e")
	if err != nil || len(vs) != fleet.MaxReplicas {
		t.Fatalf("Get returned %d values, %v; want %d", len(vs), err, fleet.MaxReplicas)
	}
}
