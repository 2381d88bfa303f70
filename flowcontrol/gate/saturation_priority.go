package gate

import (
	"math"
	"slices"
	"sync"
)

// priorityRoom is how many requests of a band and above the gate may have
// in flight under PriorityScheduling: SlotsPerEndpoint for each endpoint
// with fresh metrics, this replica's share of them (replica i of N takes
// ⌊(room + i) ÷ N⌋, so the shares sum to the room), saturating at
// math.MaxInt64.
func (g *SaturationGate) priorityRoom() int64 {
	per := int64(g.slots)
	n := g.fresh.Load()
	if n == 0 {
		return 0
	}
	if per > (math.MaxInt64-int64(g.replicas))/n {
		return math.MaxInt64
	}
	return (n*per + int64(g.replica)) / int64(g.replicas)
}

// bandsInFlight counts a SaturationGate's requests in flight by band, for
// PriorityScheduling. Its methods are safe for concurrent use.
type bandsInFlight struct {
	mu sync.Mutex
	// counts holds the bands with requests in flight, by priority
	// ascending; a band leaves it when its count reaches 0, so it holds
	// no more entries than requests in flight.
	counts []bandCount
}

type bandCount struct {
	priority int
	n        int64
}

func byPriority(c bandCount, p int) int {
	switch {
	case c.priority < p:
		return -1
	case c.priority > p:
		return 1
	}
	return 0
}

// add adds d to band p's count. A count never falls below 0: a caller
// that hands back more than it took (against the Gate contract) cannot
// make the room grow.
func (b *bandsInFlight) add(p int, d int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i, found := slices.BinarySearchFunc(b.counts, p, byPriority)
	switch {
	case found:
		b.counts[i].n += d
		if b.counts[i].n <= 0 {
			b.counts = slices.Delete(b.counts, i, i+1)
		}
	case d > 0:
		b.counts = slices.Insert(b.counts, i, bandCount{priority: p, n: d})
	}
}

// jump counts a start of band p and reports true when a lower band has
// requests in flight and fewer than room of band p and above are; it
// counts nothing and reports false otherwise.
func (b *bandsInFlight) jump(p int, room int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i, found := slices.BinarySearchFunc(b.counts, p, byPriority)
	if i == 0 {
		return false // nothing below p in flight
	}
	var above int64
	for _, c := range b.counts[i:] {
		above += c.n
	}
	if above >= room {
		return false
	}
	if found {
		b.counts[i].n++
	} else {
		b.counts = slices.Insert(b.counts, i, bandCount{priority: p, n: 1})
	}
	return true
}
