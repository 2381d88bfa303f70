package flowcontrol

import (
	"errors"
	"strconv"
	"time"
)

// Eviction turns on in-flight eviction ([Config.Eviction]): when the gate
// refuses the head of a band, admissions already running in bands strictly
// below it are revoked to make room. Strict priority decides only who
// starts next; a request that started keeps its slot until it ends, so
// without eviction an interactive request waits behind the batch
// generations that filled the pool. The zero value is llm-d-router's
// enableEviction: victims only from sheddable bands (priority below 0), at
// most 2 revocations per decision, decisions paced by confirmation, a 10s
// confirmation timeout; but for the grace after a confirmation, which is
// the gate's own lag (see Grace) where llm-d waits a fixed 500ms.
//
// Behind a gate whose model servers preempt a lower band for a higher one
// themselves ([gate.PreemptingGate]: vLLM's priority scheduler, the band
// handed to it), eviction revokes nothing and ByDeadline holds nothing
// back: such a gate lets a higher band past the lower bands' work, and
// refuses it only where a revocation would not start it, and the
// servers' preemption keeps the decoded tokens a revocation throws away.
// Guarantees are still taken back.
//
// A decision is taken when the gate refuses the head of band p, no earlier
// revocation is awaiting its confirmation and the grace after the last one
// has passed:
//   - Victims come only from bands of priority below min(p, Below), lowest
//     priority first and, within a band, the most recently dispatched
//     first: the least work is lost (with ByDeadline, below, the victims
//     without output go first). A band's guaranteed share
//     ([BandConfig.Guarantee]) is never revoked.
//   - Its size is the demand: the requests waiting in band p — or, with
//     ByDeadline, what their deadlines need (below) — plus the
//     admissions the gate's saturation stands above the band's ceiling
//     (see [gate.CeilingGate]), counted in mean footprints (saturation ÷ in
//     flight) — llm-d sizes from the second alone, which frees one slot
//     per decision when a burst waits at a full pool — capped at
//     MaxPerDecision and at the victims there are.
//   - The next decision waits until every revoked admission is confirmed
//     (its holder called Done) and Grace has passed since the last
//     confirmation, so that the gate sees what was freed before it is
//     sized again; or, for an admission whose holder does not confirm,
//     until Timeout has passed since its revocation. Its slot is still
//     held until its Done.
//
// # Giving way by deadline
//
// A waiting request has a deadline when its band has a
// [BandConfig.TTFTObjective] or, without one, when it carries an
// x-llm-d-slo-ttft-ms header ([ordering.SLOTTFTHeader]): its ReceivedTime
// plus that objective. With ByDeadline, when the waiting requests have
// deadlines, a decision revokes only what they need to start in time,
// and nothing while each has slack. It is a field, off in the zero value,
// rather than the behaviour whenever requests carry deadlines, so that a
// deployment whose clients already send x-llm-d-slo-ttft-ms keeps the
// eviction it tuned (a Grace that stands for the slack, say) until it
// asks for this one. The rule:
//
//   - The release rate μ a band's waiters see is the slots per second
//     the running admissions are expected to free: for each band, its
//     running admissions ÷ its mean service time S (a moving average of
//     the time its admissions that ended by themselves held their slots;
//     before one has, the age of its oldest running admission, at least
//     [PriorServiceTime]), less the arrival rate λ of each band above
//     (a moving average with a time constant of 2s), whose new requests
//     take the releases first.
//
//   - With the waiters' deadlines in order, d₁ ≤ d₂ ≤ … ≤ dₙ, behind the
//     a requests of the waiting bands above, the k-th is expected to
//     start (a+k)/μ from now and needs
//
//     need = max over k of ⌈a + k − μ·max(dₖ − Margin − now, 0)⌉, at least 0
//
//     slots freed at once to start by dₖ − Margin. A decision revokes the
//     largest need over the refused band and the waiting bands below it
//     that have victims below them (capped as above), victims coming from
//     below the lowest band that needs them.
//
//   - So nothing is revoked while every waiter has slack,
//     dₖ − now − (a+k)/μ ≥ Margin, and the bound kept is: while slots are
//     released at μ or faster, every waiter with a deadline starts by its
//     deadline less Margin, unless there are too few victims. A waiter
//     whose deadline has passed keeps its place in line but is never
//     revoked for. When no release comes, a timer decides again the
//     moment the first waiter's slack runs out.
//
//   - A band whose requests have deadlines holds back, with x = λ·S
//     (by Little's law what its arrivals keep running on average, a
//     Poisson count's mean), ⌊max(x, x + 2√x − ν·W)⌋ admissions: what its
//     arrivals keep running at their peaks, two standard deviations above
//     the mean, less the slots the bands below it are expected to release
//     while one of its requests may wait — ν their running admissions ÷
//     their mean service times, W the time from a request's enqueue to
//     its deadline (as last seen) less Margin — but never less than the
//     mean. A band below it does not start while the slots left free (the
//     pool's size taken as the admissions in flight at the gate's last
//     refusal) would be fewer than what such bands hold back and do not
//     hold, running or waiting — unless it has deadlines of its own that
//     need the slot (a need, as above, of at least 1). Where the bands
//     below release slots often (short requests), the mean is held back;
//     where they seldom do (long generations), the peaks, which would
//     otherwise be revoked for, late in a burst, from requests that have
//     decoded for long. And when λ·S + √(λ·S) of the bands down to a band
//     with deadlines fill the pool, that band needs every slot — its
//     queue would not drain, and slack spent now is missing at the next
//     peak — so its decision frees a slot for each of its waiters.
//
//   - The victims are those that have produced no output yet (no
//     [Admission.FirstToken] reported) and, among those or when there is
//     none, the one dispatched last — the least work lost — from any band
//     below min(p, Below), the lowest band's on a tie.
//
// Waiters without a deadline count as behind those with one (as the
// slo-deadline ordering serves them); a refused band none of whose
// waiters has a deadline is sized by its waiting requests, as above. A
// decision weighs the deadlines of at most 1,024 waiters of a band, and
// costs a sort of them and a walk of the victims' running admissions.
//
// A revoked admission's holder learns of it from [Admission.Revoked], stops
// the request, and confirms with [Admission.Done]: the slot returns once,
// then. Its outcome is [OutcomeEvictedPriority] (evicted-priority), which
// the Observer hears as a second event for the request, after its
// dispatch, and [Admission.Err] returns.
type Eviction struct {
	// Below bounds the victims' bands: only admissions of bands of
	// priority below Below are revoked (llm-d's sheddable filter at 0,
	// the default, the zero value). Bands at or above 0 are then never
	// revoked; a larger Below makes more bands sheddable.
	Below int
	// MaxPerDecision caps the revocations of one decision, bounding the
	// damage of a misjudged footprint (llm-d
	// MaxRevocationsPerDecision; 0 means its default, 2).
	MaxPerDecision int
	// Grace is how long after the last confirmation the next decision
	// waits: the time the gate takes to see a slot that came back (llm-d
	// EvictionConfirmationGrace). 0 means the gate's own [gate.LagGate.Lag]
	// when it reports one, and none otherwise: a gate that counts its
	// slots (MaxInFlight, a concurrency limit) sees a Done at once. A
	// negative value means none.
	Grace time.Duration
	// Timeout is how long a revocation that is not confirmed holds the
	// next decision back (llm-d EvictionConfirmationTimeout; 0 means its
	// default, 10s).
	Timeout time.Duration
	// ByDeadline turns on giving way by deadline (see "Giving way by
	// deadline", above): revocations sized to what the waiting requests'
	// deadlines need, victims without output first, and slots held back
	// for a band with deadlines. Without it a decision is sized by the
	// waiting requests, as llm-d-router's is, deadlines or not.
	ByDeadline bool
	// Margin is how long before its deadline a waiting request must
	// start (see "Giving way by deadline", above): the time from the start
	// to the first token — the model server's prefill — and a revocation's
	// confirmation come after it. 0 means [DefaultDeadlineMargin], 150ms.
	// A larger margin spends less of each waiter's slack waiting for
	// releases: for a band whose bursts nearly fill the pool, slack spent
	// now is missing at the next peak (examples/giveway, stronger
	// bursts); a margin as long as the objective revokes for every waiter
	// at once, as without deadlines.
	Margin time.Duration
	// GuaranteesIgnoreBelow lets a band's guarantee
	// ([BandConfig.Guarantee]) be taken back from any band below it.
	// By default, with Eviction set, a guarantee is taken back only from
	// the bands below Below, as eviction's victims are: a band Below
	// keeps out of eviction is safe from guarantees too. (Without
	// Eviction there is no Below, and a guarantee is taken back from any
	// band below it.)
	GuaranteesIgnoreBelow bool
}

// Defaults of [Eviction], llm-d-router's.
const (
	// DefaultMaxRevocationsPerDecision is [Eviction.MaxPerDecision]'s
	// default.
	DefaultMaxRevocationsPerDecision = 2
	// DefaultRevocationTimeout is [Eviction.Timeout]'s default.
	DefaultRevocationTimeout = 10 * time.Second
)

// RevocationStep is what happened to a revocation; see [Revocation].
type RevocationStep uint8

const (
	// RevocationIssued: an admission was revoked; its holder was told.
	RevocationIssued RevocationStep = iota + 1
	// RevocationConfirmed: the holder of a revoked admission called Done
	// before its timeout (llm-d's outcome "confirmed").
	RevocationConfirmed
	// RevocationTimedOut: the holder did not call Done within
	// [Eviction.Timeout]; the next decision no longer waits for it
	// (llm-d's outcome "timed_out"). Its slot returns at its Done.
	RevocationTimedOut
)

// String returns the step's name: "issued", or llm-d-router's outcome label
// of flow_control_revocations_total, "confirmed" or "timed_out".
func (s RevocationStep) String() string {
	switch s {
	case RevocationIssued:
		return "issued"
	case RevocationConfirmed:
		return "confirmed"
	case RevocationTimedOut:
		return "timed_out"
	}
	return "RevocationStep(" + strconv.Itoa(int(s)) + ")"
}

// Revocation reports one step of a revocation to [Config.Revocations]:
// each revoked admission is reported once issued, and once confirmed or
// timed out, never both. Steps are reported after the controller's lock is
// released, by the goroutine whose event took them, so the confirmation of
// an admission whose holder stops at once may be reported, on another
// goroutine, before its issue: count the steps, do not sequence them.
type Revocation struct {
	Step RevocationStep
	// Victim is the revoked admission's effective key.
	Victim FlowKey
	// Requested is the key its request asked for.
	Requested FlowKey
	// For is the priority of the band it was revoked for.
	For int
	// Outcome is the victim's outcome: [OutcomeEvictedPriority] for
	// eviction, [OutcomeEvicted] when a band took back its guaranteed
	// share ([BandConfig.Guarantee]).
	Outcome Outcome
	// Waited is, for a confirmation or a timeout, the time since the
	// revocation was issued; 0 when issued.
	Waited time.Duration
	// Target is, when issued, what the decision set out to free, in the
	// gate's saturation units (llm-d flow_control_reclaim_target).
	Target float64
	// Pending is what revocations issued and not yet seen by the gate
	// free, in saturation units, once this step is counted (llm-d
	// flow_control_pending_reclaim): each counts the mean footprint at
	// its decision until its grace after confirmation, or its timeout,
	// has passed.
	Pending float64
	// Tag is the victim's [Request.Tag].
	Tag any
}

// ErrEvicted and ErrEvictedPriority are the sentinel errors of
// [OutcomeEvicted] and [OutcomeEvictedPriority].
var (
	ErrEvicted         = errors.New("flowcontrol: evicted")
	ErrEvictedPriority = errors.New("flowcontrol: evicted-priority")
)

// closedChan is what Revoked returns for an admission revoked before it
// was asked.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// lockTracked returns a's lease, with the controller's lock held, when a
// may be revoked; nil, and the lock not taken, otherwise.
func (a *Admission) lockTracked() *lease {
	l := a.lease.tracked()
	if l != nil {
		a.c.mu.Lock()
	}
	return l
}

// Revoked returns a channel that is closed when the admission is revoked
// (see [Eviction] and [BandConfig.Guarantee]). Its holder should then stop
// the request — cancel the call to the model server — and call Done, which
// confirms the revocation and returns the slot. It returns nil, a channel
// that never closes, for an admission that can never be revoked: the
// controller evicts nothing and guarantees no share, the admission's band
// is not one eviction takes victims from, or Done was called. It allocates
// the channel at its first call; later calls return the same channel.
func (a *Admission) Revoked() <-chan struct{} {
	if l := a.lease.tracked(); l == nil || !a.c.reclaim.revocable(l.band) {
		return nil
	}
	l := a.lockTracked()
	defer a.c.mu.Unlock()
	switch {
	case l.ch != nil:
	case l.reason != OutcomeDispatched:
		return closedChan // revoked before anyone asked
	case l.state == leaseEnded:
		return nil // Done: it can no longer be revoked
	default:
		l.ch = make(chan struct{})
	}
	return l.ch
}

// Err returns nil while the admission may run, and a [*RejectionError]
// once it was revoked: its Outcome is [OutcomeEvictedPriority] or
// [OutcomeEvicted], its RetryAfter when the request may come back (1s
// while its band has room to queue it, the band's next promise when it is
// full: see the package doc's Retry-After section), and its QueueTime the
// admission's. A Done before the revocation keeps it nil.
func (a *Admission) Err() error {
	l := a.lockTracked()
	if l == nil {
		return nil
	}
	defer a.c.mu.Unlock()
	if l.reason == OutcomeDispatched {
		return nil // not revoked
	}
	return &RejectionError{
		Outcome:    l.reason,
		Requested:  a.requested,
		Effective:  a.Effective(),
		RetryAfter: l.retryAfter,
		QueueTime:  a.queueTime,
		limit:      limitRevoked,
		limitVal:   int64(l.forPriority),
	}
}

// PendingReclaim returns what revocations issued and not yet seen by the
// gate free, in the gate's saturation units (llm-d-router's
// flow_control_pending_reclaim), as [Revocation.Pending] reports it at
// each step, but now: a grace that has passed since the last step is
// counted as over. It is 0 for a controller that neither evicts nor
// guarantees. It takes the controller's lock briefly, as InFlight does.
func (c *FlowController) PendingReclaim() float64 {
	c.mu.Lock()
	defer c.unlock()
	r := c.reclaim
	if r == nil {
		return 0
	}
	if r.cooling > 0 && c.sinceEpoch(time.Time{}) >= r.coolUntil {
		r.pending = max(r.pending-r.cooling, 0)
		r.cooling = 0
	}
	return r.pending
}

// checkEviction validates cfg.Eviction and the bands' guarantees.
func checkEviction(e *Eviction) error {
	if e == nil {
		return nil
	}
	if e.MaxPerDecision < 0 {
		return configError("Eviction.MaxPerDecision", e.MaxPerDecision, "negative")
	}
	if e.Timeout < 0 {
		return configError("Eviction.Timeout", e.Timeout, "negative")
	}
	if e.Margin < 0 {
		return configError("Eviction.Margin", e.Margin, "negative")
	}
	return nil
}
