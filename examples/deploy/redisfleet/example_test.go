package redisfleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/sluicegate/sluice/examples/deploy/redisfleet"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
)

// Two replicas share one Redis (here an in-process miniredis): each
// publishes its state for a lease, and reads back the fleet's.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	client := redisfleet.NewClient(mr.Addr(), "", time.Second)
	defer client.Close()
	store, err := redisfleet.New(client, redisfleet.Options{Prefix: "gateway-fleet"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for i, waiting := range []int64{4, 12} {
		err := store.Publish(ctx, fleet.Replica{
			ID:    fmt.Sprintf("gw-%d", i),
			At:    time.Now(),
			Bands: []fleet.Band{{Priority: 0, Waiting: waiting, InFlight: 3}},
		}, 3*time.Second)
		if err != nil {
			fmt.Println(err)
		}
	}
	replicas, err := store.Read(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range replicas {
		fmt.Println(r.ID, r.Bands[0].Waiting, "waiting")
	}
	// Output:
	// gw-0 4 waiting
	// gw-1 12 waiting
}

// A plugin seam shaped like llm-d-router's CrossReplicaSyncer on the same
// Redis: each replica sets its own value for an endpoint once a period,
// and a reader folds the live replicas' values into one (here a sum of
// requests in flight); GetOrSet settles a request-level decision once for
// the fleet.
func ExampleSyncer() {
	mr, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	client := redisfleet.NewClient(mr.Addr(), "", time.Second)
	defer client.Close()
	ctx := context.Background()
	var replicas []*redisfleet.Syncer
	for i, inFlight := range []int{3, 5} {
		s, err := redisfleet.NewSyncer(client, redisfleet.SyncerOptions{Replica: fmt.Sprintf("epp-%d", i), Lease: 3 * time.Second})
		if err != nil {
			fmt.Println(err)
			return
		}
		value, _ := json.Marshal(map[string]int{"inFlight": inFlight})
		if err := s.Set(ctx, "inflight", "10.0.0.7:8000", value); err != nil {
			fmt.Println(err)
		}
		replicas = append(replicas, s)
	}
	values, err := replicas[0].Get(ctx, "inflight", "10.0.0.7:8000")
	if err != nil {
		fmt.Println(err)
		return
	}
	total := 0
	for _, v := range values {
		var m map[string]int
		if json.Unmarshal(v.Value, &m) == nil { // a value that does not decode is skipped
			total += m["inFlight"]
		}
	}
	fmt.Println("in flight at 10.0.0.7:8000, fleet-wide:", total)

	first, _, _ := replicas[0].GetOrSet(ctx, "pick", "req-42", []byte("10.0.0.7:8000"), time.Minute)
	again, existed, _ := replicas[1].GetOrSet(ctx, "pick", "req-42", []byte("10.0.0.9:8000"), time.Minute)
	fmt.Println(string(first), string(again), existed)
	// Output:
	// in flight at 10.0.0.7:8000, fleet-wide: 8
	// 10.0.0.7:8000 10.0.0.7:8000 true
}
