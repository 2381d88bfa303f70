package capacity_test

import (
	"errors"
	"math"
	"math/big"
	"testing"

	"github.com/sluicegate/sluice/capacity"
	"pgregory.net/rapid"
)

func TestZeroLimitIsUnbounded(t *testing.T) {
	var zero capacity.Limit
	if zero != capacity.Unbounded() {
		t.Fatalf("zero Limit = %#v, want Unbounded() = %#v", zero, capacity.Unbounded())
	}
	if zero.IsBounded() {
		t.Fatal("zero Limit reports bounded")
	}
	if n, bounded := zero.Value(); n != 0 || bounded {
		t.Fatalf("zero Limit Value() = %d, %t; want 0, false", n, bounded)
	}
	if got := zero.String(); got != "unbounded" {
		t.Fatalf("zero Limit String() = %q, want %q", got, "unbounded")
	}
}

func TestBoundedZeroIsNotUnbounded(t *testing.T) {
	zero := capacity.Bounded(0)
	if zero == capacity.Unbounded() {
		t.Fatal("Bounded(0) equals Unbounded(): the two must be impossible to confuse")
	}
	if n, bounded := zero.Value(); n != 0 || !bounded {
		t.Fatalf("Bounded(0).Value() = %d, %t; want 0, true", n, bounded)
	}
	if !zero.Allows(0) || zero.Allows(1) {
		t.Fatalf("Bounded(0) Allows(0)=%t Allows(1)=%t; want true, false", zero.Allows(0), zero.Allows(1))
	}
}

func TestLimitAllows(t *testing.T) {
	tests := []struct {
		limit capacity.Limit
		used  int64
		want  bool
	}{
		{capacity.Unbounded(), 0, true},
		{capacity.Unbounded(), 1 << 62, true},
		{capacity.Bounded(100), 99, true},
		{capacity.Bounded(100), 100, true},
		{capacity.Bounded(100), 101, false},
		{capacity.Bounded(-1), 0, false},
		{capacity.Bounded(-1), -1, true},
	}
	for _, tt := range tests {
		if got := tt.limit.Allows(tt.used); got != tt.want {
			t.Errorf("%v.Allows(%d) = %t, want %t", tt.limit, tt.used, got, tt.want)
		}
	}
}

func TestLimitFits(t *testing.T) {
	const max = math.MaxInt64
	tests := []struct {
		limit     capacity.Limit
		used, add int64
		want      bool
	}{
		{capacity.Unbounded(), max, max, true},
		{capacity.Bounded(100), 99, 1, true},
		{capacity.Bounded(100), 100, 0, true},
		{capacity.Bounded(100), 100, 1, false},
		{capacity.Bounded(100), 0, 101, false},
		{capacity.Bounded(100), 101, 0, false}, // lowered below what is already there
		{capacity.Bounded(0), 0, 0, true},
		{capacity.Bounded(0), 0, 1, false},
		{capacity.Bounded(-1), 0, 0, false},
		// used+add wraps to a negative number that Allows would pass.
		{capacity.Bounded(100), 1, max, false},
		{capacity.Bounded(max), max, 1, false},
		{capacity.Bounded(max), 1, max - 1, true},
	}
	for _, tt := range tests {
		if got := tt.limit.Fits(tt.used, tt.add); got != tt.want {
			t.Errorf("%v.Fits(%d, %d) = %t, want %t", tt.limit, tt.used, tt.add, got, tt.want)
		}
	}
}

// Fits agrees with exact arithmetic for every non-negative used and add.
func TestLimitFitsIsExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Int64().Draw(t, "bound")
		used := rapid.Int64Range(0, math.MaxInt64).Draw(t, "used")
		add := rapid.Int64Range(0, math.MaxInt64).Draw(t, "add")
		sum := new(big.Int).Add(big.NewInt(used), big.NewInt(add))
		want := sum.Cmp(big.NewInt(n)) <= 0
		if got := capacity.Bounded(n).Fits(used, add); got != want {
			t.Fatalf("Bounded(%d).Fits(%d, %d) = %t, want %t", n, used, add, got, want)
		}
	})
}

func TestLimitValueKeepsNumber(t *testing.T) {
	for _, n := range []int64{-7, 0, 1, 100, 1<<63 - 1} {
		got, bounded := capacity.Bounded(n).Value()
		if got != n || !bounded {
			t.Errorf("Bounded(%d).Value() = %d, %t", n, got, bounded)
		}
	}
}

func TestSnapshotString(t *testing.T) {
	s := capacity.Snapshot{
		Priority:        5,
		QueuedRequests:  81,
		QueuedBytes:     4096,
		RequestCapacity: capacity.Bounded(100),
	}
	const want = "band 5: 81/100 requests, 4096/unbounded bytes"
	if got := (capacity.Snapshot{Priority: 1, QueuedRequests: 2, QueuedCost: 900, CostCapacity: capacity.Bounded(1000)}).String(); got != "band 1: 2/unbounded requests, 0/unbounded bytes, 900/1000 cost" {
		t.Errorf("with a cost: String() = %q", got)
	}
	if got := s.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestZeroSnapshotAdvertisesNothing(t *testing.T) {
	var s capacity.Snapshot
	if s.RequestCapacity.IsBounded() || s.ByteCapacity.IsBounded() {
		t.Fatalf("zero Snapshot has a bounded capacity: %v", s)
	}
}

func TestReaderFunc(t *testing.T) {
	errDown := errors.New("registry down")
	var r capacity.Reader = capacity.ReaderFunc(func(priority int) (capacity.Snapshot, error) {
		if priority < 0 {
			return capacity.Snapshot{}, errDown
		}
		return capacity.Snapshot{Priority: priority, QueuedRequests: int64(priority) * 2}, nil
	})
	s, err := r.CapacitySnapshot(3)
	if err != nil || s.Priority != 3 || s.QueuedRequests != 6 {
		t.Fatalf("CapacitySnapshot(3) = %v, %v", s, err)
	}
	if _, err := r.CapacitySnapshot(-1); !errors.Is(err, errDown) {
		t.Fatalf("CapacitySnapshot(-1) error = %v, want %v", err, errDown)
	}
}
