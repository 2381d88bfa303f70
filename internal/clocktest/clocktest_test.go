package clocktest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicegate/sluice/internal/clocktest"
)

// TestAdvanceFiresTimersInOrderAtTheirInstants: timers fire within Advance
// only, by instant and then in the order they were set, each reading its
// own instant; a stopped timer never fires, and one set by a firing timer
// fires in the same Advance when it is due by its end.
func TestAdvanceFiresTimersInOrderAtTheirInstants(t *testing.T) {
	start := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	c := clocktest.New(start)
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+c.Now().Sub(start).String()) }
	}
	c.AfterFunc(2*time.Second, at("b"))
	c.AfterFunc(time.Second, func() {
		at("a")()
		c.AfterFunc(time.Second, at("a+1s"))
	})
	c.AfterFunc(2*time.Second, at("c"))
	stopped := c.AfterFunc(time.Second, at("stopped"))
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports true once, for a pending timer")
	}
	c.AfterFunc(time.Hour, at("later"))
	if len(got) != 0 || c.Pending() != 4 {
		t.Fatalf("before Advance: fired %v, %d pending", got, c.Pending())
	}
	c.Advance(3 * time.Second)
	if want := []string{"a@1s", "b@2s", "c@2s", "a+1s@2s"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if c.Now() != start.Add(3*time.Second) || c.Pending() != 1 {
		t.Fatalf("after Advance: now %v, %d pending", c.Now(), c.Pending())
	}
}
