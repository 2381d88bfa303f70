package redisfleet_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/sluicegate/sluice/examples/deploy/redisfleet"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
)

// benchStores returns the stores a benchmark compares: fleet.Memory (the
// baseline: the same contract with no network and no encoding), and the
// Redis store on miniredis, or on the real Redis at $SLUICE_REDIS_ADDR
// when set (under a prefix of its own, deleted after).
func benchStores(b *testing.B) map[string]fleet.Store {
	b.Helper()
	addr, where := os.Getenv("SLUICE_REDIS_ADDR"), "redis"
	if addr == "" {
		mr := miniredis.RunT(b)
		addr, where = mr.Addr(), "miniredis"
	}
	client := redisfleet.NewClient(addr, "", time.Second)
	prefix := fmt.Sprintf("sluice-bench-%d", os.Getpid())
	b.Cleanup(func() {
		ctx := context.Background()
		keys, _ := client.Keys(ctx, prefix+":*").Result()
		if len(keys) > 0 {
			client.Del(ctx, keys...)
		}
		client.Close()
	})
	s, err := redisfleet.New(client, redisfleet.Options{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	return map[string]fleet.Store{"memory": fleet.NewMemory(nil), where: s}
}

// benchState is a replica with four bands, as a gateway with four
// priorities publishes it.
func benchState(id string) fleet.Replica {
	return fleet.Replica{ID: id, At: time.Now(), Bands: []fleet.Band{
		{Priority: 10, Waiting: 12, InFlight: 30, Demand: 40.5},
		{Priority: 0, Waiting: 140, InFlight: 60, Demand: 120.25},
		{Priority: -1, Waiting: 900, InFlight: 10, Demand: 300},
		{Priority: -10, Waiting: 3000, InFlight: 0, Demand: 12.125},
	}}
}

// BenchmarkPublish measures one replica's publish: one round trip per
// period. Baseline: fleet.Memory's Publish of the same state.
func BenchmarkPublish(b *testing.B) {
	for name, s := range benchStores(b) {
		b.Run("store="+name, func(b *testing.B) {
			ctx := context.Background()
			r := benchState("router-0")
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Publish(ctx, r, 3*time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead measures a read of a fleet of 3 and of 32 replicas: one
// round trip per period, whatever the fleet's size. Baseline:
// fleet.Memory's Read of the same fleet.
func BenchmarkRead(b *testing.B) {
	for name, s := range benchStores(b) {
		for _, n := range []int{3, 32} {
			b.Run(fmt.Sprintf("store=%s/replicas=%d", name, n), func(b *testing.B) {
				ctx := context.Background()
				for i := range n {
					if err := s.Publish(ctx, benchState(fmt.Sprintf("router-%02d", i)), time.Minute); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				for b.Loop() {
					got, err := s.Read(ctx)
					if err != nil || len(got) < n {
						b.Fatalf("Read = %d replicas, %v; want at least %d", len(got), err, n)
					}
				}
			})
		}
	}
}
