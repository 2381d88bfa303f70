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
	return &strictScheduler{heap: dheap.New[headKey, *Flow](lessHead)}
}

type strictScheduler struct {
	heap *dheap.Heap[headKey, *Flow]
}

func (s *strictScheduler) Add(f *Flow)    { f.sched.heap = s.heap.Push(f.headKey(), f) }
func (s *strictScheduler) Remove(f *Flow) { s.heap.Remove(f.sched.heap) }

func (s *strictScheduler) HeadChanged(f *Flow) { s.heap.Fix(f.sched.heap, f.headKey()) }

func (s *strictScheduler) Next() *Flow {
	_, f, _ := s.heap.Peek()
	return f
}

func (s *strictScheduler) Served(f *Flow, _ int64) {
	if f.Len() > 0 {
		s.heap.Fix(f.sched.heap, f.headKey())
	}
}

// headKey is the flow's head in the band's single-queue order.
type headKey struct {
	key ordering.Key
	seq uint64 // arrival in the band
}

func (f *Flow) headKey() headKey {
	if f.queue == nil {
		// A FIFO band's single queue is in arrival order, whatever the
		// keys say (enqueue times read before the lock may disagree).
		return headKey{seq: f.oldest.seq}
	}
	w := f.head()
	return headKey{key: w.key, seq: w.seq}
}

func lessHead(a, b headKey) bool {
	if c := a.key.Compare(b.key); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}
