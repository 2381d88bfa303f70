// Package capacity is the narrow, read-only view of a priority band's size
// that the rest of a router may depend on: how many requests and bytes a band
// holds now, and how many it may hold.
//
// The package holds interfaces and value types only. A flow controller
// implements [Reader]; a response layer reads it; neither needs to know the
// other.
package capacity

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrBandNotFound is wrapped by the error a [Reader] returns for a priority
// that names no band.
var ErrBandNotFound = errors.New("capacity: band not found")

// Reader reads the current capacity snapshot of one priority band.
//
// Implementations must be safe for concurrent use. A read should be O(1),
// allocation-free and must not wait on a lock that a dispatch path holds. For
// a band that does not exist, CapacitySnapshot returns an error wrapping
// [ErrBandNotFound].
type Reader interface {
	CapacitySnapshot(priority int) (Snapshot, error)
}

// ReaderFunc adapts an ordinary function to the [Reader] interface.
type ReaderFunc func(priority int) (Snapshot, error)

// CapacitySnapshot returns f(priority).
func (f ReaderFunc) CapacitySnapshot(priority int) (Snapshot, error) { return f(priority) }

// Limit is a capacity: either bounded by a number (0 included) or unbounded.
//
// The zero Limit is unbounded. That is the safe reading of "unknown": a
// consumer that advertises room (such as the headroom header) advertises
// nothing for an unbounded limit. Build a bounded limit with [Bounded].
type Limit struct {
	n       int64
	bounded bool
}

// Unbounded returns a limit with no bound. It equals the zero Limit.
func Unbounded() Limit { return Limit{} }

// Bounded returns a limit of n. The value is kept as given; a negative n
// admits nothing, like 0, and configuration layers are free to reject it.
func Bounded(n int64) Limit { return Limit{n: n, bounded: true} }

// Value returns the bound and true, or 0 and false for an unbounded limit.
func (l Limit) Value() (n int64, bounded bool) { return l.n, l.bounded }

// IsBounded reports whether l has a bound.
func (l Limit) IsBounded() bool { return l.bounded }

// Allows reports whether a total of used fits within l: always true for an
// unbounded limit, used <= bound otherwise.
func (l Limit) Allows(used int64) bool { return !l.bounded || used <= l.n }

// Fits reports whether adding add to a total of used stays within l: always
// for an unbounded limit, used+add <= bound otherwise. Unlike Allows(used+add)
// it cannot be fooled by overflow: a huge add (a request size is whatever a
// client declares) never wraps the sum around to a small total that passes.
// used and add must not be negative.
func (l Limit) Fits(used, add int64) bool {
	return !l.bounded || (used <= l.n && add <= l.n-used)
}

// String returns the bound in decimal, or "unbounded".
func (l Limit) String() string {
	if !l.bounded {
		return "unbounded"
	}
	return strconv.FormatInt(l.n, 10)
}

// Snapshot is the state of one band at one moment. It is a plain value: it
// holds no pointers and shares nothing with the band it was read from.
//
// The zero Snapshot describes an empty band at priority 0 with unbounded
// capacities.
type Snapshot struct {
	// Priority is the band's priority.
	Priority int
	// QueuedRequests is the number of requests waiting in the band (its
	// length). Requests already dispatched are not counted.
	QueuedRequests int64
	// QueuedBytes is the sum of the byte sizes of the waiting requests.
	QueuedBytes int64
	// RequestCapacity bounds QueuedRequests.
	RequestCapacity Limit
	// ByteCapacity bounds QueuedBytes.
	ByteCapacity Limit
	// QueuedCost is the summed cost (estimated tokens, typically) of the
	// waiting requests; it equals QueuedRequests where requests carry no
	// cost.
	QueuedCost int64
	// CostCapacity bounds QueuedCost.
	CostCapacity Limit
}

// String formats the snapshot for logs. The cost is left out when nothing
// waits and its capacity is unbounded, as for a reader that counts no cost.
func (s Snapshot) String() string {
	str := fmt.Sprintf("band %d: %d/%s requests, %d/%s bytes",
		s.Priority, s.QueuedRequests, s.RequestCapacity, s.QueuedBytes, s.ByteCapacity)
	if s.QueuedCost != 0 || s.CostCapacity.IsBounded() {
		str += fmt.Sprintf(", %d/%s cost", s.QueuedCost, s.CostCapacity)
	}
	return str
}
