package ordering

import (
	"fmt"
)

// QueueKind names a queue implementation.
type QueueKind string

const (
	// QueueFIFO is the linked-list queue: capability FIFO, O(1) operations.
	QueueFIFO QueueKind = "fifo"
	// QueueHeap is the 4-ary heap queue: capability PriorityConfigurable,
	// O(log n) add and removal.
	QueueHeap QueueKind = "heap"
)

// Queue holds items in the order of its policy.
//
// A Queue is not safe for concurrent use: its owner serializes every call
// (a flowcontrol.FlowController makes them all under its one controller-wide
// lock).
type Queue interface {
	// Kind names the implementation.
	Kind() QueueKind
	// Policy is the policy the queue was built with.
	Policy() Policy
	// Add derives the item's key with Policy().Key, books its ByteSize and
	// queues it. It panics if the item is already in a queue. O(1) FIFO,
	// O(log n) heap.
	Add(it *Item)
	// AddKeyed is Add with the key already derived, as Policy().Key(it),
	// by the caller: a caller that serializes its queues under a lock
	// derives keys before taking it, so that a policy's Key (user code,
	// which may read headers or panic) never runs in the critical
	// section. A key derived by another policy breaks the queue's order.
	AddKeyed(it *Item, k Key)
	// Peek returns the item that would leave next, or nil when the queue is
	// empty. O(1).
	Peek() *Item
	// PopHead removes and returns the item that leaves next, or nil when the
	// queue is empty. O(1) FIFO, O(log n) heap.
	PopHead() *Item
	// Remove removes it if it is in this queue and reports whether it was.
	// An item that is in another queue, or in none, is left alone. O(1)
	// FIFO, O(log n) heap.
	Remove(it *Item) bool
	// Drain removes and returns every item, in the order they would leave.
	// O(n) FIFO, O(n log n) heap.
	Drain() []*Item
	// Len returns the number of queued items. O(1).
	Len() int
	// ByteSize returns the sum of the ByteSize booked for the queued items.
	// O(1).
	ByteSize() int64
}

// Capability returns the capability a queue of kind k offers:
// [CapabilityFIFO] for the FIFO queue, [CapabilityPriorityConfigurable] for
// the heap queue, and 0 for a kind this package does not know.
func (k QueueKind) Capability() Capability {
	switch k {
	case QueueFIFO:
		return CapabilityFIFO
	case QueueHeap:
		return CapabilityPriorityConfigurable
	}
	return 0
}

// CheckQueue reports whether a queue of the given kind can run policy p,
// without building one: nil if it can. If the kind lacks the capability p
// requires, the error names both and wraps [ErrIncompatibleQueue]. An
// unknown kind or a nil policy is an error too. [NewQueue] fails exactly
// when CheckQueue does, with the same error.
func CheckQueue(kind QueueKind, p Policy) error {
	if p == nil {
		return fmt.Errorf("ordering: nil policy for %q queue", kind)
	}
	offered := kind.Capability()
	if offered == 0 {
		return fmt.Errorf("ordering: unknown queue kind %q (known: %s, %s)", kind, QueueFIFO, QueueHeap)
	}
	required := p.RequiredCapability()
	if !satisfies(offered, required) {
		return fmt.Errorf("%w: policy %q requires capability %v, which the %q queue (capability %v) lacks",
			ErrIncompatibleQueue, p.TypeName(), required, kind, offered)
	}
	return nil
}

// NewQueue returns an empty queue of the given kind for policy p. It fails
// when [CheckQueue] does, with its error.
func NewQueue(kind QueueKind, p Policy) (Queue, error) {
	if err := CheckQueue(kind, p); err != nil {
		return nil, err
	}
	core := queueCore{policy: p}
	if kind == QueueFIFO {
		return &fifoQueue{queueCore: core}, nil
	}
	return newHeapQueue(core), nil
}

// satisfies reports whether a queue offering capability offered can run a
// policy requiring required. A keyed queue can keep any order, including
// arrival order; a FIFO queue keeps only arrival order.
func satisfies(offered, required Capability) bool {
	switch required {
	case CapabilityFIFO:
		return offered == CapabilityFIFO || offered == CapabilityPriorityConfigurable
	case CapabilityPriorityConfigurable:
		return offered == CapabilityPriorityConfigurable
	}
	return false
}

// queueCore is the bookkeeping both queues share. Its address identifies the
// queue that holds an item.
type queueCore struct {
	policy Policy
	n      int
	bytes  int64
	seq    uint64
}

func (c *queueCore) Policy() Policy  { return c.policy }
func (c *queueCore) Len() int        { return c.n }
func (c *queueCore) ByteSize() int64 { return c.bytes }

// admit prepares it for entry: checks it is free and books it. It returns
// the item's arrival number in the queue, which breaks ties between equal
// keys. The item keeps no copy of its key: only the heap compares keys, and
// it stores them beside its entries.
func (c *queueCore) admit(it *Item) uint64 {
	if it == nil {
		panic("ordering: Add of a nil item")
	}
	if it.owner != nil {
		panic("ordering: Add of an item that is already queued")
	}
	seq := c.seq
	c.seq++
	it.owner = c
	it.booked = it.ByteSize
	c.n++
	c.bytes += it.booked
	return seq
}

// release debits an item that has left the queue.
func (c *queueCore) release(it *Item) {
	it.owner = nil
	c.n--
	c.bytes -= it.booked
	it.booked = 0
}
