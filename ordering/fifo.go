package ordering

// fifoQueue is a doubly linked list threaded through the items themselves,
// so every operation is O(1) and nothing allocates.
type fifoQueue struct {
	queueCore
	head, tail *Item
}

func (q *fifoQueue) Kind() QueueKind { return QueueFIFO }

func (q *fifoQueue) Add(it *Item) {
	if it == nil {
		panic("ordering: Add of a nil item")
	}
	q.AddKeyed(it, q.policy.Key(it))
}

// AddKeyed appends it: the order of a FIFO queue is that of Add, whatever
// the keys.
func (q *fifoQueue) AddKeyed(it *Item, _ Key) {
	q.admit(it)
	it.prev, it.next = q.tail, nil
	if q.tail == nil {
		q.head = it
	} else {
		q.tail.next = it
	}
	q.tail = it
}

func (q *fifoQueue) Peek() *Item { return q.head }

func (q *fifoQueue) PopHead() *Item {
	it := q.head
	if it != nil {
		q.unlink(it)
	}
	return it
}

func (q *fifoQueue) Remove(it *Item) bool {
	if it == nil || it.owner != &q.queueCore {
		return false
	}
	q.unlink(it)
	return true
}

func (q *fifoQueue) Drain() []*Item {
	out := make([]*Item, 0, q.n)
	for it := q.head; it != nil; {
		next := it.next
		it.prev, it.next = nil, nil
		q.release(it)
		out = append(out, it)
		it = next
	}
	q.head, q.tail = nil, nil
	return out
}

func (q *fifoQueue) unlink(it *Item) {
	if it.prev == nil {
		q.head = it.next
	} else {
		it.prev.next = it.next
	}
	if it.next == nil {
		q.tail = it.prev
	} else {
		it.next.prev = it.prev
	}
	it.prev, it.next = nil, nil
	q.release(it)
}
