package capacity_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sluicegate/sluice/capacity"
)

// Bands must satisfy Reader through a pointer.
var _ capacity.Reader = (*capacity.Bands)(nil)

func TestBandsMissingBand(t *testing.T) {
	var b capacity.Bands
	b.Set(capacity.Snapshot{Priority: 1})
	_, err := b.CapacitySnapshot(42)
	if !errors.Is(err, capacity.ErrBandNotFound) {
		t.Fatalf("CapacitySnapshot(42) error = %v, want one wrapping ErrBandNotFound", err)
	}
	if !strings.Contains(err.Error(), "42") {
		t.Fatalf("error %q does not name the priority", err)
	}
}

func TestZeroAndNilBandsReadAsEmpty(t *testing.T) {
	var zero capacity.Bands
	if _, err := zero.CapacitySnapshot(0); !errors.Is(err, capacity.ErrBandNotFound) {
		t.Fatalf("zero Bands: error = %v, want ErrBandNotFound", err)
	}
	var nilBands *capacity.Bands
	var r capacity.Reader = nilBands
	if _, err := r.CapacitySnapshot(0); !errors.Is(err, capacity.ErrBandNotFound) {
		t.Fatalf("nil *Bands: error = %v, want ErrBandNotFound", err)
	}
}

func TestBandsSetReplaces(t *testing.T) {
	var b capacity.Bands
	b.Set(capacity.Snapshot{Priority: 2, QueuedRequests: 1, RequestCapacity: capacity.Bounded(10)})
	b.Set(capacity.Snapshot{Priority: 2, QueuedRequests: 7, RequestCapacity: capacity.Bounded(20)})
	got, err := b.CapacitySnapshot(2)
	want := capacity.Snapshot{Priority: 2, QueuedRequests: 7, RequestCapacity: capacity.Bounded(20)}
	if err != nil || got != want {
		t.Fatalf("CapacitySnapshot(2) = %v, %v; want %v", got, err, want)
	}
}

func TestBandsUpdate(t *testing.T) {
	var b capacity.Bands
	b.Set(capacity.Snapshot{Priority: 0, QueuedRequests: 81, RequestCapacity: capacity.Bounded(100)})
	ok := b.Update(0, func(s *capacity.Snapshot) {
		s.QueuedRequests += 9
		s.Priority = 99 // must not move the band
	})
	if !ok {
		t.Fatal("Update of an existing band reported false")
	}
	got, err := b.CapacitySnapshot(0)
	if err != nil || got.QueuedRequests != 90 || got.Priority != 0 {
		t.Fatalf("after Update: %v, %v; want 90 queued at priority 0", got, err)
	}
	if _, err := b.CapacitySnapshot(99); !errors.Is(err, capacity.ErrBandNotFound) {
		t.Fatalf("Update created band 99: error = %v", err)
	}
}

func TestBandsUpdateMissingBand(t *testing.T) {
	var b capacity.Bands
	called := false
	if b.Update(3, func(*capacity.Snapshot) { called = true }) {
		t.Fatal("Update of a missing band reported true")
	}
	if called {
		t.Fatal("Update called f for a missing band")
	}
	if _, err := b.CapacitySnapshot(3); !errors.Is(err, capacity.ErrBandNotFound) {
		t.Fatalf("Update created the missing band: error = %v", err)
	}
}

func TestBandsDelete(t *testing.T) {
	var b capacity.Bands
	b.Delete(1) // deleting from an empty Bands does nothing
	b.Set(capacity.Snapshot{Priority: 1})
	b.Delete(1)
	if _, err := b.CapacitySnapshot(1); !errors.Is(err, capacity.ErrBandNotFound) {
		t.Fatalf("after Delete: error = %v, want ErrBandNotFound", err)
	}
}

func TestBandsSnapshotIsACopy(t *testing.T) {
	var b capacity.Bands
	b.Set(capacity.Snapshot{Priority: 0, QueuedRequests: 1})
	s, _ := b.CapacitySnapshot(0)
	s.QueuedRequests = 1000
	again, _ := b.CapacitySnapshot(0)
	if again.QueuedRequests != 1 {
		t.Fatalf("changing a returned snapshot changed the band: %v", again)
	}
}

func TestBandsReadAllocatesNothing(t *testing.T) {
	var b capacity.Bands
	b.Set(capacity.Snapshot{Priority: 4, RequestCapacity: capacity.Bounded(8)})
	var r capacity.Reader = &b
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := r.CapacitySnapshot(4); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("CapacitySnapshot allocates %v times per read, want 0", allocs)
	}
}

// TestBandsConcurrentUse runs writers and readers together; under -race it
// fails on any unsynchronised access. Each writer moves its own band through
// a sequence whose every state has QueuedRequests == QueuedBytes, so a torn
// read would also show up as a mismatch.
func TestBandsConcurrentUse(t *testing.T) {
	var b capacity.Bands
	const bands, steps = 4, 200
	for p := range bands {
		b.Set(capacity.Snapshot{Priority: p})
	}
	var wg sync.WaitGroup
	for p := range bands {
		wg.Go(func() {
			for i := range steps {
				b.Update(p, func(s *capacity.Snapshot) {
					s.QueuedRequests = int64(i)
					s.QueuedBytes = int64(i)
				})
			}
		})
		wg.Go(func() {
			for range steps {
				s, err := b.CapacitySnapshot(p)
				if err != nil {
					t.Error(err)
					return
				}
				if s.QueuedRequests != s.QueuedBytes {
					t.Errorf("torn snapshot %v", s)
					return
				}
			}
		})
	}
	wg.Wait()
	for p := range bands {
		s, _ := b.CapacitySnapshot(p)
		if s.QueuedRequests != steps-1 {
			t.Errorf("band %d ended at %d queued, want %d", p, s.QueuedRequests, steps-1)
		}
	}
}
