package ordering

import "github.com/sluicegate/sluice/internal/dheap"

// heapKey is what the heap compares: the policy's key, then the arrival
// sequence number that makes the order total and ties first come, first
// served.
type heapKey struct {
	key Key
	seq uint64
}

// heapKeyPrefix is the 64-bit digest the heap compares before calling
// lessHeapKey: the class in the top two bits, then Primary clamped to
// [0, 2^62-1]. Classes from 3 up all map to 3<<62, with no Primary bits, or
// a key of class 3 could get a larger digest than one of class 4. Each step
// is monotone, so the digest is.
func heapKeyPrefix(k heapKey) uint64 {
	const maxPrimary = 1<<62 - 1
	if k.key.Class >= 3 {
		return 3 << 62
	}
	class := k.key.Class << 62
	switch p := k.key.Primary; {
	case p.Hi < bias: // negative
		return class
	case p.Hi > bias || p.Lo > maxPrimary:
		return class | maxPrimary
	default:
		return class | p.Lo
	}
}

func lessHeapKey(a, b heapKey) bool {
	if a.key != b.key {
		return a.key.less(b.key)
	}
	return a.seq < b.seq
}

// heapQueue orders items by key in a 4-ary heap. Add, PopHead and Remove are
// O(log n); Peek, Len and ByteSize O(1).
type heapQueue struct {
	queueCore
	heap *dheap.Heap[heapKey, *Item]
}

func newHeapQueue(core queueCore) *heapQueue {
	return &heapQueue{queueCore: core, heap: dheap.NewPrefixed[heapKey, *Item](lessHeapKey, heapKeyPrefix)}
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
	it.handle = q.heap.Push(heapKey{key: k, seq: seq}, it)
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
	it.handle = dheap.Handle[heapKey, *Item]{}
	q.release(it)
}
