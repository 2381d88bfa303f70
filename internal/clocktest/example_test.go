package clocktest_test

import (
	"fmt"
	"time"

	"github.com/sluicegate/sluice/internal/clocktest"
)

// A timer fires only when the test advances the clock past its instant,
// on the goroutine that advances it.
func Example() {
	clock := clocktest.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	clock.AfterFunc(2*time.Second, func() { fmt.Println("fired at", clock.Now().Format(time.TimeOnly)) })
	stopped := clock.AfterFunc(time.Second, func() { fmt.Println("never") })
	fmt.Println("stopped:", stopped.Stop())
	fmt.Println("pending:", clock.Pending())
	clock.Advance(3 * time.Second)
	fmt.Println("now", clock.Now().Format(time.TimeOnly), "pending:", clock.Pending())
	// Output:
	// stopped: true
	// pending: 1
	// fired at 00:00:02
	// now 00:00:03 pending: 0
}
