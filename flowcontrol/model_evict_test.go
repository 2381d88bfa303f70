package flowcontrol_test

import (
	"errors"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/flowcontrol"
)

// The model's in-flight eviction: the rules of flowcontrol.Eviction over
// the model's plain state, with no lending (guarantees have tests of their
// own). A decision is taken whenever the model's dispatch finds the
// highest waiting band refused, as the controller's is at every refusal;
// the controller decides at more events than the model dispatches at
// (an enqueue refused at once, a spare wake-up), but a decision taken
// again on the same state is empty: the last one either took what it
// could or is still paced.
//
// Times: the timeout and the grace end off the whole seconds and quarter
// seconds every other timer of the model lands on, so that no wake-up
// falls at the instant of an expiry, whose order synctest leaves open.
type modelEviction struct {
	on         bool
	below      int
	maxPer     int
	grace      time.Duration // 0: none
	timeout    time.Duration
	coolUntil  time.Duration
	wakes      []time.Duration // the controller's armed wake-ups
	dispatches int

	issued, confirmed, timedOut int
}

const (
	modelTimeout = 2*time.Second + 123457*time.Nanosecond
	modelGrace   = time.Second + 333*time.Nanosecond
)

// drawEviction draws whether the controller evicts, and how.
func (m *model) drawEviction(rt *rapid.T) *flowcontrol.Eviction {
	if !rapid.Bool().Draw(rt, "evict") {
		return nil
	}
	e := &m.evict
	e.on = true
	e.below = rapid.SampledFrom([]int{0, 2}).Draw(rt, "evictBelow")
	e.maxPer = rapid.IntRange(1, 3).Draw(rt, "maxPerDecision")
	e.timeout = modelTimeout
	grace := time.Duration(-1)
	if rapid.Bool().Draw(rt, "grace") {
		e.grace, grace = modelGrace, modelGrace
	}
	return &flowcontrol.Eviction{Below: e.below, MaxPerDecision: e.maxPer, Grace: grace, Timeout: e.timeout}
}

// evictable reports whether eviction can ever act on the model's bands:
// there are two or more, and the lowest is below Eviction.Below.
func (m *model) evictable() bool {
	if len(m.bands) < 2 {
		return false
	}
	for p := range m.bands {
		if p < m.evict.below {
			return true
		}
	}
	return false
}

// reclaim is a decision for band top, whose head the gate refused.
func (m *model) reclaim(top *modelBand) {
	e := &m.evict
	if !e.on || m.closed || m.inFlight == 0 {
		return
	}
	var oldest *modelReq
	for _, r := range m.reqs {
		if !r.revoked || r.done || r.timedOut {
			continue
		}
		if m.now-r.revokedAt >= e.timeout {
			r.timedOut = true
			e.timedOut++
			m.cool()
			continue
		}
		if oldest == nil || r.revokedAt < oldest.revokedAt {
			oldest = r
		}
	}
	if oldest != nil {
		return // its wake-up was armed with it
	}
	if m.now < e.coolUntil {
		e.wakes = append(e.wakes, e.coolUntil)
		return
	}
	n := min(len(top.queue), m.inFlight, e.maxPer)
	bound := min(top.priority, e.below)
	taken := 0
	for ; taken < n; taken++ {
		var victim *modelReq
		for _, r := range m.reqs {
			running := r.finished && r.outcome == flowcontrol.OutcomeDispatched && !r.done && !r.revoked
			if !running || r.effective >= bound {
				continue
			}
			if victim == nil || r.effective < victim.effective || r.effective == victim.effective && r.dispatchSeq > victim.dispatchSeq {
				victim = r
			}
		}
		if victim == nil {
			break
		}
		victim.revoked, victim.revokedAt = true, m.now
		e.issued++
	}
	if taken > 0 {
		e.wakes = append(e.wakes, m.now+e.timeout)
	}
}

// cool starts the grace after a confirmation or a timeout.
func (m *model) cool() {
	if e := &m.evict; e.grace > 0 {
		e.coolUntil = max(e.coolUntil, m.now+e.grace)
	}
}

// ended books the Done of r.
func (m *model) ended(r *modelReq) {
	e := &m.evict
	if !r.revoked || r.timedOut {
		return
	}
	if m.now-r.revokedAt >= e.timeout {
		r.timedOut = true
		e.timedOut++
	} else {
		e.confirmed++
	}
	m.cool()
}

// nextWake returns the earliest wake-up after now and at most until.
func (m *model) nextWake(until time.Duration) (time.Duration, bool) {
	var next time.Duration
	for _, w := range m.evict.wakes {
		if w > m.now && w <= until && (next == 0 || w < next) {
			next = w
		}
	}
	return next, next != 0
}

// checkEviction compares the revocations the controller reported and each
// admission's revocation with the model's.
func checkEviction(rt *rapid.T, m *model, revs *revocations) {
	e := &m.evict
	if got := [3]int{revs.count(flowcontrol.RevocationIssued), revs.count(flowcontrol.RevocationConfirmed), revs.count(flowcontrol.RevocationTimedOut)}; got != [3]int{e.issued, e.confirmed, e.timedOut} {
		rt.Fatalf("revocations issued, confirmed, timed out: %v; model %v", got, [3]int{e.issued, e.confirmed, e.timedOut})
	}
	for _, r := range m.reqs {
		if !r.finished || r.outcome != flowcontrol.OutcomeDispatched || r.call.adm == nil {
			continue
		}
		a := r.call.adm
		closed := false
		select {
		case <-a.Revoked():
			closed = true
		default:
		}
		err := a.Err()
		if closed != r.revoked || (err != nil) != r.revoked {
			rt.Fatalf("r%d: Revoked closed %v, Err %v; the model revoked it: %v", r.seq, closed, err, r.revoked)
		}
		var rej *flowcontrol.RejectionError
		if r.revoked && (!errors.As(err, &rej) || rej.Outcome != flowcontrol.OutcomeEvictedPriority ||
			rej.RetryAfter < time.Second || rej.RetryAfter > 30*time.Second || rej.Effective != a.Effective()) {
			rt.Fatalf("r%d: revoked with %v", r.seq, err)
		}
	}
}
