package flowcontrol

import (
	"github.com/sluicegate/sluice/internal/dheap"
	"github.com/sluicegate/sluice/ordering"
)

// GlobalStrict returns the global-strict-fairness-policy: the next request
// is the best head across all flows by the band's ordering policy, ties by
// arrival — exactly the order of one queue for the whole band, whatever the
// flows. It is the default. Next is O(1); a change of a flow's head costs
// O(log flows).
func GlobalStrict() Fairness { return globalStrict{} }

type globalStrict struct{}

func (globalStrict) TypeName() string { return GlobalStrictFairnessName }

func (globalStrict) NewScheduler() Scheduler {
	return &strictScheduler{heap: dheap.NewPrefixed[ordering.Rank, *Flow](ordering.Rank.Less, ordering.Rank.Digest)}
}

type strictScheduler struct {
	heap *dheap.Heap[ordering.Rank, *Flow]
}

func (s *strictScheduler) Add(f *Flow)    { f.sched.heap = s.heap.Push(f.headRank(), f) }
func (s *strictScheduler) Remove(f *Flow) { s.heap.Remove(f.sched.heap) }

func (s *strictScheduler) HeadChanged(f *Flow) { s.heap.Fix(f.sched.heap, f.headRank()) }

func (s *strictScheduler) Next() *Flow {
	_, f, _ := s.heap.Peek()
	return f
}

func (s *strictScheduler) Served(f *Flow, _ int64) {
	if f.Len() > 0 {
		s.heap.Fix(f.sched.heap, f.headRank())
	}
}

// headRank is the flow's head in the band's single-queue order: its key,
// then its arrival in the band, in the order a heap queue keeps.
func (f *Flow) headRank() ordering.Rank {
	if f.queue == nil {
		// A FIFO band's single queue is in arrival order, whatever the
		// keys say (enqueue times read before the lock may disagree).
		return ordering.Rank{Arrival: f.waiters.Front().seq}
	}
	w := f.head()
	return ordering.Rank{Key: w.key, Arrival: w.seq}
}
