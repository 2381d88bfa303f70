package ordering

import (
	"math"
	"math/bits"
	"time"
)

// Key is the ordering key a [Policy] derives for an item once, when the item
// is added to a queue. Keys compare lexicographically: Class first, then
// Primary, then Secondary; the smaller key leaves first. A queue breaks exact
// ties by arrival order (a per-queue sequence number), so equal keys are
// first come, first served.
//
// Key is a small comparable value of fixed-width words: comparing two keys
// never parses, never allocates and is exact over the whole range of the
// values it encodes. The built-in policies fill it as follows:
//
//	policy        Class                  Primary                              Secondary
//	fcfs          0                      EnqueueTime                          zero
//	edf           0 with a TTL, else 1   EnqueueTime+TTL, else EnqueueTime    EnqueueTime
//	slo-deadline  0 with an SLO, else 1  ReceivedTime+SLO, else ReceivedTime  ReceivedTime
//
// where a time t is encoded as TimeOrdinal(t) and t+d as DeadlineOrdinal(t, d).
// Times compare by their wall-clock instant; monotonic clock readings are
// ignored, so a policy's order depends only on the values it was given.
//
// A custom policy fills the fields the same way: Class for coarse groups
// (every key of a smaller class leaves before every key of a larger one,
// whatever its other fields), Primary for the main criterion and Secondary
// for ties. [TimeOrdinal], [DeadlineOrdinal] and [Int64Ordinal] encode times,
// deadlines and signed integers so that the word order is their natural order.
//
// The heap queue compares a 64-bit digest of Class and Primary first and the
// full keys only when digests are equal. The digest is exact for Class below
// 3 and for Primary values from 0 to 2^62-1 (Int64Ordinal of such integers,
// or times from 1970 to 2116), so keys in that range compare fastest; any
// other values are still ordered exactly, just with one more step.
type Key struct {
	Class     uint64
	Primary   Ordinal
	Secondary Ordinal
}

// Compare returns -1 if k sorts before o, +1 if after, and 0 if they are
// equal.
func (k Key) Compare(o Key) int {
	if k.Class != o.Class {
		if k.Class < o.Class {
			return -1
		}
		return 1
	}
	if c := k.Primary.Compare(o.Primary); c != 0 {
		return c
	}
	return k.Secondary.Compare(o.Secondary)
}

// less reports whether k sorts before o.
func (k Key) less(o Key) bool {
	if k.Class != o.Class {
		return k.Class < o.Class
	}
	if k.Primary != o.Primary {
		return k.Primary.less(o.Primary)
	}
	return k.Secondary.less(o.Secondary)
}

// Ordinal is a signed 128-bit integer stored with a bias of 2^127, so that
// comparing Hi and then Lo as unsigned words gives numeric order. The zero
// Ordinal is the smallest value, -2^127.
//
// The constructors place every time.Time and every int64 well inside the
// range, so sums of such values and time.Duration offsets never wrap.
type Ordinal struct {
	Hi, Lo uint64
}

// bias is added to Hi so that the sign bit of the two's complement value is
// inverted, turning signed order into unsigned order.
const bias = 1 << 63

// unixToInternal is the number of seconds from January 1, year 1 (the origin
// of time.Time) to the Unix epoch.
const unixToInternal int64 = 62135596800

// Int64Ordinal encodes v. Int64Ordinal(a) < Int64Ordinal(b) exactly when
// a < b, and Int64Ordinal(0) == TimeOrdinal(time.Unix(0, 0)): integers share
// the scale of nanoseconds since the Unix epoch.
func Int64Ordinal(v int64) Ordinal {
	return Ordinal{Hi: uint64(v>>63) ^ bias, Lo: uint64(v)}
}

// TimeOrdinal encodes t as its exact number of nanoseconds since the Unix
// epoch, for every time.Time (no overflow at any date). It orders like the
// wall clock: TimeOrdinal(a) < TimeOrdinal(b) exactly when
// a.Round(0).Before(b.Round(0)); monotonic clock readings and locations are
// ignored.
func TimeOrdinal(t time.Time) Ordinal {
	sec := t.Unix()
	hi := uint64(sec >> 63) // sign extension of sec to 128 bits
	if sec > math.MaxInt64-unixToInternal {
		// time.Time counts seconds from year 1 in an int64; Unix() subtracts
		// unixToInternal and wraps for the earliest representable times. No
		// real Unix second exceeds MaxInt64-unixToInternal, so a larger value
		// is such a wrap: the true value is sec - 2^64.
		hi = ^uint64(0)
	}
	// (hi:sec) * 1e9 + nanoseconds, in 128-bit two's complement arithmetic.
	ph, pl := bits.Mul64(uint64(sec), 1e9)
	ph += hi * 1e9
	lo, carry := bits.Add64(pl, uint64(t.Nanosecond()), 0)
	return Ordinal{Hi: (ph + carry) ^ bias, Lo: lo}
}

// DeadlineOrdinal encodes t + d exactly, even where t.Add(d) would saturate
// or the sum of Unix nanoseconds would overflow an int64. It equals
// TimeOrdinal(t).Add(int64(d)).
func DeadlineOrdinal(t time.Time, d time.Duration) Ordinal {
	return TimeOrdinal(t).Add(int64(d))
}

// Add returns o + n. It cannot wrap for any value built from TimeOrdinal or
// Int64Ordinal plus fewer than 2^60 further int64 additions.
func (o Ordinal) Add(n int64) Ordinal {
	lo, carry := bits.Add64(o.Lo, uint64(n), 0)
	return Ordinal{Hi: o.Hi + uint64(n>>63) + carry, Lo: lo}
}

// Compare returns -1 if o < p, +1 if o > p, and 0 if they are equal.
func (o Ordinal) Compare(p Ordinal) int {
	switch {
	case o == p:
		return 0
	case o.less(p):
		return -1
	default:
		return 1
	}
}

func (o Ordinal) less(p Ordinal) bool {
	if o.Hi != p.Hi {
		return o.Hi < p.Hi
	}
	return o.Lo < p.Lo
}
