package flowcontrol

import (
	"math"
	"slices"
	"time"

	"github.com/sluicegate/sluice/ordering"
)

// Giving way by deadline is the reclaimer's: a waiting request's deadline
// (BandConfig.TTFTObjective, or its x-llm-d-slo-ttft-ms header), the slot
// releases the controller measures, and what the waiters of a band need
// freed at once to start by their deadlines (see Eviction). These are its
// parts; reclaimFor and the guarantees' head call them.

// DefaultDeadlineMargin is [Eviction.Margin]'s default: how long before
// its deadline a waiting request must start, for its first token to come
// by the deadline — the model server's prefill, and the revocation's own
// confirmation, come after the start.
const DefaultDeadlineMargin = 150 * time.Millisecond

// maxDeadlineScan bounds the waiters of a band one decision reads: at
// most this many deadlines are weighed, taken flow by flow from each
// flow's oldest. It bounds the decision's cost, under the lock, whatever
// the queue's length; a band rarely has so many waiters with deadlines
// still to meet.
const maxDeadlineScan = 1024

// serviceWeight is the weight of each natural end in a band's mean
// service time, an exponentially weighted moving average: the last 8 or
// so ends carry most of it.
const serviceWeight = 8

// arrivalsDecay is the time constant of a band's measured arrival rate.
const arrivalsDecay = 2 * time.Second

// arrived counts an arrival of band b at now (the zero Time to read the
// clock) in its arrival rate, when the controller gives way by deadline.
// Called with mu held.
func (r *reclaimer) arrived(c *FlowController, b *band, now time.Time) {
	if r.byDeadline {
		b.arrived(c.sinceEpoch(now))
	}
}

// arrived counts an arrival of the band at now in its arrival rate.
func (b *band) arrived(now time.Duration) {
	b.arrivals = b.arrivalRate(now) + 1/arrivalsDecay.Seconds()
	b.arrivalsAt = max(b.arrivalsAt, now)
}

// arrivalRate returns the band's arrival rate at now, per second: each
// request that started at once or queued counts 1/τ, decayed by
// exp(−age/τ), with τ = arrivalsDecay — a steady rate λ reads λ.
func (b *band) arrivalRate(now time.Duration) float64 {
	if b.arrivals == 0 || now <= b.arrivalsAt {
		return b.arrivals
	}
	return b.arrivals * math.Exp(-float64(now-b.arrivalsAt)/float64(arrivalsDecay))
}

// deadlineOf returns the deadline of a request whose item is it, queued in
// a band of objective (BandConfig.TTFTObjective), as time since the
// controller's epoch, or 0 when it has none: its ReceivedTime plus the
// band's objective or, without one, the objective its headers carry; 0
// also when nothing gives way by deadlines (neither ByDeadline nor a
// guarantee). Outside the lock.
func (c *FlowController) deadlineOf(it *ordering.Item, objective time.Duration) time.Duration {
	if r := c.reclaim; !r.byDeadline && !r.lending {
		return 0
	}
	slo := objective
	if slo <= 0 {
		var ok bool
		if slo, ok = it.SLOTTFT(); !ok {
			return 0
		}
	}
	d := addTime(c.sinceEpoch(it.ReceivedTime), slo)
	if d == 0 {
		d = 1 // 0 means none
	}
	return d
}

// deadline returns w's deadline, since the controller's epoch, while it is
// queued; 0 when it has none (see waiterUse.retryAfter).
func (w *waiter) deadline() time.Duration { return w.retryAfter }

// served books the natural end at now of l, a running admission of band
// b, in b's mean service time.
func (b *band) served(l *lease, now time.Duration) {
	held := max(now-l.start, 1)
	if b.service == 0 {
		b.service = held
		return
	}
	b.service += (held - b.service) / serviceWeight
}

// releaseRate returns μ, the slots per second the running admissions are
// expected to free at now for the waiters of band w: the sum, over the
// bands, of a band's running admissions ÷ its mean service time, less
// the arrival rate of each band above w, whose new arrivals take the
// releases first. A band none of whose admissions has ended yet counts
// the age of its oldest running one, at least PriorServiceTime (1s), as
// its service time. Revoked admissions, whose slots come back with their
// confirmations, are not counted. Called with mu held.
func (c *FlowController) releaseRate(w *band, now time.Duration) float64 {
	mu := 0.0
	for _, b := range c.bands.Load().desc {
		if b.index < w.index {
			mu -= b.arrivalRate(now)
		}
		if b.running.n == 0 {
			continue
		}
		mu += float64(b.running.n) / b.serviceTime(now).Seconds()
	}
	return max(mu, 0)
}

// deadlineNeed returns how many slots band b's waiters need freed at now
// so that each starts by its deadline less the margin, when extra
// requests go before them: with their deadlines d₁ ≤ d₂ ≤ … ≤ dₙ and the
// release rate μ, the largest ⌈k + extra − μ·max(dₖ − margin − now, 0)⌉,
// 0 at least, over the waiters whose deadline has not passed (one that
// has keeps its place in line, but nothing freed now meets its deadline).
// Waiters without a deadline are not counted: they go after those with
// one, as the slo-deadline ordering serves them. It also returns when,
// with no slot freed before, the need would next grow (math.MaxInt64 for
// never), and ok false when no waiter of b has a deadline. arriving, if
// not nil, is a request about to join b's queue. Called with mu held.
func (c *FlowController) deadlineNeed(b *band, arriving *waiter, now time.Duration, extra int) (need int, next time.Duration, ok bool) {
	r := c.reclaim
	ds := r.deadlines[:0]
	if arriving != nil && arriving.deadline() != 0 {
		ds = append(ds, arriving.deadline())
		b.window = max(arriving.deadline()-arriving.enqueued, 0)
	}
	for _, f := range b.flows {
		for w := f.waiters.Front(); w != nil && len(ds) < maxDeadlineScan; w = w.links.Next {
			if d := w.deadline(); d != 0 {
				ds = append(ds, d)
				b.window = max(d-w.enqueued, 0)
			}
		}
	}
	r.deadlines = ds
	if len(ds) == 0 {
		return 0, maxInt64, false
	}
	slices.Sort(ds)
	mu := c.releaseRate(b, now)
	next = maxInt64
	for k, d := range ds {
		if d <= now {
			continue // missed already: only its place in line counts
		}
		pos := float64(k + 1 + extra)
		slack := max(d-r.margin-now, 0)
		if mu <= 0 {
			need = max(need, k+1+extra)
			continue
		}
		need = max(need, int(math.Ceil(pos-mu*slack.Seconds()-1e-9)))
		// With no release before, its need grows once now passes
		// d − margin − pos/μ.
		if wait := pos / mu * float64(time.Second); wait < float64(maxInt64) {
			if t := d - r.margin - time.Duration(wait); t > now {
				next = min(next, t+1)
			}
		}
	}
	return need, next, true
}

// lineNeed returns what a decision for band b, whose head the gate has
// refused at now, frees by deadline: the largest deadlineNeed of b and of
// each band below it with waiters and with victims below it (bands below
// Eviction.Below with running admissions), each band's waiters counted
// behind those of the bands above it; for b, when none of its waiters
// has a deadline, demand (its waiting requests, as without deadlines)
// instead. It also returns the earliest instant a need would next grow,
// ok false when no waiter of these bands has a deadline (the decision is
// then demand, as without deadlines), and lowest, the lowest band whose
// need is positive (b when none), from below which the victims come.
// arriving, if not nil, is about to join b's queue. Called with mu held.
func (c *FlowController) lineNeed(b *band, arriving *waiter, now time.Duration, demand int) (need int, next time.Duration, ok bool, lowest *band) {
	desc := c.bands.Load().desc
	next, lowest = maxInt64, b
	ahead := 0
	expect := 0.0
	for i := b.index; i < len(desc); i++ {
		h := desc[i]
		var a *waiter
		if h == b {
			a = arriving
		}
		waiting := int(h.queued.requests)
		if a != nil {
			waiting++
		}
		if waiting == 0 || h != b && !c.victimsBelow(h) {
			continue
		}
		n, t, has := c.deadlineNeed(h, a, now, ahead)
		ahead += waiting
		if has && c.reclaim.full > 0 {
			// A band whose expected admissions and one standard
			// deviation of them (a Poisson count's), with those of the
			// bands above it, fill the pool needs every slot: its
			// waiters would not drain, and slack spent now is missing
			// at the next peak.
			x := h.expected(now)
			expect += x + math.Sqrt(x)
			if int(expect) >= c.reclaim.full {
				n = max(n, waiting)
			}
		}
		switch {
		case has:
			ok, h.deadlined = true, true
			next = min(next, t)
		case h == b:
			n = demand
		default:
			continue
		}
		if n > 0 {
			need, lowest = max(need, n), h
		}
	}
	return need, next, ok, lowest
}

// serviceTime returns band b's mean service time at now, or, before one
// of its admissions has ended, the age of its oldest running one, at
// least PriorServiceTime.
func (b *band) serviceTime(now time.Duration) time.Duration {
	if b.service != 0 {
		return b.service
	}
	s := PriorServiceTime
	if b.running.head != nil {
		s = max(s, now-b.running.head.start)
	}
	return s
}

// holdbackDeviations is how many standard deviations of its expected
// admissions a band with deadlines holds back beyond their mean (see
// holdback).
const holdbackDeviations = 2

// holdback returns what band h holds back at now, in admissions. With
// x = λ·S — by Little's law the admissions its arrivals keep running on
// average, a Poisson count's mean — it is the larger of x and x + 2√x −
// ν·W, rounded down: x + 2√x is what its arrivals keep running but at
// their peaks (two standard deviations above the mean), and ν·W the
// slots the bands below it are expected to release (releasesBelow) while
// one of its requests may wait, W its window less the margin. Where the
// bands below release slots often enough, as short requests do, it holds
// back the mean; where they seldom do, as long generations do, it holds
// back for the peaks, which it would otherwise have to revoke for.
// Called with mu held.
func (c *FlowController) holdback(h *band, now time.Duration) int {
	x := h.expected(now)
	return int(max(h.peakExpected(now)-c.releasesWithin(h, now), x))
}

// peakExpected returns x + 2√x for x = λ·S, the admissions band h keeps
// running at peaks (see holdback).
func (h *band) peakExpected(now time.Duration) float64 {
	x := h.expected(now)
	return x + holdbackDeviations*math.Sqrt(x)
}

// releasesWithin returns ν·W: the slots the bands below h are expected to
// release at now while one of h's requests may wait, its window less the
// margin (see holdback). Called with mu held.
func (c *FlowController) releasesWithin(h *band, now time.Duration) float64 {
	wait := max(h.window-c.reclaim.margin, 0)
	if wait == 0 {
		return 0
	}
	return c.releasesBelow(h, now) * wait.Seconds()
}

// releasesBelow returns ν, the slots per second the running admissions of
// the bands below h are expected to free at now: for each, its running
// admissions ÷ its mean service time (see releaseRate). Called with mu
// held.
func (c *FlowController) releasesBelow(h *band, now time.Duration) float64 {
	nu := 0.0
	desc := c.bands.Load().desc
	for j := h.index + 1; j < len(desc); j++ {
		if b := desc[j]; b.running.n > 0 {
			nu += float64(b.running.n) / b.serviceTime(now).Seconds()
		}
	}
	return nu
}

// expected returns λ·S, the admissions band h keeps running on average
// at now by Little's law: its arrival rate times its mean service time.
func (h *band) expected(now time.Duration) float64 {
	return h.arrivalRate(now) * h.serviceTime(now).Seconds()
}

// holdbackFalls returns how long after now, with no arrival before and
// the releases below as they are, h's holdback falls to held or below:
// x + 2√x − ν·W falls below held + 1 once x, decaying with the arrival
// rate, falls below x* = (√(2 + held + ν·W) − 1)², after τ·ln(x ÷ x*),
// and x itself once it falls below held + 1, after τ·ln(x ÷ (held+1)):
// the later of the two, at least a millisecond, so that a holdback just
// above held does not wake the controller at every instant. Called with
// mu held.
func (c *FlowController) holdbackFalls(h *band, now time.Duration, held int) time.Duration {
	r := math.Sqrt(2+float64(held)+c.releasesWithin(h, now)) - 1
	x := h.expected(now)
	fall := max(math.Log(x/(r*r)), math.Log(x/float64(held+1)))
	wait := time.Duration(float64(arrivalsDecay) * fall)
	return max(wait, time.Millisecond)
}

// holdsBack reports whether band b may not start a request at now: the
// slots left free would then be fewer than what the bands above it with
// deadlines hold back and do not hold — the sum of their holdbacks less
// their running and waiting admissions — counting the pool's size as the
// admissions in flight when the gate last refused. The slots are kept for
// those bands' next arrivals; but a band with deadlines of its own is not
// held back from a slot its waiters need to start by them (deadlineNeed).
// When it holds back it asks for a wake-up for when the holdbacks,
// decaying with the arrival rates, no longer would. Called with mu held.
func (c *FlowController) holdsBack(b *band, now time.Time) bool {
	r := c.reclaim
	if r.full == 0 {
		return false
	}
	desc := c.bands.Load().desc
	at := time.Duration(-1)
	short, falls := 0, time.Duration(maxInt64)
	for i := 0; i < b.index; i++ {
		h := desc[i]
		if !h.deadlined {
			continue
		}
		if at < 0 {
			at = c.sinceEpoch(now)
		}
		held := h.running.n + int(h.queued.requests)
		if hb := c.holdback(h, at); held < hb {
			short += hb - held
			falls = min(falls, c.holdbackFalls(h, at, held))
		}
	}
	if short == 0 || c.inFlight+1+short <= r.full {
		return false
	}
	if b.dated && b.queued.requests > 0 {
		// A band with deadlines of its own is not held back from a
		// slot its waiters need to start in time.
		if need, _, ok := c.deadlineNeed(b, nil, at, 0); ok && need > 0 {
			return false
		}
	}
	r.wake(c, at, at+falls)
	return true
}

// victimsBelow reports whether a band below h that eviction takes victims
// from has running admissions. Called with mu held.
func (c *FlowController) victimsBelow(h *band) bool {
	desc := c.bands.Load().desc
	for j := len(desc) - 1; j > h.index; j-- {
		if v := desc[j]; v.running.n > 0 && v.priority < c.reclaim.below {
			return true
		}
	}
	return false
}

// deadlineVictim returns the running admission to revoke next for band b
// in a decision by deadline: from the bands below b that eligible allows
// and that hold more than their own guarantee at the footprint credit,
// the one that has produced no output yet (no [Admission.FirstToken])
// and, among those or when there is none, the one dispatched last — the
// least work lost; on a tie, the lowest band's. nil when there is none.
// Called with mu held.
func (c *FlowController) deadlineVictim(b *band, credit float64, eligible func(*band) bool) *lease {
	desc := c.bands.Load().desc
	var best *lease
	bestQuiet := false
	for j := len(desc) - 1; j > b.index; j-- {
		v := desc[j]
		if v.running.n == 0 || v.running.n <= guaranteed(v, credit) || !eligible(v) {
			continue
		}
		l, quiet := v.running.tail, false
		for q := v.running.tail; q != nil; q = q.prev {
			if q.firstToken.Load() == 0 {
				l, quiet = q, true
				break
			}
		}
		if best == nil || quiet && !bestQuiet || quiet == bestQuiet && l.start > best.start {
			best, bestQuiet = l, quiet
		}
	}
	return best
}

// floorYields reports whether band g, short of its guarantee and with
// waiters below the highest waiting band desc[top], gives way to the bands
// above it: g is sheddable (priority below 0) and some band above it with
// waiters would, were g to take the next slot, need a slot freed to start
// its waiters by their deadlines (deadlineNeed with one more ahead of
// them). Called with mu held.
func (c *FlowController) floorYields(g *band, top int) bool {
	if g.priority >= 0 || top >= g.index {
		return false
	}
	desc := c.bands.Load().desc
	now := c.sinceEpoch(time.Time{})
	for i := top; i < g.index; i++ {
		h := desc[i]
		if h.queued.requests == 0 {
			continue
		}
		if need, _, ok := c.deadlineNeed(h, nil, now, 1); ok && need > 0 {
			return true
		}
	}
	return false
}

// checkObjective validates a band's TTFT objective.
func checkObjective(name string, d time.Duration) error {
	if d < 0 {
		return configError(name, d, "negative objective")
	}
	return nil
}
