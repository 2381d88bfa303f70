package sluice_test

import (
	"context"
	"fmt"
	"runtime"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/headroom"
)

// The whole loop in small: admission remembers which band handled the
// request, and the response reads how full that band is now.
func Example() {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 0, RequestCapacity: capacity.Bounded(100)},
		},
		Gate: gate.MaxInFlight(1),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	ctx := context.Background()

	// Admission time: band 5 is not provisioned, so the request runs in
	// the fallback band 0, and the admission says so.
	adm, err := fc.EnqueueAndWait(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "tenant", Priority: 5}})
	if err != nil {
		panic(err)
	}
	band := headroom.Admitted(adm.Effective().Priority)

	// While the model works, two more requests queue behind the one slot.
	for range 2 {
		go func() {
			if adm, err := fc.EnqueueAndWait(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "other"}}); err == nil {
				adm.Done()
			}
		}()
	}
	for s, _ := fc.CapacitySnapshot(0); s.QueuedRequests < 2; s, _ = fc.CapacitySnapshot(0) {
		runtime.Gosched()
	}

	// Response time: the header value is sampled now, from band 0.
	if n, ok := headroom.Sample(fc, band); ok {
		fmt.Printf("%s: %d\n", headroom.HeaderName, n)
	}
	adm.Done()
	// Output:
	// x-llm-d-flow-band-headroom-requests: 98
}
