package fleet_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
	"github.com/sluicegate/sluice/internal/clocktest"
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

// Two replicas divide a fleet-wide budget of 8 in flight: the one with
// chat waiting gets what chat needs, the one with only batch the rest.
func ExampleView() {
	clock := clocktest.New(time.Unix(1000, 0))
	store := fleet.NewMemory(clock.Now)
	var views []*fleet.View
	var fcs []*flowcontrol.FlowController
	for _, id := range []string{"router-a", "router-b"} {
		v, err := fleet.New(fleet.Config{Store: store, ID: id, Replicas: 2, Budget: 8, Period: time.Second, Clock: clock})
		if err != nil {
			panic(err)
		}
		fc, err := flowcontrol.New(flowcontrol.Config{
			Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
			FallbackPriority: -1,
			Gate:             v.Gate(), // in place of gate.MaxInFlight(8)
			Clock:            clock,
		})
		if err != nil {
			panic(err)
		}
		defer fc.Close()
		views, fcs = append(views, v), append(fcs, fc)
	}
	submit := func(fc *flowcontrol.FlowController, priority, n int) {
		for range n {
			fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "t", Priority: priority}},
				func(*flowcontrol.Admission, error) {})
		}
	}
	submit(fcs[0], -1, 10) // batch on router-a
	submit(fcs[1], 10, 2)  // chat on router-b
	for range 2 {          // a View uses the fleet's state from its second round
		clock.Advance(time.Second)
		for _, v := range views {
			v.Sync(context.Background())
		}
	}
	for _, v := range views {
		st := v.Status()
		fmt.Println(st.Fallback, st.Live, "replicas, share", st.Share, "of", st.Budget)
	}
	// Output:
	// synced 2 replicas, share 6 of 8
	// synced 2 replicas, share 2 of 8
}
