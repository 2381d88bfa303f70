package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is a [Store] held in process memory: replicas in one process
// (tests, the simulator) share one Memory. Leases are timed on the clock
// it is given.
type Memory struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[string]memoryEntry
}

type memoryEntry struct {
	state   Replica
	expires time.Time
}

// NewMemory returns an empty store whose leases are timed by now; nil
// means time.Now.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, entries: make(map[string]memoryEntry)}
}

// Publish stores r until lease has passed. It refuses a state
// [Replica.Check] refuses and a lease that is not positive.
func (m *Memory) Publish(ctx context.Context, r Replica, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.Check(); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("fleet: lease %v, want a positive duration", lease)
	}
	r.Bands = slices.Clone(r.Bands)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[r.ID]; !ok && len(m.entries) >= MaxReplicas {
		m.expire()
		if len(m.entries) >= MaxReplicas {
			return fmt.Errorf("fleet: store holds %d replicas, the most it keeps", MaxReplicas)
		}
	}
	m.entries[r.ID] = memoryEntry{state: r, expires: addSaturating(m.now(), lease)}
	return nil
}

// Read returns every replica whose lease has not run out, sorted by ID.
func (m *Memory) Read(ctx context.Context) ([]Replica, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire()
	out := make([]Replica, 0, len(m.entries))
	for _, e := range m.entries {
		r := e.state
		r.Bands = slices.Clone(r.Bands)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Replica) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Forget drops every entry, as a store that restarts empty would.
func (m *Memory) Forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.entries)
}

// expire drops the entries whose lease has run out; m.mu is held.
func (m *Memory) expire() {
	now := m.now()
	for id, e := range m.entries {
		if !now.Before(e.expires) {
			delete(m.entries, id)
		}
	}
}

// addSaturating returns t + d, or the latest representable time where the
// sum would overflow.
func addSaturating(t time.Time, d time.Duration) time.Time {
	s := t.Add(d)
	if d > 0 && s.Before(t) {
		return time.Unix(1<<62, 0)
	}
	return s
}
