package modelserver

import "slices"

// Scheduling policies, as vLLM's --scheduling-policy names them.
const (
	// PolicyFCFS runs waiting requests first come, first served, and
	// preempts nothing. A request whose "priority" is not 0 is refused
	// (400), as vLLM refuses it without priority scheduling.
	PolicyFCFS = "fcfs"
	// PolicyPriority orders the waiting requests by their "priority"
	// (lower first), then by arrival, and preempts running requests of a
	// higher value for a waiting one that cannot start.
	PolicyPriority = "priority"
)

// entry is one request in the server: waiting in the queue, or holding a
// slot. Its fields are guarded by Server.mu.
type entry struct {
	need     int    // KV tokens reserved while it runs: its prompt and its whole output
	priority int    // the request's "priority": lower runs first
	seq      uint64 // its place in the order of arrival
	// context is its prompt and the tokens it has generated: what a
	// prefill computes, and what it holds in the KV cache once
	// prefilled. held is what it holds now (0 while it waits).
	context, held int
	// ready is closed when it is granted a slot; preempted when the run
	// so granted is preempted. Each grant makes a new preempted channel
	// and numbers the run, each preemption a new ready channel.
	ready     chan struct{}
	preempted chan struct{}
	run       uint64
	granted   bool // holding a slot
}

// enter queues e, starts what the policy lets start, and returns the
// channel that is closed if the server goes down. It fails with errDown
// if the server is down.
func (s *Server) enter(e *entry) (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, errDown
	}
	e.ready = make(chan struct{})
	e.seq = s.arrivals
	s.arrivals++
	s.enqueueLocked(e, false)
	s.grantLocked()
	return s.abort, nil
}

// before reports whether a runs before b under the priority policy: a
// lower priority value, or the same and an earlier arrival.
func before(a, b *entry) bool {
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	return a.seq < b.seq
}

// enqueueLocked puts e in the queue: in the priority policy's order, or,
// first come, at the tail (at the head if it was preempted).
func (s *Server) enqueueLocked(e *entry, preempted bool) {
	switch {
	case s.cfg.SchedulingPolicy == PolicyPriority:
		i, _ := slices.BinarySearchFunc(s.queue, e, func(q, e *entry) int {
			if before(q, e) {
				return -1
			}
			return 1
		})
		s.queue = slices.Insert(s.queue, i, e)
	case preempted:
		s.queue = slices.Insert(s.queue, 0, e)
	default:
		s.queue = append(s.queue, e)
	}
}

// grantLocked starts waiting requests, head first, while the head fits: a
// free slot, and room in the KV cache to reserve its prompt and its whole
// output. The head that does not fit blocks those behind it, as in vLLM's
// schedulers. Under the priority policy it preempts, for a head that does
// not fit, the running request that comes last in the policy's order
// while that request has a higher priority value than the head.
func (s *Server) grantLocked() {
	for len(s.queue) > 0 {
		e := s.queue[0]
		if len(s.running) >= s.cfg.Slots || s.reserved+e.need > s.cfg.KVCacheTokens {
			if s.cfg.SchedulingPolicy != PolicyPriority || len(s.running) == 0 {
				return
			}
			v := s.running[0]
			for _, r := range s.running[1:] {
				if before(v, r) {
					v = r
				}
			}
			if v.priority <= e.priority {
				return
			}
			s.preemptLocked(v)
			continue
		}
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.running = append(s.running, e)
		s.reserved += e.need
		e.held = e.context
		s.held += e.held
		e.granted = true
		e.run++
		e.preempted = make(chan struct{})
		close(e.ready)
	}
}

// preemptLocked preempts the running request e by recompute, as vLLM
// does: it frees its slot and its KV cache, keeps the tokens it has
// generated, and goes back to the queue, to prefill its prompt and those
// tokens again when it runs next.
func (s *Server) preemptLocked(e *entry) {
	s.dropLocked(e)
	e.ready = make(chan struct{})
	close(e.preempted)
	s.counts.preemptions++
	s.enqueueLocked(e, true)
}

// dropLocked takes the running request e off its slot.
func (s *Server) dropLocked(e *entry) {
	if i := slices.Index(s.running, e); i >= 0 {
		s.running = slices.Delete(s.running, i, i+1)
	}
	s.reserved -= e.need
	s.held -= e.held
	e.held, e.granted = 0, false
}

// leaveLocked takes e out of the server for good — off its slot, or out
// of the queue — and starts what can start in its place.
func (s *Server) leaveLocked(e *entry) {
	if e.granted {
		s.dropLocked(e)
	} else if i := slices.Index(s.queue, e); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
	s.grantLocked()
}
