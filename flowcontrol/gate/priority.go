package gate

import (
	"cmp"
	"errors"
	"fmt"
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

// bandsInFlight counts a gate's requests in flight by band: a
// SaturationGate's with PriorityScheduling, a PriorityMaxInFlight's. Its
// methods are safe for concurrent use.
type bandsInFlight struct {
	mu sync.Mutex
	// counts holds the bands with requests in flight, by priority
	// ascending; a band leaves it when its count reaches 0, so it holds
	// no more entries than requests in flight. total is their sum.
	counts []bandCount
	total  int64
}

type bandCount struct {
	priority int
	n        int64
}

func byPriority(c bandCount, p int) int { return cmp.Compare(c.priority, p) }

// add adds d to band p's count and returns what it added. A count never
// falls below 0: a caller that hands back more than it took (against the
// Gate contract) cannot make the room grow.
func (b *bandsInFlight) add(p int, d int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addLocked(p, d)
}

// addLocked adds d to band p's count, which never drops below 0, and
// returns what it added.
func (b *bandsInFlight) addLocked(p int, d int64) int64 {
	i, found := slices.BinarySearchFunc(b.counts, p, byPriority)
	switch {
	case found:
		before := b.counts[i].n
		b.counts[i].n += d
		if b.counts[i].n <= 0 {
			b.counts = slices.Delete(b.counts, i, i+1)
			d = -before
		}
	case d <= 0:
		return 0
	default:
		b.counts = slices.Insert(b.counts, i, bandCount{priority: p, n: d})
	}
	b.total += d
	return d
}

// jump counts a start of band p and reports true when a lower band has
// requests in flight and fewer than room of band p and above are; it
// counts nothing and reports false otherwise.
func (b *bandsInFlight) jump(p int, room int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.jumpLocked(p, room)
}

func (b *bandsInFlight) jumpLocked(p int, room int64) bool {
	i, _ := slices.BinarySearchFunc(b.counts, p, byPriority)
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
	b.addLocked(p, 1)
	return true
}

// admit counts a start of band p and reports true when fewer than limit
// requests of any band are in flight, or when jump would with limit as
// the room; it counts nothing and reports false otherwise.
func (b *bandsInFlight) admit(p int, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total < limit {
		b.addLocked(p, 1)
		return true
	}
	return b.jumpLocked(p, limit)
}

// inFlight returns the requests in flight, of every band.
func (b *bandsInFlight) inFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// PriorityMaxInFlight is [MaxInFlight] for model servers that serve their
// queues in the priority order the router hands them and preempt a lower
// priority for a higher one: vLLM run with --scheduling-policy priority,
// behind a router whose hand-off is on (flowhttp.PriorityHandoff;
// sluice-gateway -priority-handoff). Set n to the servers' slots added
// up, as for MaxInFlight.
//
// Behind MaxInFlight(n) no server ever has a request waiting, so its
// priority scheduling never acts: a higher band waits at the router for
// a lower band's request to end, as under strict priority. This gate
// admits any band while fewer than n requests are in flight, and also a
// request of band p while a lower band has requests in flight and fewer
// than n of band p and above are: some server then runs a lower band's
// request in a slot, and preempts it for this one, which it keeps at its
// server to resume. With n 64, chat starts while fewer than 64 chat
// requests are in flight and some batch request is; batch starts only
// while fewer than 64 requests of any band are. The router should send
// such a request to the server with the fewest requests of its band and
// above, where a lower one runs.
//
// It serves one controller ([BoundGate]); a negative n is an error when
// it is bound. It is a [SaturationDetector]: its saturation is the
// requests in flight ÷ n, at most 1. Its methods are safe for concurrent
// use; each takes a lock of the gate's own. Its String is
// "PriorityMaxInFlight(n)".
func PriorityMaxInFlight(n int) Gate {
	return &priorityMaxInFlight{limit: int64(n)}
}

type priorityMaxInFlight struct {
	limit int64
	bands bandsInFlight
	owner binding
}

// ServersPreempt reports true: see [PreemptingGate].
func (g *priorityMaxInFlight) ServersPreempt() bool { return true }

// Bind claims g for c: a negative limit, or a gate another controller has
// claimed, is an error.
func (g *priorityMaxInFlight) Bind(c Controller) error {
	if g.limit < 0 {
		return errors.New("negative limit")
	}
	if !g.owner.claim(c) {
		return errors.New("already used by another controller")
	}
	return nil
}

func (g *priorityMaxInFlight) unbind(c Controller) { g.owner.release(c) }

func (g *priorityMaxInFlight) String() string {
	return fmt.Sprintf("PriorityMaxInFlight(%d)", g.limit)
}

// TryAcquire takes a slot for band p under the rule above.
func (g *priorityMaxInFlight) TryAcquire(p int) bool { return g.bands.admit(p, g.limit) }

// Release gives band p's slot back.
func (g *priorityMaxInFlight) Release(p int) { g.bands.add(p, -1) }

// Saturation returns the requests in flight ÷ the limit, at most 1; 1 for
// a limit of 0, which admits nothing.
func (g *priorityMaxInFlight) Saturation() float64 {
	if g.limit <= 0 {
		return 1
	}
	return min(1, float64(g.bands.inFlight())/float64(g.limit))
}
