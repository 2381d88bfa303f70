package capacity

import (
	"fmt"
	"sync"
)

// Bands is an in-memory [Reader] that holds one [Snapshot] per priority.
// Tests, examples and routers that keep their own counters can set snapshots
// as their bands change and hand the Bands to a response layer.
//
// The zero Bands is empty and ready to use, and a nil *Bands reads as empty,
// so a Reader holding one never panics. A Bands is safe for concurrent use
// and must not be copied after first use. Reading an existing band takes a
// read lock only and allocates nothing.
type Bands struct {
	mu    sync.RWMutex
	bands map[int]Snapshot
}

// Set stores s as the snapshot of band s.Priority, adding the band if needed.
func (b *Bands) Set(s Snapshot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bands == nil {
		b.bands = make(map[int]Snapshot)
	}
	b.bands[s.Priority] = s
}

// Update applies f to the snapshot of band priority and stores the result.
// It reports false, and calls nothing, if the band does not exist. f runs
// under the write lock: it must be quick and must not call b.
func (b *Bands) Update(priority int, f func(*Snapshot)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.bands[priority]
	if !ok {
		return false
	}
	f(&s)
	s.Priority = priority
	b.bands[priority] = s
	return true
}

// Delete removes band priority. Deleting a missing band does nothing.
func (b *Bands) Delete(priority int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.bands, priority)
}

// CapacitySnapshot returns the stored snapshot of band priority, or an error
// wrapping [ErrBandNotFound].
func (b *Bands) CapacitySnapshot(priority int) (Snapshot, error) {
	if b == nil {
		return Snapshot{}, fmt.Errorf("%w: priority %d", ErrBandNotFound, priority)
	}
	b.mu.RLock()
	s, ok := b.bands[priority]
	b.mu.RUnlock()
	if !ok {
		return Snapshot{}, fmt.Errorf("%w: priority %d", ErrBandNotFound, priority)
	}
	return s, nil
}
