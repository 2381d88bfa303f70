package flowcontrol

import (
	"fmt"
	"maps"

	"github.com/sluicegate/sluice/internal/dheap"
	"github.com/sluicegate/sluice/ordering"
)

// Built-in fairness policy type names, as accepted by [FairnessByName]. The
// first two are llm-d-router's.
const (
	GlobalStrictFairnessName      = "global-strict-fairness-policy"
	RoundRobinFairnessName        = "round-robin-fairness-policy"
	DeficitRoundRobinFairnessName = "deficit-round-robin-fairness-policy"
)

// A Fairness policy decides, inside one band, which flow's head starts next
// when the gate grants the band a slot. A band keeps one queue per flow ([FlowKey.ID]) that has
// waiters, each in the band's ordering policy; strict priority across
// bands is unchanged. Configure one per band with [BandConfig.Fairness];
// name one from a file with [FairnessByName].
//
// Policies are values: NewScheduler is called once per band, and the
// scheduler it returns holds that band's state.
type Fairness interface {
	// TypeName names the policy, e.g. "round-robin-fairness-policy".
	TypeName() string
	// NewScheduler returns the scheduler of one band, with no flows.
	NewScheduler() Scheduler
}

// A Scheduler is the state of a [Fairness] policy in one band. The
// controller calls it with its lock held, in the middle of changing the
// band, so its methods must be fast, must not block, must not call back
// into the controller and must not panic: unlike a Gate's, a Scheduler's
// panic leaves the band inconsistent.
//
// The flows it is told of are the band's flows with waiters. A *Flow is
// reused for another flow after Remove, so a scheduler that keeps per-flow
// state outside the Flow must drop it in Remove.
type Scheduler interface {
	// Add tells of a flow that has waiters again (it had none).
	Add(f *Flow)
	// Remove tells of a flow that has no waiters left.
	Remove(f *Flow)
	// HeadChanged tells that f's head changed other than by a dispatch: a
	// new request sorted before it, or it left by expiry, cancellation or
	// displacement. f still has waiters.
	HeadChanged(f *Flow)
	// Next returns the flow whose head starts next. It is called once the
	// gate has granted the band a slot, so only while at least one flow has
	// waiters, and it must return one of them: a band with waiters never
	// leaves a slot unused (the policy is work-conserving). Served follows
	// at once, for the flow it returned.
	Next() *Flow
	// Served tells that f's head, of cost cost, left for dispatch. f may be
	// empty now, in which case Remove follows.
	Served(f *Flow, cost int64)
}

// FairnessByName returns the built-in fairness policy of the given type
// name: [GlobalStrict], [RoundRobin], or [DeficitRoundRobin] with every
// weight 1 and an adaptive quantum. An unknown name is an error listing the
// known ones.
func FairnessByName(name string) (Fairness, error) {
	switch name {
	case GlobalStrictFairnessName:
		return GlobalStrict(), nil
	case RoundRobinFairnessName:
		return RoundRobin(), nil
	case DeficitRoundRobinFairnessName:
		return DeficitRoundRobin(DRRConfig{}), nil
	}
	return nil, fmt.Errorf("flowcontrol: unknown fairness policy %q (known: %s, %s, %s)",
		name, GlobalStrictFairnessName, RoundRobinFairnessName, DeficitRoundRobinFairnessName)
}

// Flow is one flow with waiters in one band, as a [Scheduler] sees it. Its
// methods read the controller's state and may be called only from a
// Scheduler's methods.
type Flow struct {
	// The flow's waiters in arrival order, linked through waiter.older
	// and newer: newest is the first to be displaced. In a band whose
	// queue kind is FIFO this list is also the flow's queue, oldest its
	// head; the fields a dispatch reads come first, in one cache line.
	oldest, newest *waiter
	n              int   // waiters
	bytes          int64 // their summed byte size
	cost           int64 // their summed cost
	// queue orders the waiters in a band of another queue kind (a heap);
	// nil in a FIFO band.
	queue ordering.Queue
	ring  *Flow // round robin: the next flow in the ring

	id   string
	band *band

	// State of the built-in schedulers.
	ringPrev   *Flow
	deficit    int64 // deficit round robin
	credited   bool  // deficit round robin: this visit's quantum is added
	heapHandle dheap.Handle[headKey, *Flow]
}

// ID returns the flow's ID.
func (f *Flow) ID() string { return f.id }

// Len returns the number of the flow's waiters in the band.
func (f *Flow) Len() int { return f.n }

// HeadCost returns the cost of the flow's head, the request it would offer.
func (f *Flow) HeadCost() int64 { return f.head().cost }

func (f *Flow) head() *waiter {
	if f.queue == nil {
		return f.oldest
	}
	return f.queue.Peek().Value.(*waiter)
}

// headKey is the flow's head in the band's single-queue order.
type headKey struct {
	key ordering.Key
	seq uint64 // arrival in the band
}

func (f *Flow) headKey() headKey {
	if f.queue == nil {
		// A FIFO band's single queue is in arrival order, whatever the
		// keys say (enqueue times read before the lock may disagree).
		return headKey{seq: f.oldest.seq}
	}
	w := f.head()
	return headKey{key: w.key, seq: w.seq}
}

func lessHead(a, b headKey) bool {
	if c := a.key.Compare(b.key); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// GlobalStrict returns the global-strict-fairness-policy: the next request
// is the best head across all flows by the band's ordering policy, ties by
// arrival — exactly the order of one queue for the whole band, whatever the
// flows. It is the default. Next is O(1); a change of a flow's head costs
// O(log flows).
func GlobalStrict() Fairness { return globalStrict{} }

type globalStrict struct{}

func (globalStrict) TypeName() string { return GlobalStrictFairnessName }

func (globalStrict) NewScheduler() Scheduler {
	return &strictScheduler{heap: dheap.New[headKey, *Flow](lessHead)}
}

type strictScheduler struct {
	heap *dheap.Heap[headKey, *Flow]
}

func (s *strictScheduler) Add(f *Flow)    { f.heapHandle = s.heap.Push(f.headKey(), f) }
func (s *strictScheduler) Remove(f *Flow) { s.heap.Remove(f.heapHandle) }

func (s *strictScheduler) HeadChanged(f *Flow) { s.heap.Fix(f.heapHandle, f.headKey()) }

func (s *strictScheduler) Next() *Flow {
	_, f, _ := s.heap.Peek()
	return f
}

func (s *strictScheduler) Served(f *Flow, _ int64) {
	if f.Len() > 0 {
		s.heap.Fix(f.heapHandle, f.headKey())
	}
}

// ring is a circular list of flows with a current position, shared by the
// round-robin schedulers: O(1) to add, remove and advance.
type ring struct {
	cur *Flow
	n   int // flows in the ring
}

// add puts f just before the current flow: last in the current round.
func (r *ring) add(f *Flow) {
	r.n++
	if r.cur == nil {
		f.ring, f.ringPrev, r.cur = f, f, f
		return
	}
	prev := r.cur.ringPrev
	f.ring, f.ringPrev = r.cur, prev
	prev.ring, r.cur.ringPrev = f, f
}

func (r *ring) remove(f *Flow) {
	r.n--
	if f.ring == f {
		r.cur = nil
	} else {
		f.ringPrev.ring, f.ring.ringPrev = f.ring, f.ringPrev
		if r.cur == f {
			r.cur = f.ring
		}
	}
	f.ring, f.ringPrev = nil, nil
}

// RoundRobin returns the round-robin-fairness-policy: flows with waiters
// take turns, one request each, whatever its cost; within a flow, the
// band's ordering policy picks. In every stretch of dispatches from a band,
// two flows that had waiters throughout were served a number of requests
// differing by at most one. O(1) per dispatch.
func RoundRobin() Fairness { return roundRobin{} }

type roundRobin struct{}

func (roundRobin) TypeName() string        { return RoundRobinFairnessName }
func (roundRobin) NewScheduler() Scheduler { return &rrScheduler{} }

type rrScheduler struct{ ring ring }

func (s *rrScheduler) Add(f *Flow)       { s.ring.add(f) }
func (s *rrScheduler) Remove(f *Flow)    { s.ring.remove(f) }
func (s *rrScheduler) HeadChanged(*Flow) {}
func (s *rrScheduler) Next() *Flow       { return s.ring.cur }

func (s *rrScheduler) Served(f *Flow, _ int64) {
	if s.ring.cur == f {
		s.ring.cur = f.ring
	}
}

// DRRConfig configures [DeficitRoundRobin].
type DRRConfig struct {
	// Weights gives flows, by ID, a share of the band's service in
	// proportion to their weight. A flow it does not list, and a weight of
	// 0 or less, weighs 1.
	Weights map[string]int64
	// Quantum is the cost a flow of weight 1 may be served per round. 0
	// means adaptive: the largest head cost the band has seen, so that
	// every visit can serve at least the head and a dispatch stays O(1).
	// An adaptive quantum only grows: after one outlier (a request of a
	// million tokens), every turn serves up to that much of one flow before
	// the next flow's turn, which is fair by the bound but coarse. Where
	// costs are skewed, set Quantum to about the cost of a typical request;
	// a quantum smaller than the costs costs no more than a skip of the
	// rounds in which nothing would fit.
	Quantum int64
}

// DeficitRoundRobin returns the deficit-round-robin-fairness-policy
// (Shreedhar and Varghese, 1995): weighted, cost-aware fairness in O(1) per
// dispatch. Flows with waiters take turns; each turn adds quantum × weight
// to the flow's deficit and serves its heads while their cost fits the
// deficit. A flow that runs out of waiters loses its deficit.
//
// The bound: between any two flows i and j with waiters throughout a
// stretch of dispatches from the band, the cost served divided by weight
// differs by at most Q + c/w_i + c/w_j, where Q is the quantum and c the
// largest request cost — at most Q + 2c. With the adaptive quantum, Q is
// the largest cost seen so far, and the bound holds from when that cost was
// first seen.
//
// It was chosen over virtual-time fair queuing (WFQ, as in Kubernetes API
// Priority and Fairness) because it needs no sorted structure over flows
// (O(1) rather than O(log flows) per dispatch), no floating-point virtual
// clock, and no knowledge of a request's service time: a request's cost is
// an estimate known at enqueue, which is what DRR charges.
func DeficitRoundRobin(cfg DRRConfig) Fairness {
	return drr{weights: maps.Clone(cfg.Weights), quantum: cfg.Quantum}
}

type drr struct {
	weights map[string]int64
	quantum int64
}

func (drr) TypeName() string { return DeficitRoundRobinFairnessName }

func (p drr) NewScheduler() Scheduler {
	return &drrScheduler{weights: p.weights, quantum: p.quantum, adaptive: p.quantum <= 0}
}

type drrScheduler struct {
	ring     ring
	weights  map[string]int64
	quantum  int64
	adaptive bool
}

func (s *drrScheduler) weight(f *Flow) int64 {
	if w := s.weights[f.id]; w > 0 {
		return w
	}
	return 1
}

func (s *drrScheduler) Add(f *Flow) {
	f.deficit, f.credited = 0, false
	s.ring.add(f)
	s.grow(f.HeadCost())
}

func (s *drrScheduler) Remove(f *Flow) {
	s.ring.remove(f)
	f.deficit, f.credited = 0, false
}

func (s *drrScheduler) HeadChanged(f *Flow) { s.grow(f.HeadCost()) }

// grow raises an adaptive quantum to cost.
func (s *drrScheduler) grow(cost int64) {
	if s.adaptive && cost > s.quantum {
		s.quantum = cost
	}
}

// share is the deficit a turn adds to f.
func (s *drrScheduler) share(f *Flow) int64 { return saturatingMul(s.quantum, s.weight(f)) }

func (s *drrScheduler) Next() *Flow {
	for misses := 0; ; {
		f := s.ring.cur
		if !f.credited {
			f.deficit = saturatingAdd(f.deficit, s.share(f))
			f.credited = true
		}
		if f.HeadCost() <= f.deficit {
			return f
		}
		// The head does not fit this turn: the flow keeps its deficit
		// for the next round.
		f.credited = false
		s.ring.cur = f.ring
		if misses++; misses == s.ring.n {
			s.skipRounds()
			misses = 0
		}
	}
}

// skipRounds credits at once the rounds in which no head would fit, so
// that a fixed quantum much smaller than the costs does not make Next loop
// round after round. It is called after a whole round without a fit, with
// every flow's turn over.
func (s *drrScheduler) skipRounds() {
	rounds := int64(maxInt64)
	f := s.ring.cur
	for range s.ring.n {
		share := s.share(f)
		// Turns until the head fits, the next one included.
		turns := (f.HeadCost() - f.deficit + share - 1) / share
		rounds = min(rounds, turns-1)
		f = f.ring
	}
	for range s.ring.n {
		f.deficit = saturatingAdd(f.deficit, saturatingMul(rounds, s.share(f)))
		f = f.ring
	}
}

func (s *drrScheduler) Served(f *Flow, cost int64) {
	f.deficit -= cost
	if f.Len() > 0 {
		head := f.HeadCost()
		s.grow(head)
		if head <= f.deficit {
			return // the turn goes on
		}
	}
	if s.ring.cur == f {
		f.credited = false
		s.ring.cur = f.ring
	}
}

// saturatingMul returns a×b for a, b ≥ 0, capped at the largest int64.
func saturatingMul(a, b int64) int64 {
	if a != 0 && b > maxInt64/a {
		return maxInt64
	}
	return a * b
}

// saturatingAdd returns a+b for b ≥ 0, capped at the largest int64.
func saturatingAdd(a, b int64) int64 {
	if a > maxInt64-b {
		return maxInt64
	}
	return a + b
}

const maxInt64 = 1<<63 - 1
