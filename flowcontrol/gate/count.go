package gate

import "sync/atomic"

// CountGate is a [Gate] that decides on nothing but how many of its slots
// are taken, against a limit that does not change: [MaxInFlight]. Such a
// gate refuses no band that another would be granted, and hears nothing of
// cost or usage, so a controller that owns it may start a request and end
// an admission without its own lock while nothing waits. Count returns the
// gate's count, made safe for concurrent use; a controller calls it once,
// before the gate is shared, and only for its own gate: composed inside
// another gate, the count stays plain, guarded by the lock that guards the
// composite.
type CountGate interface {
	Gate
	Count() *Count
}

// Count is a count of slots taken, up to a limit, as a [CountGate] keeps
// it. Its methods are safe for concurrent use once the gate's Count has
// returned it.
type Count struct {
	n      int64
	limit  int64
	shared bool // set by share: the count is atomic
}

// share makes the count atomic and returns it.
func (s *Count) share() *Count {
	s.shared = true
	return s
}

// TryTake takes a slot if one is free, and reports whether it did.
func (s *Count) TryTake() bool {
	if !s.shared {
		if s.n >= s.limit {
			return false
		}
		s.n++
		return true
	}
	for {
		n := atomic.LoadInt64(&s.n)
		if n >= s.limit {
			return false
		}
		if atomic.CompareAndSwapInt64(&s.n, n, n+1) {
			return true
		}
	}
}

// Give gives a slot back and returns the slots still taken.
func (s *Count) Give() int64 {
	if !s.shared {
		s.n--
		return s.n
	}
	return atomic.AddInt64(&s.n, -1)
}

// Taken returns the slots taken.
func (s *Count) Taken() int64 { return atomic.LoadInt64(&s.n) }

// Limit returns the most slots that may be taken at once.
func (s *Count) Limit() int64 { return s.limit }
