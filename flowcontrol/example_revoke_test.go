package flowcontrol_test

import (
	"context"
	"fmt"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// A batch request holds the only slot when an interactive one arrives: with
// eviction on, the batch admission is revoked, its holder stops and calls
// Done, and the interactive request starts in the slot it gave back.
func ExampleAdmission_Revoked() {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
		FallbackPriority: 10,
		Gate:             gate.MaxInFlight(1),
		Eviction:         &flowcontrol.Eviction{}, // llm-d's enableEviction
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	ctx := context.Background()

	batch, _ := fc.EnqueueAndWait(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "nightly", Priority: -1}})
	fc.Submit(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "chat", Priority: 10}}, func(a *flowcontrol.Admission, err error) {
		fmt.Println("chat started in band", a.Effective().Priority)
		a.Done()
	})

	<-batch.Revoked() // in a router: cancel the call to the model server
	fmt.Println("batch:", batch.Err().(*flowcontrol.RejectionError).Outcome)
	batch.Done() // confirms the revocation and gives the slot back
	// Output:
	// batch: evicted-priority
	// chat started in band 10
}
