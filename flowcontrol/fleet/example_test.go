package fleet_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/fleet"
)

// Two replicas publish their state to one store and read the fleet back.
func ExampleStore() {
	store := fleet.NewMemory(nil)
	ctx := context.Background()
	for i, waiting := range []int64{4, 12} {
		err := store.Publish(ctx, fleet.Replica{
			ID:    fmt.Sprintf("router-%d", i),
			At:    time.Now(),
			Bands: []fleet.Band{{Priority: 0, Waiting: waiting, InFlight: 8}},
		}, 3*time.Second)
		if err != nil {
			fmt.Println(err)
		}
	}
	replicas, _ := store.Read(ctx)
	var waiting int64
	for _, r := range replicas {
		waiting += r.Bands[0].Waiting
	}
	fmt.Println(len(replicas), "replicas,", waiting, "waiting")
	// Output: 2 replicas, 16 waiting
}
