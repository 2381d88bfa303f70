package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		values []float64
		want   Spread
	}{
		{nil, Spread{}},
		{[]float64{3}, Spread{3, 3, 3}},
		{[]float64{4, 1}, Spread{1, 2.5, 4}},
		{[]float64{5, 1, 3}, Spread{1, 3, 5}},
		{[]float64{9, 2, 4, 1}, Spread{1, 3, 9}},
	} {
		in := slices.Clone(tc.values)
		if got := SpreadOf(tc.values); got != tc.want {
			t.Errorf("SpreadOf(%v) = %+v, want %+v", in, got, tc.want)
		}
		if !slices.Equal(in, tc.values) {
			t.Errorf("SpreadOf reordered its argument: %v, was %v", tc.values, in)
		}
	}
}

func TestSeedRange(t *testing.T) {
	if got := SeedRange(3, 6); !slices.Equal(got, []uint64{3, 4, 5, 6}) {
		t.Errorf("SeedRange(3, 6) = %v", got)
	}
	if got := SeedRange(5, 5); !slices.Equal(got, []uint64{5}) {
		t.Errorf("SeedRange(5, 5) = %v", got)
	}
	if got := SeedRange(6, 5); got != nil {
		t.Errorf("SeedRange(6, 5) = %v, want none", got)
	}
	if got := SeedRange(math.MaxUint64-1, math.MaxUint64); !slices.Equal(got, []uint64{math.MaxUint64 - 1, math.MaxUint64}) {
		t.Errorf("SeedRange up to the largest seed = %v", got)
	}
}

func TestOverSeedsKeepsOrderAndFirstError(t *testing.T) {
	seeds := SeedRange(1, 50)
	got, err := OverSeeds(seeds, func(s uint64) (uint64, error) { return s * s, nil })
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seeds {
		if got[i] != s*s {
			t.Fatalf("result %d = %d, want %d", i, got[i], s*s)
		}
	}
	errOf := func(s uint64) error { return fmt.Errorf("seed %d failed", s) }
	_, err = OverSeeds(seeds, func(s uint64) (int, error) {
		if s == 17 || s == 43 {
			return 0, errOf(s)
		}
		return 0, nil
	})
	if err == nil || err.Error() != errOf(17).Error() {
		t.Errorf("error %v, want seed 17's, the first in seed order", err)
	}
	if _, err := OverSeeds(nil, func(uint64) (int, error) { return 0, errors.New("called") }); err != nil {
		t.Errorf("no seeds: %v", err)
	}
}
