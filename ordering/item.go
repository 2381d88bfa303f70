package ordering

import (
	"net/http"
	"net/textproto"
	"time"

	"github.com/sluicegate/sluice/internal/dheap"
	"github.com/sluicegate/sluice/internal/header"
)

// Item is one queued request as queues and policies see it. The caller fills
// the exported fields before [Queue.Add] and must not change them while the
// item is queued. The item itself is the handle for [Queue.Remove]: it
// records, in unexported fields, which queue holds it and where.
//
// An item is in at most one queue at a time. Once it has left its queue (by
// PopHead, Remove or Drain) it may be added again, to any queue.
type Item struct {
	// ReceivedTime is when the gateway received the request; the
	// slo-deadline policy measures deadlines from it.
	ReceivedTime time.Time
	// EnqueueTime is when the request entered the queue; FCFS and EDF order
	// by it.
	EnqueueTime time.Time
	// Header holds the request headers. Read them with [Item.HeaderValue],
	// which ignores letter case.
	Header http.Header
	// TTL is the request's effective queue-wait time to live; zero or
	// negative means none. EDF orders by EnqueueTime + TTL.
	TTL time.Duration
	// ByteSize is the request's size, booked into the queue's byte count at
	// Add; removal debits exactly the amount booked.
	ByteSize int64
	// Value is the caller's payload, opaque to this package.
	Value any

	owner  *queueCore // the queue holding the item, nil when not queued
	booked int64      // ByteSize as credited at Add

	links  Links[Item]               // FIFO queue position
	handle dheap.Handle[Rank, *Item] // heap queue position
}

// Queued reports whether the item is in a queue.
func (it *Item) Queued() bool { return it.owner != nil }

// HeaderValue returns the first value of the request header name, ignoring
// letter case in name and in the header map's keys, so it also finds keys
// that were stored without canonicalization. ok is false when no key matches
// or every matching key has no values. When several keys differ only in case,
// the canonical one wins, then the smallest in byte order.
func (it *Item) HeaderValue(name string) (value string, ok bool) {
	return header.Value(it.Header, textproto.CanonicalMIMEHeaderKey(name))
}
