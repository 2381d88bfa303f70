package capacity

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
)

// Bands is an in-memory [Reader] that holds one [Snapshot] per priority.
// Tests, examples and routers that keep their own counters can set snapshots
// as their bands change and hand the Bands to a response layer.
//
// The zero Bands is empty and ready to use, and a nil *Bands reads as empty,
// so a Reader holding one never panics. A Bands is safe for concurrent use
// and must not be copied after first use.
//
// Reads are built to be cheap and writes to be rare: a read is one atomic
// load and one map lookup and takes no lock; reading a band that exists
// allocates nothing (only the error for a missing band is allocated). A write
// copies the map (O(bands)) under a mutex that only writers take.
type Bands struct {
	mu    sync.Mutex                       // serializes writers
	bands atomic.Pointer[map[int]Snapshot] // never modified once stored
}

// write replaces the band map with a copy changed by f, under the writers'
// lock. f reports whether it changed anything; if not, nothing is stored.
func (b *Bands) write(f func(m map[int]Snapshot) bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := make(map[int]Snapshot)
	if old := b.bands.Load(); old != nil {
		maps.Copy(m, *old)
	}
	if !f(m) {
		return false
	}
	b.bands.Store(&m)
	return true
}

// Set stores s as the snapshot of band s.Priority, adding the band if needed.
func (b *Bands) Set(s Snapshot) {
	b.write(func(m map[int]Snapshot) bool {
		m[s.Priority] = s
		return true
	})
}

// Update applies f to the snapshot of band priority and stores the result.
// It reports false, and calls nothing, if the band does not exist. f runs
// under the writers' lock: it must be quick and must not call b. Readers see
// either the snapshot before f or the one after, never a mix.
func (b *Bands) Update(priority int, f func(*Snapshot)) bool {
	return b.write(func(m map[int]Snapshot) bool {
		s, ok := m[priority]
		if !ok {
			return false
		}
		f(&s)
		s.Priority = priority
		m[priority] = s
		return true
	})
}

// Delete removes band priority. Deleting a missing band does nothing.
func (b *Bands) Delete(priority int) {
	b.write(func(m map[int]Snapshot) bool {
		_, ok := m[priority]
		delete(m, priority)
		return ok
	})
}

// CapacitySnapshot returns the stored snapshot of band priority, or an error
// wrapping [ErrBandNotFound].
func (b *Bands) CapacitySnapshot(priority int) (Snapshot, error) {
	if b != nil {
		if m := b.bands.Load(); m != nil {
			if s, ok := (*m)[priority]; ok {
				return s, nil
			}
		}
	}
	return Snapshot{}, fmt.Errorf("%w: priority %d", ErrBandNotFound, priority)
}
