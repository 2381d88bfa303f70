package flowcontrol

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
		s.ring.cur = f.sched.next
	}
}

// ring is a circular list of flows with a current position, linked through
// schedState.next and prev; deficit round robin (drr.go) turns the same
// ring. O(1) to add, remove and advance.
type ring struct {
	cur *Flow
	n   int // flows in the ring
}

// add puts f just before the current flow: last in the current round.
func (r *ring) add(f *Flow) {
	r.n++
	if r.cur == nil {
		f.sched.next, f.sched.prev, r.cur = f, f, f
		return
	}
	prev := r.cur.sched.prev
	f.sched.next, f.sched.prev = r.cur, prev
	prev.sched.next, r.cur.sched.prev = f, f
}

func (r *ring) remove(f *Flow) {
	r.n--
	if f.sched.next == f {
		r.cur = nil
	} else {
		f.sched.prev.sched.next, f.sched.next.sched.prev = f.sched.next, f.sched.prev
		if r.cur == f {
			r.cur = f.sched.next
		}
	}
	f.sched.next, f.sched.prev = nil, nil
}
