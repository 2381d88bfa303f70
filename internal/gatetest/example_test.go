package gatetest_test

import (
	"fmt"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/gatetest"
)

// A UsageGate admits everything and keeps what it heard of each slot, for a
// test to check what a controller or a router reported.
func ExampleUsageGate() {
	g := &gatetest.UsageGate{}
	s, err := gate.NewSerial(g, nil)
	if err != nil {
		panic(err)
	}
	st, _ := s.TryAcquire(0, 700)
	st.Done(false) // never reached a model server
	for _, u := range g.Returns() {
		fmt.Printf("cost %d, unused %v, held %v\n", u.Cost, u.Unused, u.Held == time.Duration(0))
	}
	// Output:
	// cost 700, unused true, held true
}
