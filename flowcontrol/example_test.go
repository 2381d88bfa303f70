package flowcontrol_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// A gateway admits each request through the controller, reports the band
// that really handled it, and maps a rejection to its status and dropped
// reason.
func Example() {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 0, RequestCapacity: capacity.Bounded(100)},
			{Priority: -1, RequestCapacity: capacity.Bounded(0)}, // sheddable traffic is refused for now
		},
		Gate: gate.MaxInFlight(8),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	ctx := context.Background()

	// Band 5 is not provisioned: the request runs in the fallback band 0.
	adm, err := fc.EnqueueAndWait(ctx, flowcontrol.Request{
		Key:      flowcontrol.FlowKey{ID: "tenant-a", Priority: 5},
		ByteSize: 512,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("requested", adm.Requested().Priority, "effective", adm.Effective().Priority)
	snap, _ := fc.CapacitySnapshot(adm.Effective().Priority)
	fmt.Println(snap)
	adm.Done()

	_, err = fc.EnqueueAndWait(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "batch", Priority: -1}})
	var rej *flowcontrol.RejectionError
	if errors.As(err, &rej) {
		fmt.Println(rej.Outcome.HTTPStatus(), flowcontrol.DroppedReasonHeader+":", rej.Outcome.String())
		fmt.Println(errors.Is(err, flowcontrol.ErrRejectedSaturated))
	}
	// Output:
	// requested 5 effective 0
	// band 0: 0/100 requests, 0/unbounded bytes
	// 429 x-llm-d-request-dropped-reason: rejected-saturated
	// true
}

// With one slot, waiting requests leave strictly by band: every request of
// a higher band before any of a lower one, first come first served within a
// band.
func Example_strictPriority() {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}, {Priority: -5}},
		Gate:  gate.MaxInFlight(1),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	ctx := context.Background()

	holder, _ := fc.EnqueueAndWait(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "holder"}})

	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	requests := []flowcontrol.FlowKey{{ID: "batch", Priority: -5}, {ID: "chat-1", Priority: 0}, {ID: "urgent", Priority: 10}, {ID: "chat-2", Priority: 0}}
	for i, key := range requests {
		wg.Go(func() {
			adm, err := fc.EnqueueAndWait(ctx, flowcontrol.Request{Key: key})
			if err != nil {
				panic(err)
			}
			mu.Lock()
			order = append(order, adm.Effective().ID)
			mu.Unlock()
			adm.Done() // only one runs at a time, so order is dispatch order
		})
		// Wait until it is queued, so that arrival order is fixed.
		for queuedAll(fc) < i+1 {
			runtime.Gosched()
		}
	}
	holder.Done()
	wg.Wait()
	fmt.Println(order)
	// Output:
	// [urgent chat-1 chat-2 batch]
}

// queuedAll returns the number of requests waiting in bands 10, 0 and -5.
func queuedAll(fc *flowcontrol.FlowController) int {
	n := 0
	for _, p := range []int{10, 0, -5} {
		s, _ := fc.CapacitySnapshot(p)
		n += int(s.QueuedRequests)
	}
	return n
}

// A gate's saturation is what band ceilings compare with (package gate's
// Ceiling); the controller lists its bands for them, highest first.
func ExampleFlowController_Priorities() {
	g := gate.MaxInFlight(4)
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 10}, {Priority: -5}},
		Gate:  g,
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	adm, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "chat", Priority: 10}})
	if err != nil {
		panic(err)
	}
	fmt.Println("bands:", fc.Priorities())
	fmt.Println("saturation:", g.(gate.SaturationDetector).Saturation())
	adm.Done()
	// Output:
	// bands: [10 0 -5]
	// saturation: 0.25
}
