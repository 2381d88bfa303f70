// Package ordering decides the order in which a band's waiting requests
// leave: the [Item] a queue holds, the [Policy] that derives each item's
// [Key] once at enqueue (FCFS, EDF, SLO-deadline, or your own), and two
// [Queue] implementations, a FIFO list and a 4-ary heap, that compare only
// those keys. A caller that queues elements of its own type, rather than
// Items, builds on the same two: [List], the allocation-free list the FIFO
// queue keeps its items in, and [Rank], the order the heap queue keeps.
package ordering

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegate/sluice/internal/header"
)

// Capability is a property a queue offers and a policy may require.
type Capability int

const (
	// CapabilityFIFO: items leave in the order they were added. Every queue
	// offers it; the heap queue emulates it through the keys of a FIFO
	// policy.
	CapabilityFIFO Capability = iota + 1
	// CapabilityPriorityConfigurable: items leave in the order of the
	// policy's keys. Only the heap queue offers it.
	CapabilityPriorityConfigurable
)

// String returns "FIFO" or "PriorityConfigurable".
func (c Capability) String() string {
	switch c {
	case CapabilityFIFO:
		return "FIFO"
	case CapabilityPriorityConfigurable:
		return "PriorityConfigurable"
	}
	return "Capability(" + strconv.Itoa(int(c)) + ")"
}

// Policy decides the order in which a queue releases its items. A policy
// derives each item's [Key] once, when the item is added; the queue then
// compares keys only. Key must be a deterministic function of the item's
// exported fields, and must be safe to call from several goroutines (queues
// sharing one policy may be used concurrently). Policies are values: the
// built-in ones are stateless and may be shared by any number of queues.
type Policy interface {
	// TypeName names the policy, e.g. "fcfs-ordering-policy".
	TypeName() string
	// RequiredCapability is the capability a queue needs to honour the
	// policy's order.
	RequiredCapability() Capability
	// Key derives the item's ordering key. It is called once per Add and may
	// read headers. It must not retain the item, nor its Header or Value,
	// once it has returned: the caller may clear or reuse the item at once.
	Key(it *Item) Key
}

// Built-in policy type names, as accepted by [PolicyByName].
const (
	FCFSPolicyName        = "fcfs-ordering-policy"
	EDFPolicyName         = "edf-ordering-policy"
	SLODeadlinePolicyName = "slo-deadline-ordering-policy"
)

// Request headers read by the slo-deadline policy.
const (
	// SLOTTFTHeader carries the request's time-to-first-token objective in
	// integer milliseconds.
	SLOTTFTHeader = "x-llm-d-slo-ttft-ms"
	// DeprecatedSLOTTFTHeader is the older name of SLOTTFTHeader, read only
	// when SLOTTFTHeader is absent.
	DeprecatedSLOTTFTHeader = "x-slo-ttft-ms"
)

// Canonical forms of the SLO headers, so lookups do not allocate.
const (
	sloHeaderCanonical      = "X-Llm-D-Slo-Ttft-Ms"
	sloAliasHeaderCanonical = "X-Slo-Ttft-Ms"
)

var (
	// ErrUnknownPolicy is wrapped by the error of [PolicyByName] for a type
	// name it does not know.
	ErrUnknownPolicy = errors.New("ordering: unknown policy type")
	// ErrIncompatibleQueue is wrapped by the error of [CheckQueue] and
	// [NewQueue] when the queue lacks the capability the policy requires.
	ErrIncompatibleQueue = errors.New("ordering: incompatible queue")
)

// FCFS returns the first-come, first-served policy: items leave by enqueue
// time, then by arrival order. It requires [CapabilityFIFO], so it runs on
// both queues; on the FIFO queue the order is simply the order of Add.
func FCFS() Policy { return fcfsPolicy{} }

// EDF returns the earliest-deadline-first policy: the deadline is enqueue
// time plus the item's TTL. Items with a TTL leave before every item without
// one (TTL <= 0); ties go by enqueue time, then arrival order. It requires
// [CapabilityPriorityConfigurable].
func EDF() Policy { return edfPolicy{} }

// SLODeadline returns the slo-deadline policy. An item's deadline is its
// received time plus the integer number of milliseconds in the
// x-llm-d-slo-ttft-ms header ([SLOTTFTHeader]), whose name is matched
// without regard to case. The value is trimmed of surrounding spaces and tabs
// and read as strconv.ParseInt reads base 10 (so "+5" is 5). The deprecated
// x-slo-ttft-ms header is read only when the new name is absent; when the
// new name is present its value decides, even if invalid.
//
// A missing, empty, non-integer or negative value, or one too large for a
// time.Duration of milliseconds (over 9223372036854), means no deadline.
// Every item with a deadline leaves before every item without one, whatever
// the values; earlier deadlines leave first; equal deadlines, and items
// without one, go by received time, then arrival order. Deadlines are exact
// 128-bit sums: no far-future sentinel, no overflow.
//
// It requires [CapabilityPriorityConfigurable].
func SLODeadline() Policy { return sloDeadlinePolicy{} }

// PolicyByName returns the built-in policy with the given type name. For an
// unknown name the error names it, lists the known ones, and wraps
// [ErrUnknownPolicy].
func PolicyByName(name string) (Policy, error) {
	switch name {
	case FCFSPolicyName:
		return FCFS(), nil
	case EDFPolicyName:
		return EDF(), nil
	case SLODeadlinePolicyName:
		return SLODeadline(), nil
	}
	return nil, fmt.Errorf("%w %q (known: %s, %s, %s)", ErrUnknownPolicy, name,
		EDFPolicyName, FCFSPolicyName, SLODeadlinePolicyName)
}

// DefaultQueueKind returns the queue a policy runs on by default: the heap
// queue if the policy requires [CapabilityPriorityConfigurable], else the
// FIFO queue.
func DefaultQueueKind(p Policy) QueueKind {
	if p != nil && p.RequiredCapability() == CapabilityPriorityConfigurable {
		return QueueHeap
	}
	return QueueFIFO
}

type fcfsPolicy struct{}

func (fcfsPolicy) TypeName() string               { return FCFSPolicyName }
func (fcfsPolicy) RequiredCapability() Capability { return CapabilityFIFO }
func (fcfsPolicy) Key(it *Item) Key               { return Key{Primary: TimeOrdinal(it.EnqueueTime)} }

type edfPolicy struct{}

func (edfPolicy) TypeName() string               { return EDFPolicyName }
func (edfPolicy) RequiredCapability() Capability { return CapabilityPriorityConfigurable }

func (edfPolicy) Key(it *Item) Key {
	enqueued := TimeOrdinal(it.EnqueueTime)
	if it.TTL <= 0 {
		return Key{Class: 1, Primary: enqueued, Secondary: enqueued}
	}
	return Key{Primary: enqueued.Add(int64(it.TTL)), Secondary: enqueued}
}

type sloDeadlinePolicy struct{}

func (sloDeadlinePolicy) TypeName() string               { return SLODeadlinePolicyName }
func (sloDeadlinePolicy) RequiredCapability() Capability { return CapabilityPriorityConfigurable }

func (sloDeadlinePolicy) Key(it *Item) Key {
	received := TimeOrdinal(it.ReceivedTime)
	slo, ok := itemSLO(it)
	if !ok {
		return Key{Class: 1, Primary: received, Secondary: received}
	}
	return Key{Primary: received.Add(int64(slo)), Secondary: received}
}

// SLOTTFT returns the time-to-first-token objective the item's headers
// carry, read as the slo-deadline policy reads it ([SLODeadline]):
// x-llm-d-slo-ttft-ms, or the deprecated x-slo-ttft-ms when it is absent,
// in integer milliseconds; ok is false when there is none or it is not a
// valid value. A request's deadline is its ReceivedTime plus this.
func (it *Item) SLOTTFT() (slo time.Duration, ok bool) { return itemSLO(it) }

// itemSLO returns the item's SLO from its headers, with the precedence of the
// new header name over the deprecated one.
func itemSLO(it *Item) (time.Duration, bool) {
	v, ok := header.Value(it.Header, sloHeaderCanonical)
	if !ok {
		v, ok = header.Value(it.Header, sloAliasHeaderCanonical)
		if !ok {
			return 0, false
		}
	}
	return parseSLO(v)
}

// maxSLOMillis is the largest number of milliseconds a time.Duration holds.
const maxSLOMillis = math.MaxInt64 / int64(time.Millisecond)

// parseSLO reads an SLO header value: surrounding spaces and tabs trimmed,
// then a base-10 integer number of milliseconds in [0, maxSLOMillis].
func parseSLO(v string) (time.Duration, bool) {
	ms, err := strconv.ParseInt(strings.Trim(v, " \t"), 10, 64)
	if err != nil || ms < 0 || ms > maxSLOMillis {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
