package flowcontrol

import "maps"

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
	f.sched.deficit, f.sched.credited = 0, false
	s.ring.add(f)
	s.grow(f.HeadCost())
}

func (s *drrScheduler) Remove(f *Flow) {
	s.ring.remove(f)
	f.sched.deficit, f.sched.credited = 0, false
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
		if !f.sched.credited {
			f.sched.deficit = saturatingAdd(f.sched.deficit, s.share(f))
			f.sched.credited = true
		}
		if f.HeadCost() <= f.sched.deficit {
			return f
		}
		// The head does not fit this turn: the flow keeps its deficit
		// for the next round.
		f.sched.credited = false
		s.ring.cur = f.sched.next
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
		turns := (f.HeadCost() - f.sched.deficit + share - 1) / share
		rounds = min(rounds, turns-1)
		f = f.sched.next
	}
	for range s.ring.n {
		f.sched.deficit = saturatingAdd(f.sched.deficit, saturatingMul(rounds, s.share(f)))
		f = f.sched.next
	}
}

func (s *drrScheduler) Served(f *Flow, cost int64) {
	f.sched.deficit -= cost
	if f.Len() > 0 {
		head := f.HeadCost()
		s.grow(head)
		if head <= f.sched.deficit {
			return // the turn goes on
		}
	}
	if s.ring.cur == f {
		f.sched.credited = false
		s.ring.cur = f.sched.next
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
