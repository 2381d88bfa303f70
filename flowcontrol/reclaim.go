package flowcontrol

import (
	"math"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// reclaimer is the controller's in-flight eviction and guaranteed shares:
// it keeps each tracked band's running admissions, decides revocations
// when the gate refuses a band, and paces the decisions. It exists only
// when Config.Eviction is set or a band has a Guarantee. Guarded by the
// controller's lock.
type reclaimer struct {
	evict bool // Config.Eviction is set
	// preempts is set behind a gate.PreemptingGate that reports its
	// servers preempt: eviction then revokes nothing (evicts).
	preempts bool
	below    int // victims of eviction come from bands below it
	maxPer   int
	grace    time.Duration // ≥ 0
	timeout  time.Duration
	lending  bool // a band may have a guarantee
	// margin is Eviction.Margin, or its default; lendAll is
	// Eviction.GuaranteesIgnoreBelow.
	margin     time.Duration
	lendAll    bool
	byDeadline bool // Eviction.ByDeadline
	// full is the admissions in flight when the gate last refused a head:
	// the pool's size, as far as the controller can tell (holdsBack).
	full int
	// deadlines is deadlineNeed's scratch: the deadlines of a band's
	// waiters, kept for the next decision so that none allocates.
	deadlines []time.Duration

	detector gate.SaturationDetector // the gate, when it is one
	ceilings gate.CeilingGate        // the gate, when it is one

	// outstanding lists the revoked admissions not yet confirmed nor
	// timed out, oldest first.
	outstanding leaseList
	// coolUntil is when the grace after the last confirmation ends;
	// cooling is the footprint of the confirmed revocations until then.
	coolUntil time.Duration
	cooling   float64
	pending   float64 // outstanding and cooling footprints

	// What unlock hands on once the lock is released (see notes); noted
	// is set when a critical section left any.
	noted         bool
	issued, ended noteList
	arm           time.Duration // a wake-up to arm, so long from now; 0 none
	wakeAt        time.Duration // when the armed wake-up fires; 0 none
	timer         Timer         // the one wake-up timer kept armed
	timerAt       time.Duration // when timer fires
	nudge         func()
}

// revocable is the revocation of one admission that may be revoked: part
// of its lease, set when the admission starts in a band the reclaimer
// tracks, and guarded by the controller's lock.
type revocable struct {
	state       leaseState
	band        *band  // the band that dispatched it; nil when it cannot be revoked
	prev, next  *lease // in its band's running list, then in the outstanding revocations
	requested   FlowKey
	tag         any
	reason      Outcome       // an evicted outcome once revoked; OutcomeDispatched before
	forPriority int           // the band it was revoked for
	revokedAt   time.Duration // since the epoch
	retryAfter  time.Duration
	credit      float64       // its footprint at the decision, in saturation units
	ch          chan struct{} // closed on revocation; made by Revoked
	// What Config.Revocations hears, delivered after the lock is released:
	// each lease is listed once issued and once ended, through its own link.
	issuedNext, endedNext *lease
	target, pendingIssued float64
	pendingEnded          float64
	endStep               RevocationStep
	waited                time.Duration
}

// leaseState is where a tracked lease stands.
type leaseState uint8

const (
	leaseRunning  leaseState = iota
	leaseRevoked             // awaiting its confirmation
	leaseTimedOut            // revoked, not confirmed within the timeout
	leaseEnded               // Done
)

// leaseList is a list of leases through their prev and next links, in the
// order they were pushed.
type leaseList struct {
	head, tail *lease
	n          int
}

func (ls *leaseList) push(l *lease) {
	l.prev, l.next = ls.tail, nil
	if ls.tail != nil {
		ls.tail.next = l
	} else {
		ls.head = l
	}
	ls.tail = l
	ls.n++
}

func (ls *leaseList) unlink(l *lease) {
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		ls.head = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	} else {
		ls.tail = l.prev
	}
	l.prev, l.next = nil, nil
	ls.n--
}

// newReclaimer returns the reclaimer of a controller with eviction e (nil
// for none) over gate g, lending when a band may have a guarantee; nil
// when there is neither.
func newReclaimer(e *Eviction, lending bool, g gate.Gate) *reclaimer {
	if e == nil && !lending {
		return nil
	}
	r := &reclaimer{evict: e != nil, lending: lending, maxPer: DefaultMaxRevocationsPerDecision,
		timeout: DefaultRevocationTimeout, margin: DefaultDeadlineMargin}
	if e != nil {
		r.below, r.lendAll, r.byDeadline = e.Below, e.GuaranteesIgnoreBelow, e.ByDeadline
		if e.Margin > 0 {
			r.margin = e.Margin
		}
		if e.MaxPerDecision > 0 {
			r.maxPer = e.MaxPerDecision
		}
		if e.Timeout > 0 {
			r.timeout = e.Timeout
		}
		r.grace = e.Grace
	}
	if r.grace == 0 {
		if lg, ok := g.(gate.LagGate); ok {
			r.grace = max(lg.Lag(), 0)
		}
	}
	r.grace = max(r.grace, 0)
	r.detector, _ = g.(gate.SaturationDetector)
	r.ceilings, _ = g.(gate.CeilingGate)
	if pg, ok := g.(gate.PreemptingGate); ok {
		r.preempts = pg.ServersPreempt()
	}
	return r
}

// evicts reports whether eviction revokes for a higher band: configured,
// and not behind a gate whose servers preempt for it themselves
// (gate.PreemptingGate).
func (r *reclaimer) evicts() bool { return r.evict && !r.preempts }

// tracks reports whether admissions of band b are listed among its
// running ones: every band's, since with guarantees any band may borrow
// and with eviction the release rate counts them all (releaseRate).
func (r *reclaimer) tracks(*band) bool { return true }

// revocable reports whether admissions of band b may be revoked: every
// band's with guarantees, since any band may borrow; only those of the
// bands below Eviction.Below with eviction alone.
func (r *reclaimer) revocable(b *band) bool { return r.lending || b.priority < r.below }

// track lists l, the lease of an admission of band b, key and tag that
// has just started at now (since the epoch), among b's running
// admissions. Called with mu held.
func (r *reclaimer) track(l *lease, b *band, key FlowKey, tag any, now time.Duration) {
	l.band, l.requested, l.tag, l.start = b, key, tag, now
	b.running.push(l)
}

// finished ends the revocation state of l, the lease of an admission that
// is Done or was never handed out, if it is tracked. Called with mu held.
func (r *reclaimer) finished(c *FlowController, l *lease) {
	if l = l.tracked(); l != nil {
		c.endLease(l)
	}
}

// refused takes a revocation decision for band b, whose head the gate has
// just refused: see reclaimFor.
func (r *reclaimer) refused(c *FlowController, b *band, now time.Time, arriving *waiter) {
	r.full = c.inFlight
	c.reclaimFor(b, now, arriving)
}

// stop stops the wake-up timer, at shutdown. Called with mu held.
func (r *reclaimer) stop() {
	if r.timer != nil {
		r.timer.Stop()
	}
}

// tracked returns l when it is tracked — its admission may be revoked —
// and nil otherwise, a nil l included.
func (l *lease) tracked() *lease {
	if l == nil || l.band == nil {
		return nil
	}
	return l
}

// endLease ends tracked lease l, whose admission is Done: a confirmation
// if it was revoked. Called with mu held.
func (c *FlowController) endLease(l *lease) {
	r := c.reclaim
	switch l.state {
	case leaseRunning:
		l.band.running.unlink(l)
		l.band.served(l, c.sinceEpoch(time.Time{}))
	case leaseRevoked:
		r.outstanding.unlink(l)
		now := c.sinceEpoch(time.Time{})
		r.cool(l, now)
		step := RevocationConfirmed
		if now-l.revokedAt >= r.timeout {
			step = RevocationTimedOut // too late; no decision has swept it yet
		}
		r.noteEnded(c, l, step, now-l.revokedAt)
	}
	l.state = leaseEnded
}

// cool moves the footprint of l, no longer outstanding at now, to the
// grace after its confirmation.
func (r *reclaimer) cool(l *lease, now time.Duration) {
	if r.grace == 0 {
		r.pending = max(r.pending-l.credit, 0)
		return
	}
	r.cooling += l.credit
	r.coolUntil = max(r.coolUntil, addTime(now, r.grace))
}

// open reports whether a decision may be taken at now: no revocation
// awaits its confirmation and the grace after the last one has passed. It
// first retires the revocations whose timeout has passed. When it is
// closed it asks for a wake-up when it opens, unless a revoked
// admission's Done will come first.
func (r *reclaimer) open(c *FlowController, now time.Duration) bool {
	for l := r.outstanding.head; l != nil; {
		next := l.next
		if now-l.revokedAt >= r.timeout {
			r.outstanding.unlink(l)
			l.state = leaseTimedOut
			r.cool(l, now)
			r.noteEnded(c, l, RevocationTimedOut, now-l.revokedAt)
		}
		l = next
	}
	if l := r.outstanding.head; l != nil {
		r.wake(c, now, addTime(l.revokedAt, r.timeout))
		return false
	}
	if now < r.coolUntil {
		r.wake(c, now, r.coolUntil)
		return false
	}
	if r.cooling > 0 {
		r.pending = max(r.pending-r.cooling, 0)
		r.cooling = 0
	}
	return true
}

// wake asks for dispatch to run again at at, unless a wake-up already
// armed comes no later. The timer is armed once the lock is released.
func (r *reclaimer) wake(c *FlowController, now, at time.Duration) {
	if (r.wakeAt > now && r.wakeAt <= at) || at == maxInt64 {
		return // one comes sooner, or this one never
	}
	r.wakeAt, r.arm = at, at-now
	r.noted = true
}

// saturation returns the gate's saturation within (0, 1], or 1 when the
// gate reports none, reads 0 (then the gate refuses for a reason of its
// own) or reads something that is not a number in [0, 1].
func (r *reclaimer) saturation() float64 {
	if r.detector == nil {
		return 1
	}
	s := r.detector.Saturation()
	if !(s > 0 && s <= 1) {
		return 1
	}
	return s
}

// reclaimFor takes a revocation decision for band b, whose head the gate
// has just refused at now (the zero Time to read the clock), with
// arriving, if not nil, about to join its queue besides those in it: see
// Eviction and BandConfig.Guarantee. Called with mu held.
func (c *FlowController) reclaimFor(b *band, now time.Time, arriving *waiter) {
	r := c.reclaim
	waiting := b.queued.requests
	if arriving != nil {
		waiting++
	}
	if c.inFlight == 0 || waiting == 0 || c.closing.Load() {
		return
	}
	if now.IsZero() {
		now = c.clock.Now()
	}
	at := c.sinceEpoch(now)
	if !r.open(c, at) {
		return
	}
	s := r.saturation()
	credit := s / float64(c.inFlight)
	demand := int(min(waiting, int64(c.inFlight)))
	lend := 0
	if r.lending {
		if gap := guaranteed(b, credit) - b.running.n; gap > 0 {
			lend = min(demand, gap)
		}
	}
	byDeadline, next, lowest := false, time.Duration(maxInt64), b
	if r.byDeadline {
		var need int
		if need, next, byDeadline, lowest = c.lineNeed(b, arriving, at, demand); byDeadline {
			demand = min(need, int(c.inFlight))
		}
	}
	if r.ceilings != nil {
		if ceiling := r.ceilings.BandCeiling(b.priority); ceiling < s {
			demand += int(math.Floor((s-ceiling)/credit + 1e-9))
		}
	}
	want := lend
	if r.evicts() {
		want = max(demand, lend)
	}
	n := min(want, r.maxPer)
	taken := 0
	if n > 0 {
		target := float64(want) * credit
		if byDeadline {
			taken = c.revokeByDeadline(b, lowest, n, lend, credit, target, now)
		} else {
			taken = c.revokeNewest(b, n, lend, credit, target, now)
		}
	}
	switch {
	case taken > 0:
		// Decide again when the timeout passes, if no Done comes first.
		r.wake(c, at, addTime(at, r.timeout))
	case next < maxInt64:
		// Decide again when the first waiter's slack runs out, if no
		// release comes first.
		r.wake(c, at, next)
	}
}

// lendable reports whether a guarantee taken back may revoke admissions
// of band v: with eviction, only of a band below Eviction.Below, unless
// Eviction.GuaranteesIgnoreBelow; without, of any band.
func (r *reclaimer) lendable(v *band) bool {
	return !r.evict || r.lendAll || v.priority < r.below
}

// revokeNewest revokes up to n running admissions of the bands below b
// for it at now, the lowest band first and, within one, the most recently
// dispatched first, the first lend of them to take back b's guarantee;
// it returns how many. Called with mu held.
func (c *FlowController) revokeNewest(b *band, n, lend int, credit, target float64, now time.Time) int {
	r := c.reclaim
	desc := c.bands.Load().desc
	taken := 0
	for j := len(desc) - 1; j > b.index && taken < n; j-- {
		v := desc[j]
		budget := 0
		switch {
		case r.evicts() && v.priority < r.below:
			budget = n
		case r.lendable(v):
			budget = min(lend, n)
		}
		spare := v.running.n - guaranteed(v, credit)
		for ; taken < budget && spare > 0; spare-- {
			reason := OutcomeEvictedPriority
			if taken < lend {
				reason = OutcomeEvicted
			}
			c.revoke(v.running.tail, b, reason, credit, target, now)
			taken++
		}
	}
	return taken
}

// revokeByDeadline revokes up to n running admissions for band b at now,
// each the deadlineVictim of those left below band lowest (b, or a band
// below it whose waiters' deadlines need them), the first lend of them to
// take back b's guarantee; it returns how many. Called with mu held.
func (c *FlowController) revokeByDeadline(b, lowest *band, n, lend int, credit, target float64, now time.Time) int {
	r := c.reclaim
	taken := 0
	for ; taken < n; taken++ {
		lending := taken < lend
		l := c.deadlineVictim(lowest, credit, func(v *band) bool {
			return r.evicts() && v.priority < r.below || lending && r.lendable(v)
		})
		if l == nil {
			break
		}
		reason := OutcomeEvictedPriority
		if lending {
			reason = OutcomeEvicted
		}
		c.revoke(l, b, reason, credit, target, now)
	}
	return taken
}

// revoke revokes l, a running admission of a band below b, for band b
// at now, as one of a decision that set out to free target.
// Called with mu held.
func (c *FlowController) revoke(l *lease, b *band, reason Outcome, credit, target float64, now time.Time) {
	r := c.reclaim
	v := l.band
	v.running.unlink(l)
	l.state, l.reason, l.forPriority = leaseRevoked, reason, b.priority
	l.revokedAt, l.credit = c.sinceEpoch(now), credit
	l.retryAfter = c.evictedRetryAfter(v, now)
	r.outstanding.push(l)
	r.pending += credit
	if l.ch != nil {
		close(l.ch)
	}
	l.target, l.pendingIssued = target, r.pending
	r.issued.push(l, func(l *lease) **lease { return &l.issuedNext })
	r.noted = true
}

// evictedRetryAfter is the Retry-After of a request revoked from band v
// at now: 1s, the least, while v and the controller have room to queue
// it — it may come back at once and wait its turn, as the requests it
// would queue behind do; otherwise the band's next promised return, as
// for a capacity rejection. Called with mu held.
func (c *FlowController) evictedRetryAfter(v *band, now time.Time) time.Duration {
	if c.fitsAll(v, v.limits.Load(), nil, 0, 1) {
		return time.Second
	}
	return v.drain.retryAfter(now, c.inFlight)
}

// noteEnded lists l, whose revocation ended with step after waited, for
// Config.Revocations.
func (r *reclaimer) noteEnded(c *FlowController, l *lease, step RevocationStep, waited time.Duration) {
	l.endStep, l.waited, l.pendingEnded = step, waited, r.pending
	r.ended.push(l, func(l *lease) **lease { return &l.endedNext })
	r.noted = true
}

// noteList is a list of leases to report, in order, linked through the
// link field that link returns: each lease is listed once issued and once
// ended, through a field of its own for each.
type noteList struct{ head, tail *lease }

func (q *noteList) push(l *lease, link func(*lease) **lease) {
	if q.tail == nil {
		q.head = l
	} else {
		*link(q.tail) = l
	}
	q.tail = l
}

// notes is what a critical section left for after the lock: revocations
// to report and a wake-up to arm.
type notes struct {
	issued, ended *lease
	arm, at       time.Duration // a wake-up to arm so long from now, due at at
}

// takeNotes takes what the critical section left for after the lock.
// Called with mu held, from unlock, when r.noted is set.
func (r *reclaimer) takeNotes() notes {
	n := notes{issued: r.issued.head, ended: r.ended.head, arm: r.arm, at: r.wakeAt}
	r.issued, r.ended, r.arm = noteList{}, noteList{}, 0
	r.noted = false
	return n
}

// announce tells the Observer and Config.Revocations of the revocations
// in n, and arms its wake-up. Called without mu. A panicking Observer or
// Revocations loses nothing: the rest is announced as the panic unwinds.
func (c *FlowController) announce(n *notes) {
	defer func() {
		if n.issued != nil || n.ended != nil {
			c.announce(n)
		}
	}()
	if n.arm > 0 {
		d := n.arm
		n.arm = 0
		c.armWake(d, n.at)
	}
	for n.issued != nil {
		l := n.issued
		n.issued, l.issuedNext = l.issuedNext, nil
		victim := FlowKey{ID: l.requested.ID, Priority: l.band.priority}
		if c.observer != nil {
			callObserver(c.observer, Event{Requested: l.requested, Effective: victim, Outcome: l.reason, Tag: l.tag})
		}
		if c.revocations != nil {
			c.revocations(Revocation{Step: RevocationIssued, Victim: victim, Requested: l.requested, For: l.forPriority,
				Outcome: l.reason, Target: l.target, Pending: l.pendingIssued, Tag: l.tag})
		}
	}
	for n.ended != nil {
		l := n.ended
		n.ended, l.endedNext = l.endedNext, nil
		if c.revocations != nil {
			c.revocations(Revocation{Step: l.endStep, Victim: FlowKey{ID: l.requested.ID, Priority: l.band.priority},
				Requested: l.requested, For: l.forPriority, Outcome: l.reason, Waited: l.waited, Pending: l.pendingEnded, Tag: l.tag})
		}
	}
}

// armWake arms the reclaimer's wake-up d from now, due at at (since the
// epoch). Called without mu: a timer may allocate. One timer is kept
// armed: of the new one and the one armed before, the later is stopped, so
// that no timer outlives the wake-up it was armed for (wake-ups are armed
// after the lock is released, so two may arrive out of order).
func (c *FlowController) armWake(d, at time.Duration) {
	r := c.reclaim
	t := c.clock.AfterFunc(d, r.nudge)
	c.mu.Lock()
	stop := t
	switch {
	case c.closed:
	case r.timer != nil && r.timerAt <= at && r.timerAt > c.sinceEpoch(time.Time{}):
		// The armed one fires first; its dispatch arms again if need be,
		// which wake allows once it is due.
		r.wakeAt = r.timerAt
	default:
		stop, r.timer, r.timerAt = r.timer, t, at
	}
	c.mu.Unlock()
	if stop != nil {
		stop.Stop()
	}
}

// addTime returns t + d for d ≥ 0, capped at the largest Duration: a
// configured timeout or grace of any size never wraps an instant into the
// past.
func addTime(t, d time.Duration) time.Duration {
	return time.Duration(saturatingAdd(int64(t), int64(max(d, 0))))
}
