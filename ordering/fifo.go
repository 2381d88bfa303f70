package ordering

// fifoQueue keeps its items in a List threaded through the items
// themselves, so every operation is O(1) and nothing allocates.
type fifoQueue struct {
	queueCore
	list List[Item]
}

// itemLinks returns the links a fifoQueue's list keeps in it.
func itemLinks(it *Item) *Links[Item] { return &it.links }

func (q *fifoQueue) Kind() QueueKind { return QueueFIFO }

func (q *fifoQueue) Add(it *Item) {
	if it == nil {
		panic("ordering: Add of a nil item")
	}
	q.AddKeyed(it, q.policy.Key(it))
}

// AddKeyed ignores k: arrival order is the only order a FIFO queue keeps.
func (q *fifoQueue) AddKeyed(it *Item, _ Key) {
	q.admit(it)
	q.list.PushBack(it, itemLinks)
}

func (q *fifoQueue) Peek() *Item { return q.list.Front() }

func (q *fifoQueue) PopHead() *Item {
	it := q.list.PopFront(itemLinks)
	if it != nil {
		q.release(it)
	}
	return it
}

func (q *fifoQueue) Remove(it *Item) bool {
	if it == nil || it.owner != &q.queueCore {
		return false
	}
	q.list.Remove(it, itemLinks)
	q.release(it)
	return true
}

func (q *fifoQueue) Drain() []*Item {
	out := make([]*Item, 0, q.n)
	for it := q.PopHead(); it != nil; it = q.PopHead() {
		out = append(out, it)
	}
	return out
}
