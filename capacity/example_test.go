package capacity_test

import (
	"errors"
	"fmt"

	"github.com/sluicegate/sluice/capacity"
)

// A router without a flow registry of its own keeps its bands in a Bands and
// updates them as requests queue and leave; any response layer reads them
// through the Reader interface.
func Example() {
	var bands capacity.Bands
	bands.Set(capacity.Snapshot{
		Priority:        0,
		QueuedRequests:  81,
		RequestCapacity: capacity.Bounded(100),
	})
	bands.Set(capacity.Snapshot{Priority: -1}) // sheddable, unbounded

	// A request leaves band 0.
	bands.Update(0, func(s *capacity.Snapshot) { s.QueuedRequests-- })

	var r capacity.Reader = &bands
	for _, p := range []int{0, -1, 7} {
		s, err := r.CapacitySnapshot(p)
		if errors.Is(err, capacity.ErrBandNotFound) {
			fmt.Println(err)
			continue
		}
		fmt.Println(s)
	}
	// Output:
	// band 0: 80/100 requests, 0/unbounded bytes
	// band -1: 0/unbounded requests, 0/unbounded bytes
	// capacity: band not found: priority 7
}

// A bounded limit of 0 admits nothing; the zero Limit is unbounded.
func ExampleLimit() {
	for _, l := range []capacity.Limit{{}, capacity.Bounded(0), capacity.Bounded(2)} {
		n, bounded := l.Value()
		fmt.Printf("%-9s bounded=%-5t value=%d allows 1: %t\n", l, bounded, n, l.Allows(1))
	}
	// Output:
	// unbounded bounded=false value=0 allows 1: true
	// 0         bounded=true  value=0 allows 1: false
	// 2         bounded=true  value=2 allows 1: true
}
