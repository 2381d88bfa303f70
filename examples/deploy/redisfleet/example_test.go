package redisfleet_test

import (
	"context"
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
