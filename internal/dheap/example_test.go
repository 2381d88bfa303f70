package dheap_test

import (
	"fmt"

	"github.com/sluicegate/sluice/internal/dheap"
)

// A heap of jobs keyed by deadline. Handles let a caller cancel a job or move
// its deadline; a handle whose job has left the heap is refused.
func Example() {
	h := dheap.NewPrefixed[int64, string](
		func(a, b int64) bool { return a < b },
		func(k int64) uint64 { return uint64(k) ^ 1<<63 }, // order-preserving for int64
	)
	h.Push(30, "report")
	backup := h.Push(10, "backup")
	h.Push(20, "email")
	cleanup := h.Push(40, "cleanup")

	h.Fix(cleanup, 5) // cleanup became urgent
	_, job, _ := h.Remove(backup)
	fmt.Println("cancelled:", job)

	for h.Len() > 0 {
		deadline, job, _ := h.Pop()
		fmt.Println(deadline, job)
	}
	_, _, ok := h.Remove(backup)
	fmt.Println("stale handle accepted:", ok)
	// Output:
	// cancelled: backup
	// 5 cleanup
	// 20 email
	// 30 report
	// stale handle accepted: false
}
