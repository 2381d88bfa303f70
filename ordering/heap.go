package ordering

import "github.com/sluicegate/sluice/internal/dheap"

// Rank is an entry's place in a queue's order: the [Key] its policy
// derived, then its arrival number, which makes the order total and equal
// keys first come, first served. The heap queue orders its items by Rank;
// a caller that keeps its own heap of entries in a policy's order (the best
// head of several queues, say) orders them by Rank too, so that both agree.
type Rank struct {
	Key     Key
	Arrival uint64
}

// Less reports whether r leaves before o: the smaller key first, and for
// equal keys the earlier arrival.
func (r Rank) Less(o Rank) bool {
	if r.Key != o.Key {
		return r.Key.less(o.Key)
	}
	return r.Arrival < o.Arrival
}

// Digest returns a 64-bit summary of r that orders like r wherever it
// differs: r.Less(o) implies r.Digest() <= o.Digest(). A heap that compares
// digests first, and calls Less only when two are equal, orders exactly by
// Rank (see [Key] for the keys whose digests differ).
//
// It is the class in the top two bits, then Primary clamped to
// [0, 2^62-1]. Classes from 3 up all map to 3<<62, with no Primary bits, or
// a key of class 3 could get a larger digest than one of class 4. Each step
// is monotone, so the digest is.
func (r Rank) Digest() uint64 {
	const maxPrimary = 1<<62 - 1
	if r.Key.Class >= 3 {
		return 3 << 62
	}
	class := r.Key.Class << 62
	switch p := r.Key.Primary; {
	case p.Hi < bias: // negative
		return class
	case p.Hi > bias || p.Lo > maxPrimary:
		return class | maxPrimary
	default:
		return class | p.Lo
	}
}

// heapQueue orders items by key in a 4-ary heap. Add, PopHead and Remove are
// O(log n); Peek, Len and ByteSize O(1).
type heapQueue struct {
	queueCore
	heap *dheap.Heap[Rank, *Item]
}

func newHeapQueue(core queueCore) *heapQueue {
	return &heapQueue{queueCore: core, heap: dheap.NewPrefixed[Rank, *Item](Rank.Less, Rank.Digest)}
}

func (q *heapQueue) Kind() QueueKind { return QueueHeap }

func (q *heapQueue) Add(it *Item) {
	if it == nil {
		panic("ordering: Add of a nil item")
	}
	q.AddKeyed(it, q.policy.Key(it))
}

func (q *heapQueue) AddKeyed(it *Item, k Key) {
	seq := q.admit(it)
	it.handle = q.heap.Push(Rank{Key: k, Arrival: seq}, it)
}

func (q *heapQueue) Peek() *Item {
	_, it, _ := q.heap.Peek()
	return it
}

func (q *heapQueue) PopHead() *Item {
	_, it, ok := q.heap.Pop()
	if !ok {
		return nil
	}
	q.leave(it)
	return it
}

func (q *heapQueue) Remove(it *Item) bool {
	if it == nil || it.owner != &q.queueCore {
		return false
	}
	if _, _, ok := q.heap.Remove(it.handle); !ok {
		panic("ordering: heap queue lost track of an item") // owner and handle disagree: a bug here
	}
	q.leave(it)
	return true
}

func (q *heapQueue) Drain() []*Item {
	out := make([]*Item, 0, q.heap.Len())
	for {
		_, it, ok := q.heap.Pop()
		if !ok {
			break
		}
		q.leave(it)
		out = append(out, it)
	}
	return out
}

func (q *heapQueue) leave(it *Item) {
	it.handle = dheap.Handle[Rank, *Item]{}
	q.release(it)
}
