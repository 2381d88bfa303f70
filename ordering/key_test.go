package ordering

import (
	"math"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// ordinalBig decodes o into the signed integer it stands for.
func ordinalBig(o Ordinal) *big.Int {
	n := new(big.Int).SetUint64(o.Hi)
	n.Lsh(n, 64)
	n.Or(n, new(big.Int).SetUint64(o.Lo))
	return n.Sub(n, new(big.Int).Lsh(big.NewInt(1), 127))
}

// anyTime draws from the whole range of time.Time, including instants whose
// Unix() wraps around.
func anyTime(t *rapid.T, label string) time.Time {
	sec := rapid.OneOf(
		rapid.Int64(),
		rapid.Int64Range(math.MaxInt64-unixToInternal-2, math.MaxInt64-unixToInternal+2),
		rapid.Int64Range(math.MinInt64, math.MinInt64+2),
		rapid.Int64Range(-2, 2),
	).Draw(t, label+" sec")
	nsec := rapid.Int64Range(0, 999999999).Draw(t, label+" nsec")
	return time.Unix(sec, nsec)
}

func TestTimeOrdinalOrdersLikeTime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := anyTime(t, "a")
		b := anyTime(t, "b")
		if rapid.Bool().Draw(t, "b equals a") {
			b = a.In(time.FixedZone("Y", -7200))
		}
		if got, want := TimeOrdinal(a).Compare(TimeOrdinal(b)), a.Compare(b); got != want {
			t.Fatalf("TimeOrdinal(%v) vs TimeOrdinal(%v) = %d; time.Compare = %d", a, b, got, want)
		}
	})
}

func TestTimeOrdinalValue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Instants where Unix() does not wrap, so it can serve as reference.
		sec := rapid.Int64Range(math.MinInt64+unixToInternal, math.MaxInt64-unixToInternal).Draw(t, "sec")
		nsec := rapid.Int64Range(0, 999999999).Draw(t, "nsec")
		d := time.Duration(rapid.Int64().Draw(t, "d"))
		tm := time.Unix(sec, nsec)
		want := new(big.Int).Mul(big.NewInt(sec), big.NewInt(1e9))
		want.Add(want, big.NewInt(nsec))
		if got := ordinalBig(TimeOrdinal(tm)); got.Cmp(want) != 0 {
			t.Fatalf("TimeOrdinal(Unix(%d, %d)) = %v; want %v", sec, nsec, got, want)
		}
		want.Add(want, big.NewInt(int64(d)))
		if got := ordinalBig(DeadlineOrdinal(tm, d)); got.Cmp(want) != 0 {
			t.Fatalf("DeadlineOrdinal(Unix(%d, %d), %d) = %v; want %v", sec, nsec, d, got, want)
		}
	})
}

func TestTimeOrdinalWrappedUnix(t *testing.T) {
	// time.Unix(MaxInt64-unixToInternal+1, 0) lies before year 1 by far more
	// than 292 billion years; its Unix() wraps to a large positive number.
	early := time.Unix(math.MaxInt64-unixToInternal+1, 0)
	if !early.Before(time.Time{}) {
		t.Fatalf("test premise: %v is not before the zero time", early)
	}
	if TimeOrdinal(early).Compare(TimeOrdinal(time.Time{})) >= 0 {
		t.Fatal("TimeOrdinal does not undo the wrap of Unix()")
	}
}

func TestInt64Ordinal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := rapid.Int64().Draw(t, "a"), rapid.Int64().Draw(t, "b")
		want := 0
		if a < b {
			want = -1
		} else if a > b {
			want = 1
		}
		if got := Int64Ordinal(a).Compare(Int64Ordinal(b)); got != want {
			t.Fatalf("Int64Ordinal(%d) vs (%d) = %d; want %d", a, b, got, want)
		}
		if got := ordinalBig(Int64Ordinal(a)); got.Cmp(big.NewInt(a)) != 0 {
			t.Fatalf("Int64Ordinal(%d) decodes to %v", a, got)
		}
	})
	if Int64Ordinal(0) != TimeOrdinal(time.Unix(0, 0)) {
		t.Fatal("Int64Ordinal(0) differs from the Unix epoch")
	}
}

// genKey draws keys whose fields straddle the edges of the heap's digest.
func genKey(t *rapid.T, label string) Key {
	word := func(l string) uint64 {
		return rapid.OneOf(
			rapid.Uint64Range(0, 4),
			rapid.Uint64Range(bias-2, bias+2),
			rapid.Uint64Range(1<<62-2, 1<<62+2),
			rapid.Uint64(),
		).Draw(t, label+" "+l)
	}
	return Key{
		Class:     word("class"),
		Primary:   Ordinal{Hi: word("primary hi"), Lo: word("primary lo")},
		Secondary: Ordinal{Hi: word("secondary hi"), Lo: word("secondary lo")},
	}
}

func TestKeyCompareAndDigest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := Rank{Key: genKey(t, "a"), Arrival: rapid.Uint64Range(0, 2).Draw(t, "a seq")}
		b := a
		if !rapid.Bool().Draw(t, "same key") {
			b.Key = genKey(t, "b")
		}
		b.Arrival = rapid.Uint64Range(0, 2).Draw(t, "b seq")
		c := a.Key.Compare(b.Key)
		if a.Key.less(b.Key) != (c < 0) || b.Key.less(a.Key) != (c > 0) || (a.Key == b.Key) != (c == 0) {
			t.Fatalf("Compare = %d disagrees with Less or ==", c)
		}
		if a.Less(b) && a.Digest() > b.Digest() {
			t.Fatalf("digest not monotone: %+v < %+v but %x > %x", a, b, a.Digest(), b.Digest())
		}
	})
}
