package headroom_test

import (
	"math"
	"math/big"
	"testing"

	"github.com/sluicegate/sluice/headroom"
	"golang.org/x/exp/constraints"
	"pgregory.net/rapid"
)

func TestRequestsExamples(t *testing.T) {
	tests := []struct{ capacity, length, want int64 }{
		{100, 81, 19},
		{100, 0, 100},
		{100, 100, 0},
		{100, 130, 0},
		{0, 0, 0},
		{0, 5, 0},
		{-5, 0, 0},
		{-5, -10, 0},
		{100, -1, 100},
		{math.MaxInt64, math.MinInt64, math.MaxInt64},
		{math.MaxInt64, 1, math.MaxInt64 - 1},
		{math.MinInt64, math.MaxInt64, 0},
		{math.MinInt64, math.MinInt64, 0},
	}
	for _, tt := range tests {
		if got := headroom.Requests(tt.capacity, tt.length); got != tt.want {
			t.Errorf("Requests(%d, %d) = %d, want %d", tt.capacity, tt.length, got, tt.want)
		}
	}
	if got := headroom.Requests[int8](127, -128); got != 127 {
		t.Errorf("Requests[int8](127, -128) = %d, want 127", got)
	}
	if got := headroom.Requests[uint8](255, 0); got != 255 {
		t.Errorf("Requests[uint8](255, 0) = %d, want 255", got)
	}
	if got := headroom.Requests[uint64](3, math.MaxUint64); got != 0 {
		t.Errorf("Requests[uint64](3, MaxUint64) = %d, want 0", got)
	}
}

// TestRequestsProperties checks, for every integer type, that Requests
// agrees with the clamp computed in unbounded (big.Int) arithmetic, and states
// the properties one by one so a failure names the one that broke: the result
// lies in [0, max(capacity, 0)], equals capacity − length when
// 0 ≤ length ≤ capacity, never falls as capacity grows and never rises as
// length grows.
func TestRequestsProperties(t *testing.T) {
	t.Run("int", func(t *testing.T) { checkRequests(t, rapid.Int()) })
	t.Run("int8", func(t *testing.T) { checkRequests(t, rapid.Int8()) })
	t.Run("int16", func(t *testing.T) { checkRequests(t, rapid.Int16()) })
	t.Run("int32", func(t *testing.T) { checkRequests(t, rapid.Int32()) })
	t.Run("int64", func(t *testing.T) { checkRequests(t, rapid.Int64()) })
	t.Run("uint", func(t *testing.T) { checkRequests(t, rapid.Uint()) })
	t.Run("uint8", func(t *testing.T) { checkRequests(t, rapid.Uint8()) })
	t.Run("uint16", func(t *testing.T) { checkRequests(t, rapid.Uint16()) })
	t.Run("uint32", func(t *testing.T) { checkRequests(t, rapid.Uint32()) })
	t.Run("uint64", func(t *testing.T) { checkRequests(t, rapid.Uint64()) })
	t.Run("uintptr", func(t *testing.T) { checkRequests(t, rapid.Uintptr()) })
}

func checkRequests[T constraints.Integer](t *testing.T, draws *rapid.Generator[T]) {
	lo, hi := bounds[T]()
	// Every extreme and its neighbours, mixed with rapid's own draws.
	edges := []T{lo, lo + 1, lo / 2, hi / 2, hi - 1, hi, 0, 1}
	if lo < 0 {
		edges = append(edges, ^T(0)) // -1
	}
	values := rapid.OneOf(rapid.SampledFrom(edges), draws)

	rapid.Check(t, func(t *rapid.T) {
		c := values.Draw(t, "capacity")
		l := values.Draw(t, "length")
		got := headroom.Requests(c, l)

		if got < 0 || got > max(c, 0) {
			t.Fatalf("Requests(%d, %d) = %d, outside [0, max(capacity, 0)]", c, l, got)
		}
		if 0 <= l && l <= c && got != c-l {
			t.Fatalf("Requests(%d, %d) = %d, want capacity - length = %d", c, l, got, c-l)
		}
		if want := clampBig(c, l); toBig(got).Cmp(want) != 0 {
			t.Fatalf("Requests(%d, %d) = %d, want %s", c, l, got, want)
		}

		c2 := values.Draw(t, "other capacity")
		smallC, bigC := min(c, c2), max(c, c2)
		if a, b := headroom.Requests(smallC, l), headroom.Requests(bigC, l); a > b {
			t.Fatalf("more capacity, less headroom: Requests(%d, %d) = %d > Requests(%d, %d) = %d",
				smallC, l, a, bigC, l, b)
		}
		l2 := values.Draw(t, "other length")
		shortL, longL := min(l, l2), max(l, l2)
		if a, b := headroom.Requests(c, shortL), headroom.Requests(c, longL); a < b {
			t.Fatalf("more length, more headroom: Requests(%d, %d) = %d < Requests(%d, %d) = %d",
				c, shortL, a, c, longL, b)
		}
	})
}

// bounds returns the least and greatest values of T.
func bounds[T constraints.Integer]() (lo, hi T) {
	bits := 0
	for x := T(1); x != 0; x <<= 1 {
		bits++
	}
	if ^T(0) > 0 { // unsigned
		return 0, ^T(0)
	}
	hi = T(1)<<(bits-1) - 1
	return -hi - 1, hi
}

func toBig[T constraints.Integer](v T) *big.Int {
	if v < 0 {
		return big.NewInt(int64(v))
	}
	return new(big.Int).SetUint64(uint64(v))
}

// clampBig is the reference: capacity − length in unbounded arithmetic,
// clamped to [0, max(capacity, 0)].
func clampBig[T constraints.Integer](c, l T) *big.Int {
	d := new(big.Int).Sub(toBig(c), toBig(l))
	upper := toBig(max(c, 0))
	if d.Sign() < 0 {
		return big.NewInt(0)
	}
	if d.Cmp(upper) > 0 {
		return upper
	}
	return d
}

func TestBoundsHelper(t *testing.T) {
	if lo, hi := bounds[int8](); lo != math.MinInt8 || hi != math.MaxInt8 {
		t.Fatalf("bounds[int8] = %d, %d", lo, hi)
	}
	if lo, hi := bounds[int64](); lo != math.MinInt64 || hi != math.MaxInt64 {
		t.Fatalf("bounds[int64] = %d, %d", lo, hi)
	}
	if lo, hi := bounds[uint16](); lo != 0 || hi != math.MaxUint16 {
		t.Fatalf("bounds[uint16] = %d, %d", lo, hi)
	}
}
