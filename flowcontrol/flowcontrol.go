// Package flowcontrol is the admission gate a router puts in front of its
// model servers: a [FlowController] queues requests in priority bands, keeps
// one queue per flow (tenant) inside each band, and dispatches them one at a
// time through a [Gate] — strictly by priority across bands, by the band's
// [Fairness] policy among its flows, and by its ordering policy within a
// flow — reporting for each request which band really handled it.
//
// # Outcomes
//
// [FlowController.EnqueueAndWait] blocks until exactly one outcome;
// [FlowController.Submit] is its non-blocking form, which hands the same
// outcome to a callback. An outcome's String is its dropped reason, the
// value of the x-llm-d-request-dropped-reason header
// ([DroppedReasonHeader]); see [Outcome] for the naming rule.
//
//	outcome                          error wraps                  HTTP
//	OutcomeDispatched                (none)                       200
//	OutcomeRejectedSaturated         ErrRejectedSaturated         429 + RetryAfter (413 with ErrTooLarge)
//	OutcomeEvictedQueuePressure      ErrEvictedQueuePressure      429 + RetryAfter
//	OutcomeRejectedTTLExpired        ErrRejectedTTLExpired        429
//	OutcomeRejectedContextCancelled  ErrRejectedContextCancelled  503
//	OutcomeRejectedShuttingDown      ErrRejectedShuttingDown      503
//	OutcomeRejectedNoEndpoints       ErrRejectedNoEndpoints       503
//
// # Bands and fallback
//
// A band has a priority (higher is more important; negative bands are
// sheddable), request, byte and cost capacities bounding what waits in it, a
// queue-wait TTL, an ordering policy and a fairness policy. A request asks
// for a priority; if that band is not provisioned it is queued in the
// fallback band ([Config.FallbackPriority], 0 unless set) — or, with
// [Config.NeverPromote], in the nearest band at or below its priority, and
// rejected for capacity if there is none. The band is chosen once, at
// enqueue: the admission reports both the requested and the effective key,
// and provisioning the requested band later changes neither.
//
// Capacities bound waiting requests. A request enters its band only if the
// band, its flow ([BandConfig.FlowRequestCapacity]) and the controller,
// with it added, stay within their request, byte and cost capacities; this
// is checked at enqueue, also for a request that would start at once, so a
// bounded capacity of 0 closes a band. A request larger than a byte or cost
// capacity can never fit: it is refused with [ErrTooLarge] and no
// Retry-After. When a band or the controller is full, a request whose flow
// holds less than its share may displace another flow's newest request
// instead of being refused (fair admission; see [Config.NoDisplacement]).
//
// # Retry-After
//
// [RejectionError.RetryAfter] is set on OutcomeRejectedSaturated and
// OutcomeEvictedQueuePressure once the scope that refused the request (its
// band, or the controller's capacities) has a measured drain rate: the
// dispatches from its queue per second of busy time — time with waiters,
// so an idle stretch changes nothing — as a moving average. Each refusal is
// promised the moment one more place should have freed after the moment
// promised to the refusal before it, one drain interval (1/rate) apart and
// never sooner than one interval from now, so refused clients come back
// spread over the time the scope needs rather than all at once; when the
// band and the controller both refuse, the longer wins. Whole seconds,
// rounded up, between 1s and 30s. A simulation with clients that honour it
// chose this design (examples/retryafter).
//
// # Dispatch and strict priority
//
// Dispatch is driven by events — an enqueue, a Done, an expiry or
// cancellation, and [FlowController.Nudge] — never by a ticker. On each event
// the controller asks the gate for a slot for the highest waiting band, and
// repeats until the gate refuses or nothing waits. Within a band, the
// band's fairness policy picks the flow, and the ordering policy the flow's
// head.
//
// Priority is strict: while the highest waiting band cannot dispatch, nothing
// below it does, even if the gate would take a lower band's request. There is
// no aging, so a steady stream into a higher band starves every band below
// it. For example, with bands 10, 0 and -5 and MaxInFlight(2), two requests
// in flight, H1 waiting in band 10, N1 and N2 in band 0, and S1 in band -5:
//
//   - a Done starts H1; the next Done starts N1, then N2, then S1;
//   - but if a new band-10 request arrives before each Done, every slot goes
//     to band 10, and N1, N2 and S1 wait until band 10 is empty — they leave
//     earlier only by their TTL (rejected-ttl-expired) or their context;
//   - and with a per-band gate that refuses band 10 (its pool is full) while
//     it would take band 0, N1 still waits: nothing overtakes H1.
//
// Give the lower bands TTLs (or bounded capacities) so that starved callers
// learn it quickly rather than waiting indefinitely.
//
// # TTL, cancellation and the grant race
//
// A queued request's TTL is the smallest of its band's TTL, [Config.DefaultTTL],
// its own [Request.TTL] and the time left until its context's deadline; it is
// fixed at enqueue. The request expires at exactly that TTL. A context
// deadline is an expiry, not a cancellation: the outcome is OutcomeRejectedTTLExpired and
// the error matches both ErrRejectedTTLExpired and context.DeadlineExceeded. An explicit
// cancellation of the context is OutcomeRejectedContextCancelled and matches ErrRejectedContextCancelled
// and context.Canceled. A context already done at the call ends it at once.
//
// Expired and cancelled requests leave their queue at once, so lengths, byte
// sizes, capacity checks and snapshots are exact at every moment. A grant and
// a cancellation (or expiry) of the same request are settled under the
// controller's lock: whichever reaches it first decides. A request granted
// before its cancellation was processed is dispatched — the caller gets the
// admission, even if its context is done by then, and must call Done.
//
// # Reading capacity
//
// A FlowController is a [capacity.Reader]: CapacitySnapshot reads counters
// that move with every request, without the dispatch lock and without
// allocating, so response-time readers (such as the headroom header) never
// wait on dispatch.
//
// # Shutdown
//
// [FlowController.Close] ends every queued request with
// OutcomeRejectedShuttingDown and returns once their EnqueueAndWait calls have
// returned. Shutdown wins: once Close has begun, every call ends with
// OutcomeRejectedShuttingDown, also one whose context is already done. The
// controller runs no goroutines of its own: every goroutine in it is a
// caller's, a timer's of its [Clock], or a context's AfterFunc.
//
// # Time
//
// Every reading of time — queue times, TTLs, expiry timers, the dispatch
// rates behind Retry-After — goes through one [Clock], the real one unless
// [Config.Clock] sets another. Nothing in the controller reads time.Now
// behind its back, so a simulation runs the same code on a virtual clock.
//
// # User code that panics
//
// A [Gate], an ordering [ordering.Policy], an [Config.Observer] or a
// [FlowController.Submit] callback may panic; the controller stays
// consistent and the panic reaches the goroutine that called into the
// controller, as net/http expects of a handler:
//
//   - Policy.Key runs before the controller's lock is taken, on the caller's
//     goroutine; the request is not queued and the panic leaves the call.
//   - Gate.TryAcquire and Gate.Release run under the lock, which is
//     released as the panic unwinds. A TryAcquire that panics is a refusal:
//     the head stays queued and dispatch resumes at the next event. The
//     request whose call triggered that dispatch is withdrawn first (its
//     slot returned if the loop had already dispatched it), so nothing
//     waits for a caller that is gone.
//   - An Observer that panics on a dispatch has the admission released
//     before the panic goes on, so no slot leaks; the caller of
//     EnqueueAndWait gets the panic instead of the admission, and a Submit
//     callback is not called for it.
//   - Outcomes decided in the same event for other requests are still
//     delivered, each to its own caller.
package flowcontrol

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/ordering"
)

// FlowController admits requests into priority bands and dispatches them
// through a gate. Create one with [New]; most callers need only
// [FlowController.EnqueueAndWait] and [Admission.Done]. A FlowController is
// safe for concurrent use.
type FlowController struct {
	// mu serializes every change to the queues, the counters below it and
	// the gate, and the dispatch that follows each change. Gate, queue and
	// Clock methods are called with mu held; policies, the Observer and
	// Submit callbacks only after it is released. Every critical section
	// ends in unlock, which delivers the outcomes it decided.
	mu sync.Mutex
	// nonEmpty has bit i set while bands.desc[i] has waiters, so finding
	// the highest waiting band costs one word per 64 bands.
	nonEmpty       []uint64
	queuedRequests int64 // in all bands
	queuedBytes    int64
	queuedCost     int64
	inFlight       int // admissions not yet Done
	closed         bool
	// decided lists, in order, the waiters whose outcome was settled in
	// the current critical section; unlock delivers them.
	decided, decidedTail *waiter
	// enqueuing is the waiter whose own enqueue is dispatching: its outcome
	// is returned by that call, not delivered.
	enqueuing *waiter
	// parked lists outcomes settled by a Done of an admission whose Submit
	// callback is still running: the goroutine running it delivers them
	// when the callback returns, so a callback that calls Done does not
	// deliver, and recurse, from inside itself.
	parked, parkedTail *waiter
	// drain measures all bands together, for global-capacity rejections.
	drain drainMeter
	// slab holds fresh Admissions for immediate dispatches; see
	// admissionSlab.
	slab []Admission
	// meters holds fresh meters for the admissions of a MeteredGate, by
	// slabs like slab; they hold no pointers, so a slab costs the
	// collector nothing to scan.
	meters []meter

	// closing is set as Close begins, before it takes mu, so that shutdown
	// wins over every outcome decided after that.
	closing atomic.Bool
	// refusals counts the heads the gate refused; written under mu, read
	// without it.
	refusals atomic.Uint64
	// bands is replaced under mu and read without it.
	bands atomic.Pointer[bandSet]
	// waiters counts EnqueueAndWait calls that queued and have not
	// returned; Close waits for it.
	waiters sync.WaitGroup

	// emptySince is when the gate, an EndpointGate, was last seen to
	// report no endpoints after reporting some (the zero Time while it
	// reports endpoints); emptyTimer, if set, is the pending check that
	// drops requests that waited NoEndpointsTTL with no endpoints.
	emptySince time.Time
	emptyTimer Timer

	// Fixed by New.
	gate            Gate
	metered         MeteredGate    // gate, when it is one
	firstTokens     FirstTokenGate // gate, when it is one
	endpoints       EndpointGate   // gate, when it is one
	noEndpointsTTL  time.Duration
	epoch           time.Time // the clock's reading at New, for meter.start
	clock           Clock
	fallback        *band // nil with NeverPromote
	neverPromote    bool
	requestCapacity capacity.Limit
	byteCapacity    capacity.Limit
	costCapacity    capacity.Limit
	noDisplacement  bool
	defaultTTL      time.Duration
	observer        func(Event)
}

// waiter is one queued request. A waiter is reused (see waiters): gen
// survives each use, the rest is the use's.
type waiter struct {
	waiterUse
	// gen counts the times the waiter left a queue, so that a timer or a
	// context's AfterFunc of an earlier use, which may fire late, finds it
	// moved on and does nothing. Guarded by the controller's mu, and never
	// written without it.
	gen uint64
}

// waiterUse is the state of one use of a waiter.
//
// Its first 32 bytes, which never straddle two cache lines (see
// TestHotFieldsShareALine), hold what the controller and the schedulers
// touch of a waiter that is not the one arriving or leaving — the tail a
// newcomer links to, the next head a dispatch uncovers — so that in a band
// of thousands of flows, whose waiters are cold in cache, that costs one
// miss. The key, which only a heap band's global-strict compares, follows.
type waiterUse struct {
	// The flow's waiters in arrival order (see Flow.oldest); guarded by
	// the controller's mu.
	older, newer *waiter
	// Fixed before the waiter is queued.
	cost int64        // the request's cost, at least 1
	seq  uint64       // arrival in its band, for the single-queue order of ties; set under mu
	key  ordering.Key // derived by the band's policy, outside the lock

	item ordering.Item // item.Value is the waiter
	band *band
	ctx  context.Context

	// How the outcome is delivered: ready is closed for an EnqueueAndWait
	// call, which then finishes on its own goroutine; done is called for a
	// Submit.
	ready chan struct{}
	done  func(*Admission, error)
	// stopCtx stops Submit's watch on ctx; timer is the TTL expiry, set
	// expireAfter after enqueue unless the context's deadline comes first.
	// Both are nil when there is none.
	stopCtx     func() bool
	timer       Timer
	expireAfter time.Duration

	// Guarded by the controller's mu. Once queued is false, outcome is
	// final and is read by whoever delivers it.
	queued     bool
	byContext  bool // the context ended the wait (expiry by deadline, or cancellation)
	withdrawn  bool // its caller panicked out of its enqueue: deliver nothing
	planned    bool // chosen for displacement by the admission being planned
	outcome    Outcome
	retryAfter time.Duration // for a displaced request
	flow       *Flow
	next       *waiter // in the controller's decided list

	requested FlowKey
	queueTime time.Duration // set for every outcome
	meter     *meter        // for a MeteredGate, set on dispatch
}

// waiters recycles waiters: one is taken for each request that must queue
// and put back once its outcome is delivered, so a queued request costs no
// allocation in the steady state. A waiter never returns here while anything
// but a gen-checked late timer can still reach it.
var waiters = sync.Pool{New: func() any { return new(waiter) }}

// recycle puts w back for reuse once its outcome is delivered.
func recycle(w *waiter) {
	w.waiterUse = waiterUse{}
	waiters.Put(w)
}

// New returns a controller for cfg. A bad configuration fails with an error
// naming the field and its value: no bands, duplicate priorities, an unknown
// policy name, a policy on a queue without the capability it needs, a
// negative capacity or TTL, a negative [MaxInFlight] limit, a MaxInFlight
// gate used by another controller, or a fallback band that is not
// configured.
func New(cfg Config) (*FlowController, error) {
	if len(cfg.Bands) == 0 {
		return nil, configError("Bands", "[]", "no bands configured")
	}
	if err := checkLimit("RequestCapacity", cfg.RequestCapacity); err != nil {
		return nil, err
	}
	if err := checkLimit("ByteCapacity", cfg.ByteCapacity); err != nil {
		return nil, err
	}
	if err := checkLimit("CostCapacity", cfg.CostCapacity); err != nil {
		return nil, err
	}
	if err := checkTTL("DefaultTTL", cfg.DefaultTTL); err != nil {
		return nil, err
	}
	if err := checkTTL("NoEndpointsTTL", cfg.NoEndpointsTTL); err != nil {
		return nil, err
	}
	if g, ok := cfg.Gate.(*maxInFlight); ok && g.limit < 0 {
		return nil, configError("Gate", fmt.Sprintf("MaxInFlight(%d)", g.limit), "negative limit")
	}
	desc := make([]*band, 0, len(cfg.Bands))
	first := make(map[int]int, len(cfg.Bands))
	for i, bc := range cfg.Bands {
		name := fmt.Sprintf("Bands[%d]", i)
		if j, dup := first[bc.Priority]; dup {
			return nil, configError(name+".Priority", bc.Priority, fmt.Sprintf("duplicates Bands[%d].Priority", j))
		}
		first[bc.Priority] = i
		p, err := checkBand(name, bc)
		if err != nil {
			return nil, err
		}
		b, err := newBand(name, bc, p)
		if err != nil {
			return nil, err
		}
		desc = append(desc, b)
	}
	slices.SortFunc(desc, func(a, b *band) int { return cmp.Compare(b.priority, a.priority) })

	c := &FlowController{
		gate:            cfg.Gate,
		clock:           cfg.Clock,
		neverPromote:    cfg.NeverPromote,
		requestCapacity: cfg.RequestCapacity,
		byteCapacity:    cfg.ByteCapacity,
		costCapacity:    cfg.CostCapacity,
		noDisplacement:  cfg.NoDisplacement,
		defaultTTL:      cfg.DefaultTTL,
		noEndpointsTTL:  cfg.NoEndpointsTTL,
		observer:        cfg.Observer,
	}
	if c.gate == nil {
		c.gate = openGate{}
	}
	c.metered, _ = c.gate.(MeteredGate)
	c.firstTokens, _ = c.gate.(FirstTokenGate)
	c.endpoints, _ = c.gate.(EndpointGate)
	if c.clock == nil {
		c.clock = RealClock{}
	}
	c.epoch = c.clock.Now()
	c.setBands(&bandSet{desc: desc})
	set := c.bands.Load()
	if cfg.NeverPromote {
		if cfg.FallbackPriority != 0 {
			return nil, configError("FallbackPriority", cfg.FallbackPriority, "has no effect with NeverPromote; leave it 0")
		}
	} else if c.fallback = set.lookup(cfg.FallbackPriority); c.fallback == nil {
		return nil, configError("FallbackPriority", cfg.FallbackPriority, "no band in Bands has this priority")
	}
	if g, ok := c.gate.(*maxInFlight); ok && !g.owner.CompareAndSwap(nil, c) {
		return nil, configError("Gate", fmt.Sprintf("MaxInFlight(%d)", g.limit), "already used by another controller")
	}
	if g, ok := c.gate.(BoundGate); ok {
		if err := g.Bind(c); err != nil {
			return nil, fmt.Errorf("flowcontrol: Gate %T: %w", g, err)
		}
	}
	return c, nil
}

// newBand builds a band from a validated configuration.
func newBand(name string, bc BandConfig, p ordering.Policy) (*band, error) {
	q, err := newQueue(name, p, bc.Queue)
	if err != nil {
		return nil, err
	}
	fair := bc.Fairness
	if fair == nil {
		fair = GlobalStrict()
	}
	b := &band{
		priority: bc.Priority,
		policy:   q.Policy(),
		kind:     q.Kind(),
		fairness: fair,
		sched:    fair.NewScheduler(),
		flows:    make(map[string]*Flow),
	}
	if b.kind != ordering.QueueFIFO {
		b.free = append(b.free, &Flow{band: b, queue: q})
	}
	b.limits.Store(newBandLimits(bc))
	return b, nil
}

// setBands publishes set and re-derives the band indexes and the non-empty
// bitset from it. Called with mu held, or before c is shared.
func (c *FlowController) setBands(set *bandSet) {
	c.nonEmpty = make([]uint64, (len(set.desc)+63)/64)
	for i, b := range set.desc {
		b.index = i
		if b.queued > 0 {
			c.nonEmpty[i/64] |= 1 << (i % 64)
		}
	}
	c.bands.Store(set)
}

// resolve returns the band a request for priority p is queued in, or nil if
// none may take it. It reads only what New fixed and the published band
// set, so it needs no lock.
func (c *FlowController) resolve(set *bandSet, p int) *band {
	i, found := set.search(p)
	switch {
	case found:
		return set.desc[i]
	case !c.neverPromote:
		return c.fallback
	case i < len(set.desc):
		return set.desc[i] // the highest band below p
	}
	return nil
}

// EnqueueAndWait asks for req to be admitted and blocks until it is
// dispatched, rejected, expired, cancelled or shut down. On dispatch it
// returns an [*Admission] whose Done the caller must call when the request
// has finished; otherwise it returns a [*RejectionError] and a nil
// admission.
//
// When there is room — the band fits the request, no band at or above it is
// waiting and the gate admits it — the request starts at once without being
// queued. When its band or the controller is full it is rejected at once.
// While it waits, the calling goroutine is parked; [FlowController.Submit]
// admits without holding a goroutine.
func (c *FlowController) EnqueueAndWait(ctx context.Context, req Request) (*Admission, error) {
	adm, rej, w, gen := c.admit(ctx, req, nil)
	if w == nil {
		return c.finish(adm, rej)
	}
	defer c.waiters.Done()
	select {
	case <-w.ready:
	case <-ctx.Done():
		c.abandon(w, gen, contextOutcome(ctx), true)
		// Whoever settled the outcome — abandon, or an event just before
		// it — closes ready as it delivers; w is reused only after that.
		<-w.ready
	}
	// Whoever settled the outcome did so under mu, before closing ready: it
	// is final and visible here.
	adm, rej = c.result(w)
	recycle(w)
	return c.finish(adm, rej)
}

// Submit is the non-blocking form of [FlowController.EnqueueAndWait]: it
// asks for req to be admitted and returns at once, and done is called
// exactly once with what EnqueueAndWait would have returned — an admission
// whose Done the callee must call, or a [*RejectionError].
//
// done runs outside the controller's lock, after the Observer, on the
// goroutine that settles the outcome: within Submit when the request starts
// or is rejected at once; otherwise on the goroutine of the event that
// decides it — another request's [Admission.Done], a [FlowController.Nudge],
// the clock's timer for an expiry, the context's AfterFunc for a
// cancellation, or [FlowController.Close]. It may call back into the
// controller, but it delays that goroutine, so it should be short; the
// outcomes that a Done called from inside it settles are delivered when it
// returns, by the goroutine that ran it, so a chain of callbacks that each
// call Done runs in constant stack depth. A queued
// request costs no goroutine: an event loop can keep millions waiting. If
// the Observer panics on the dispatch, the admission is released and done
// is not called; if done itself panics, it owns the admission it was
// given.
//
// Submit panics if done is nil.
func (c *FlowController) Submit(ctx context.Context, req Request, done func(*Admission, error)) {
	if done == nil {
		panic("flowcontrol: Submit with a nil done function")
	}
	adm, rej, w, _ := c.admit(ctx, req, done)
	if w != nil {
		return // queued: done runs when the outcome is settled
	}
	c.report(adm, rej)
	if rej != nil {
		done(nil, rej)
		return
	}
	done(adm, nil)
}

// admit runs admission for req. It returns the admission or the rejection
// when the request is decided at once, or the waiter it queued and its
// generation. done is nil for EnqueueAndWait.
//
// The common case, room to start at once, takes the lock once and derives
// no ordering key. A request that must wait has its key derived outside the
// lock — Policy.Key is user code, which may be slow or panic — and then
// takes the lock again, where every check is made afresh.
func (c *FlowController) admit(ctx context.Context, req Request, done func(*Admission, error)) (*Admission, *RejectionError, *waiter, uint64) {
	if c.closing.Load() {
		return nil, c.shutdownRejection(req.Key), nil, 0
	}
	if err := ctx.Err(); err != nil {
		// The caller is gone already: queueing it would only hold a slot.
		rej := &RejectionError{Requested: req.Key}
		rej.Effective = effectiveKey(req.Key, c.resolve(c.bands.Load(), req.Key.Priority))
		rej.setContext(ctx, err)
		return nil, rej, nil, 0
	}
	b := c.resolve(c.bands.Load(), req.Key.Priority)
	if b == nil {
		return nil, &RejectionError{Outcome: OutcomeRejectedSaturated, Requested: req.Key, Effective: req.Key, limit: limitNoBand}, nil, 0
	}
	size := max(req.ByteSize, 0)
	cost := req.Cost
	if cost <= 0 {
		cost = 1
	}
	// A band with waiters cannot start a request at once: skip the first
	// attempt, and its lock, under contention. (A stale read only moves
	// the decision to enqueue, which makes every check again.)
	if b.queuedRequests.Load() == 0 {
		if adm, rej := c.startAtOnce(b, req.Key, size, cost); adm != nil {
			return adm, nil, nil, 0
		} else if rej != nil {
			return nil, rej, nil, 0
		}
	}

	now := c.clock.Now()
	w := c.newWaiter(ctx, req, b, size, now)
	w.done, w.cost = done, cost
	w.key = b.policy.Key(&w.item)
	adm, rej, gen := c.enqueue(w, now)
	if adm != nil || rej != nil {
		recycle(w)
		return adm, rej, nil, 0
	}
	return nil, nil, w, gen
}

// startAtOnce admits a request into band b if it fits and can start now,
// or rejects it if it does not fit and displacing others cannot make room.
// It returns nil, nil when the request must wait, or when displacement may
// let it in: enqueue decides that.
func (c *FlowController) startAtOnce(b *band, key FlowKey, size, cost int64) (*Admission, *RejectionError) {
	c.mu.Lock()
	// Nothing is decided here, so there is nothing for unlock to deliver.
	defer c.mu.Unlock()
	if c.closing.Load() {
		return nil, c.shutdownRejection(key)
	}
	lim := b.limits.Load()
	var f *Flow
	if lim.flowRequests.IsBounded() {
		f = b.flows[key.ID] // only a per-flow capacity needs the flow
	}
	if !c.fitsAll(b, lim, f, size, cost) {
		r := c.refusal(b, lim, f, size, cost, nil)
		if c.noDisplacement || !r.displaceable() {
			return nil, c.capacityRejection(b, key, r)
		}
		return nil, nil
	}
	if !c.isFirst(b) {
		return nil, nil
	}
	if !c.gate.TryAcquire(b.priority) {
		c.refusals.Add(1)
		return nil, nil
	}
	c.inFlight++
	a := c.newAdmission()
	*a = Admission{c: c, requested: key, effective: b.priority}
	if c.metered != nil {
		a.meter = c.took(b.priority, cost, time.Time{})
	}
	return a, nil
}

// newWaiter prepares the waiter of a request that must queue in band b,
// outside the lock: its TTL, its times and its item.
func (c *FlowController) newWaiter(ctx context.Context, req Request, b *band, size int64, now time.Time) *waiter {
	ttl := minTTL(minTTL(b.limits.Load().ttl, c.defaultTTL), req.TTL)
	expireAfter := ttl
	if deadline, ok := ctx.Deadline(); ok {
		if left := deadline.Sub(now); ttl == 0 || left <= ttl {
			// The context's own timer expires the request; a timer of ours
			// at the same instant would race it.
			ttl, expireAfter = max(left, 1), 0
		}
	}
	received := req.ReceivedTime
	if received.IsZero() {
		received = now
	}
	w := waiters.Get().(*waiter)
	w.band, w.ctx, w.expireAfter, w.requested = b, ctx, expireAfter, req.Key
	w.item = ordering.Item{
		ReceivedTime: received,
		EnqueueTime:  now,
		Header:       req.Header,
		TTL:          ttl,
		ByteSize:     size,
		Value:        w,
	}
	return w
}

// enqueue queues w, unless it can start at once or no longer fits. When w
// was queued it returns nil, nil and w's generation, for the late timers of
// this use to check.
func (c *FlowController) enqueue(w *waiter, now time.Time) (*Admission, *RejectionError, uint64) {
	c.mu.Lock()
	defer c.unlock()
	b := w.band
	if c.closing.Load() {
		return nil, c.shutdownRejection(w.requested), 0
	}
	// now was read before the lock; events since may have been later.
	if t := c.clock.Now(); t.After(now) {
		now = t
	}
	if rej := c.makeRoom(w, now); rej != nil {
		return nil, rej, 0
	}
	first := c.isFirst(b)
	if first {
		if c.gate.TryAcquire(b.priority) {
			c.inFlight++
			a := c.newAdmission()
			*a = Admission{c: c, requested: w.requested, effective: b.priority}
			if c.metered != nil {
				a.meter = c.took(b.priority, w.cost, now)
			}
			return a, nil, 0
		}
		c.refusals.Add(1)
		if c.endpoints != nil {
			defer c.checkEndpoints(now) // once w is queued
		}
	}
	c.queue(w, now)
	if !first {
		// A band at or above this one waits: offer its head again, as on
		// every event. (When w was first, the gate has just refused it and
		// nothing else may go before it.)
		c.enqueuing = w
		defer func() {
			c.enqueuing = nil
			if r := recover(); r != nil {
				c.withdraw(w)
				panic(r)
			}
		}()
		c.dispatchLocked(now)
		if !w.queued {
			// Dispatched by its own enqueue.
			adm, _ := c.result(w)
			return adm, nil, 0
		}
	}
	gen := w.gen
	if w.expireAfter > 0 {
		w.timer = c.clock.AfterFunc(w.expireAfter, func() { c.abandon(w, gen, OutcomeRejectedTTLExpired, false) })
	}
	if w.done == nil {
		w.ready = make(chan struct{})
		c.waiters.Add(1)
	} else if w.ctx.Done() != nil {
		ctx := w.ctx
		w.stopCtx = context.AfterFunc(ctx, func() { c.abandon(w, gen, contextOutcome(ctx), true) })
	}
	return nil, nil, gen
}

// queue adds w to its flow's queue in its band at now. Called with mu held.
func (c *FlowController) queue(w *waiter, now time.Time) {
	b := w.band
	f, created := b.flow(w.requested.ID)
	w.flow = f
	w.seq = b.seq
	b.seq++
	if f.queue != nil {
		f.queue.AddKeyed(&w.item, w.key)
	}
	if f.newest != nil {
		f.newest.newer = w
	} else {
		f.oldest = w
	}
	w.older, w.newer, f.newest = f.newest, nil, w
	f.n++
	f.bytes += w.item.ByteSize
	f.cost += w.cost
	b.queued++
	b.bytes += w.item.ByteSize
	b.cost += w.cost
	c.queuedRequests++
	c.queuedBytes += w.item.ByteSize
	c.queuedCost += w.cost
	c.publish(b)
	if b.queued == 1 {
		b.drain.busy(now)
	}
	if c.queuedRequests == 1 {
		c.drain.busy(now)
	}
	w.queued = true
	switch {
	case created:
		b.sched.Add(f)
	case f.queue != nil && f.queue.Peek() == &w.item:
		b.sched.HeadChanged(f) // (in a FIFO band, a newcomer is never the head)
	}
}

// withdraw takes back w, whose caller is panicking out of its enqueue:
// out of its queue if it is still there, or its slot back to the gate if
// the dispatch that panicked had started it. Called with mu held.
func (c *FlowController) withdraw(w *waiter) {
	w.withdrawn = true
	if w.queued {
		c.unqueue(w, c.clock.Now())
		return
	}
	if w.outcome == OutcomeDispatched {
		// Its admission was never handed out: nobody else can end it.
		c.inFlight--
		if c.metered != nil {
			c.metered.Returned(Usage{Slot: Slot{Priority: w.band.priority, Cost: w.meter.cost}, Unused: true})
			return
		}
		c.gate.Release(w.band.priority)
	}
}

// isFirst reports whether no band at or above b has waiters, so that a
// request for b would be the head dispatch offers to the gate first. Called
// with mu held.
func (c *FlowController) isFirst(b *band) bool {
	top := c.firstNonEmpty()
	return top < 0 || top > b.index
}

// contextOutcome is the outcome of a wait that ctx ended: an expiry for a
// deadline, a cancellation otherwise.
func contextOutcome(ctx context.Context) Outcome {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return OutcomeRejectedTTLExpired
	}
	return OutcomeRejectedContextCancelled
}

// admissionSlab is how many Admissions one allocation provides to immediate
// dispatches. Allocating them one by one costs more than the rest of an
// immediate admission; a slab divides that cost by its size. Each Admission
// is still used for one request only. The price is memory: an Admission kept
// alive keeps its whole slab (2 KB) alive.
const admissionSlab = 32

// newAdmission returns an unused, zero Admission. Called with mu held.
func (c *FlowController) newAdmission() *Admission {
	if len(c.slab) == 0 {
		c.slab = make([]Admission, admissionSlab)
	}
	a := &c.slab[0]
	c.slab = c.slab[1:]
	return a
}

// admissionBatch is a slab of Admissions for the requests that waited,
// whose admissions are made outside the lock, as their outcome is
// delivered: in the goroutine of whoever delivers it, so the slab is taken
// from a sync.Pool, which keeps one per processor. One Admission fewer than
// admissionSlab leaves room for used within a 2 KB allocation.
type admissionBatch struct {
	used int
	a    [admissionSlab - 1]Admission
}

var admissionBatches = sync.Pool{New: func() any { return new(admissionBatch) }}

// newQueuedAdmission returns an unused, zero Admission, without the lock.
func newQueuedAdmission() *Admission {
	s := admissionBatches.Get().(*admissionBatch)
	a := &s.a[s.used]
	if s.used++; s.used < len(s.a) {
		admissionBatches.Put(s)
	}
	return a
}

// minTTL returns the smaller of two TTLs, where 0 or less means none.
func minTTL(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// effectiveKey is the key a request is handled under in band b, or the
// requested key when no band takes it.
func effectiveKey(requested FlowKey, b *band) FlowKey {
	if b == nil {
		return requested
	}
	return FlowKey{ID: requested.ID, Priority: b.priority}
}

// shutdownRejection is the rejection of a request for key after Close.
func (c *FlowController) shutdownRejection(key FlowKey) *RejectionError {
	return &RejectionError{
		Outcome:   OutcomeRejectedShuttingDown,
		Requested: key,
		Effective: effectiveKey(key, c.resolve(c.bands.Load(), key.Priority)),
	}
}

// setContext records the context's error, and its cause when that differs,
// and derives the outcome from them.
func (e *RejectionError) setContext(ctx context.Context, err error) {
	e.ctxErr = err
	if cause := context.Cause(ctx); cause != nil && cause != err {
		e.ctxCause = cause
	}
	if errors.Is(err, context.DeadlineExceeded) {
		e.Outcome = OutcomeRejectedTTLExpired
	} else {
		e.Outcome = OutcomeRejectedContextCancelled
	}
}

// publish mirrors b's counters into their atomic copies and the non-empty
// bitset. Called with mu held after every change to b's waiters.
func (c *FlowController) publish(b *band) {
	b.queuedRequests.Store(b.queued)
	b.queuedBytes.Store(b.bytes)
	b.queuedCost.Store(b.cost)
	bit := uint64(1) << (b.index % 64)
	if b.queued > 0 {
		c.nonEmpty[b.index/64] |= bit
	} else {
		c.nonEmpty[b.index/64] &^= bit
	}
}

// firstNonEmpty returns the index of the highest band with waiters, or -1.
// Called with mu held.
func (c *FlowController) firstNonEmpty() int {
	for i, word := range c.nonEmpty {
		if word != 0 {
			return i*64 + bits.TrailingZeros64(word)
		}
	}
	return -1
}

// dispatchLocked offers the head of the highest waiting band — of the flow
// its fairness policy picks — to the gate until the gate refuses or nothing
// waits. now is the time of the event, or the zero Time to read the clock
// on the first dispatch. Called with mu held.
func (c *FlowController) dispatchLocked(now time.Time) {
	if c.queuedRequests == 0 || c.closing.Load() {
		return // once Close has begun, the queued requests are its
	}
	desc := c.bands.Load().desc
	for {
		i := c.firstNonEmpty()
		if i < 0 {
			return
		}
		b := desc[i]
		if !c.gate.TryAcquire(b.priority) {
			c.refusals.Add(1)
			// Strict priority: nothing below a refused band starts.
			if c.endpoints != nil {
				c.checkEndpoints(now)
			}
			return
		}
		if c.endpoints != nil {
			c.emptySince = time.Time{} // a granted slot means endpoints
		}
		// The fairness policy picks only once there is a slot, so that
		// offers the gate refuses move none of its state.
		f := b.sched.Next()
		if now.IsZero() {
			now = c.clock.Now()
		}
		w := f.oldest
		if f.queue != nil {
			w = f.queue.PopHead().Value.(*waiter)
		}
		// Counted while the scopes are still busy with w, so that the
		// window w closes (if it empties a queue) includes it.
		b.drain.dispatched(now)
		c.drain.dispatched(now)
		c.left(w, now, true, true)
		c.inFlight++
		c.decide(w, OutcomeDispatched, now)
		if c.metered != nil {
			w.meter = c.took(b.priority, w.cost, now)
		}
	}
}

// unqueue takes w out of its flow's queue at now, other than by dispatch.
// Called with mu held.
func (c *FlowController) unqueue(w *waiter, now time.Time) {
	f := w.flow
	wasHead := f.head() == w
	if f.queue != nil {
		f.queue.Remove(&w.item)
	}
	c.left(w, now, false, wasHead)
}

// left books w's departure from its flow's queue at now, and tells the
// band's scheduler: served for a dispatch, or a new head when w was the
// head (wasHead) and left otherwise. Called with mu held.
func (c *FlowController) left(w *waiter, now time.Time, served, wasHead bool) {
	b, f := w.band, w.flow
	f.n--
	f.bytes -= w.item.ByteSize
	f.cost -= w.cost
	if w.older != nil {
		w.older.newer = w.newer
	} else {
		f.oldest = w.newer
	}
	if w.newer != nil {
		w.newer.older = w.older
	} else {
		f.newest = w.older
	}
	w.older, w.newer, w.flow = nil, nil, nil
	b.queued--
	b.bytes -= w.item.ByteSize
	b.cost -= w.cost
	c.queuedRequests--
	c.queuedBytes -= w.item.ByteSize
	c.queuedCost -= w.cost
	c.publish(b)
	if b.queued == 0 {
		b.drain.idle(now)
	}
	if c.queuedRequests == 0 {
		c.drain.idle(now)
	}
	if served {
		b.sched.Served(f, w.cost)
	}
	switch {
	case f.n == 0:
		b.sched.Remove(f)
		b.dropFlow(f)
	case wasHead && !served:
		b.sched.HeadChanged(f) // the flow offers another request now
	}
	w.queued = false
	w.gen++
	if w.timer != nil {
		w.timer.Stop()
	}
}

// decide settles w's outcome at now and lists it for delivery when mu is
// released. w has left its queue. Called with mu held.
func (c *FlowController) decide(w *waiter, o Outcome, now time.Time) {
	w.outcome = o
	w.queueTime = now.Sub(w.item.EnqueueTime)
	if w == c.enqueuing {
		return // its own enqueue returns the outcome
	}
	if c.decidedTail == nil {
		c.decided = w
	} else {
		c.decidedTail.next = w
	}
	c.decidedTail = w
}

// unlock releases mu and then delivers the outcomes decided while it was
// held. Every critical section ends here, also when a panic unwinds it.
func (c *FlowController) unlock() {
	list := c.decided
	if list != nil {
		c.decided, c.decidedTail = nil, nil
	}
	c.mu.Unlock()
	if list != nil {
		c.deliverAll(list)
	}
}

// deliverAll delivers each waiter of list in order. A delivery that panics
// (a Submit callback or the Observer) does not strand the rest: they are
// delivered as the panic unwinds, and the panic goes on.
//
// Outcomes that a Submit callback's own Done settles were parked while it
// ran; deliver hands them back, and they are delivered here after the rest,
// in a loop, so a chain of callbacks that each call Done runs in constant
// stack depth.
func (c *FlowController) deliverAll(list *waiter) {
	defer func() {
		if list != nil {
			c.deliverAll(list)
		}
	}()
	tail := list
	for tail != nil && tail.next != nil {
		tail = tail.next
	}
	for list != nil {
		w := list
		list, w.next = w.next, nil
		if list == nil {
			tail = nil
		}
		more, moreTail := c.deliver(w)
		if more == nil {
			continue
		}
		if list == nil {
			list = more
		} else {
			tail.next = more
		}
		tail = moreTail
	}
}

// deliver hands w's settled outcome to its caller, and returns the outcomes
// parked while a Submit callback ran. Called without mu.
func (c *FlowController) deliver(w *waiter) (parked, parkedTail *waiter) {
	if w.withdrawn {
		return nil, nil
	}
	if w.stopCtx != nil {
		w.stopCtx()
	}
	if w.ready != nil {
		close(w.ready) // EnqueueAndWait finishes on its own goroutine
		return nil, nil
	}
	adm, rej := c.result(w)
	done := w.done
	recycle(w)
	if rej != nil {
		// The caller hears its outcome even if the Observer panics.
		defer done(nil, rej)
		c.report(nil, rej)
		return nil, nil
	}
	c.report(adm, nil) // on a panic, releases adm; done is not called
	c.mu.Lock()
	adm.inCallback = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		adm.inCallback = false
		parked, parkedTail = c.parked, c.parkedTail
		c.parked, c.parkedTail = nil, nil
		c.mu.Unlock()
	}()
	done(adm, nil)
	return nil, nil
}

// park moves the outcomes decided in this critical section to the parked
// list, for the goroutine running a Submit callback to deliver. Called with
// mu held.
func (c *FlowController) park() {
	if c.decided == nil {
		return
	}
	if c.parkedTail == nil {
		c.parked = c.decided
	} else {
		c.parkedTail.next = c.decided
	}
	c.parkedTail = c.decidedTail
	c.decided, c.decidedTail = nil, nil
}

// abandon ends a queued request that expired or was cancelled, unless it
// already left its queue (dispatched or shut down), in which case that
// earlier outcome stands. Once Close has begun, the outcome is shutdown.
//
// gen is w's generation when the caller was set up: a late call for an
// earlier use of w, which has moved on, does nothing.
func (c *FlowController) abandon(w *waiter, gen uint64, o Outcome, byContext bool) {
	c.mu.Lock()
	defer c.unlock()
	if w.gen != gen || !w.queued {
		return
	}
	if c.closing.Load() {
		o, byContext = OutcomeRejectedShuttingDown, false
	} else if o == OutcomeRejectedTTLExpired && c.endpoints != nil && c.endpoints.NoEndpoints() {
		o = OutcomeRejectedNoEndpoints // expired in the empty-pool regime
	}
	now := c.clock.Now()
	c.unqueue(w, now)
	w.byContext = byContext
	c.decide(w, o, now)
	// The band may have been the one holding lower bands back.
	c.dispatchLocked(now)
}

// result turns a waiter's settled outcome into the admission or the
// rejection its caller receives.
func (c *FlowController) result(w *waiter) (*Admission, *RejectionError) {
	if w.outcome == OutcomeDispatched {
		a := newQueuedAdmission()
		*a = Admission{c: c, requested: w.requested, effective: w.band.priority, queueTime: w.queueTime, meter: w.meter}
		return a, nil
	}
	rej := &RejectionError{
		Outcome:    w.outcome,
		Requested:  w.requested,
		Effective:  effectiveKey(w.requested, w.band),
		QueueTime:  w.queueTime,
		RetryAfter: w.retryAfter,
	}
	switch w.outcome {
	case OutcomeEvictedQueuePressure:
		rej.limit = limitDisplaced
	case OutcomeRejectedNoEndpoints:
		rej.limit = limitNoEndpoints
	}
	if w.byContext {
		rej.setContext(w.ctx, w.ctx.Err())
	}
	return nil, rej
}

// finish reports an outcome to the observer and returns it as
// EnqueueAndWait's results.
func (c *FlowController) finish(adm *Admission, rej *RejectionError) (*Admission, error) {
	if c.observer != nil {
		c.report(adm, rej)
	}
	if rej != nil {
		return nil, rej
	}
	return adm, nil
}

// report tells the observer, if any, of one outcome: adm for a dispatch,
// rej otherwise. If the observer panics on a dispatch, the admission is
// released before the panic goes on: nobody will receive it. Called without
// mu.
func (c *FlowController) report(adm *Admission, rej *RejectionError) {
	if c.observer == nil {
		return
	}
	if rej != nil {
		c.observer(Event{Requested: rej.Requested, Effective: rej.Effective, Outcome: rej.Outcome, QueueTime: rej.QueueTime})
		return
	}
	defer func() {
		if r := recover(); r != nil {
			adm.Done()
			panic(r)
		}
	}()
	c.observer(Event{Requested: adm.requested, Effective: adm.Effective(), Outcome: OutcomeDispatched, QueueTime: adm.queueTime})
}

// release ends admission a, unless it already ended: it returns the gate
// slot and dispatches whatever that lets start.
//
// When a's Submit callback is still running (it called Done from inside),
// the outcomes the freed slot settles are parked for that callback's
// goroutine to deliver once it returns. The dispatch runs even if the gate's
// Release panics.
func (c *FlowController) release(a *Admission) {
	c.mu.Lock()
	defer c.unlock()
	if a.done {
		return
	}
	a.done = true
	c.inFlight--
	if a.inCallback {
		defer c.park()
	}
	defer c.dispatchLocked(time.Time{})
	if c.metered != nil {
		m := a.meter
		u := Usage{
			Slot:       Slot{Priority: a.effective, Cost: m.cost},
			Held:       c.sinceEpoch(time.Time{}) - m.start,
			FirstToken: time.Duration(m.firstToken.Load()),
			Heard:      m.heard,
		}
		c.metered.Returned(u)
		return
	}
	c.gate.Release(a.effective)
}

// heardFirstToken tells the gate, a FirstTokenGate, of a's first token d
// after dispatch, unless a has already ended, and runs dispatch: the gate
// may admit more.
func (c *FlowController) heardFirstToken(a *Admission, d time.Duration) {
	c.mu.Lock()
	defer c.unlock()
	if a.done {
		return // Returned had it, as Usage.FirstToken
	}
	a.meter.heard = true
	c.firstTokens.FirstToken(Slot{Priority: a.effective, Cost: a.meter.cost}, d)
	c.dispatchLocked(time.Time{})
}

// took tells the metered gate that a request of the given cost took the
// slot it has just granted band priority, and returns the request's meter,
// its clock started. now is the time of the event, or the zero Time to read
// the clock. Called with mu held.
func (c *FlowController) took(priority int, cost int64, now time.Time) *meter {
	if len(c.meters) == 0 {
		c.meters = make([]meter, admissionSlab)
	}
	m := &c.meters[0]
	c.meters = c.meters[1:]
	m.cost, m.start = cost, c.sinceEpoch(now)
	c.metered.Took(Slot{Priority: priority, Cost: cost})
	return m
}

// sinceEpoch returns now, or the clock's reading when now is the zero
// Time, as time since the controller's epoch: admissions keep their start
// in 8 bytes rather than a Time's 24.
func (c *FlowController) sinceEpoch(now time.Time) time.Duration {
	if now.IsZero() {
		now = c.clock.Now()
	}
	return now.Sub(c.epoch)
}

// checkEndpoints follows the gate, an EndpointGate, after it refused at
// now: when it reports no endpoints and requests wait, it notes when the
// pool emptied and makes sure a check will drop those that wait
// NoEndpointsTTL with no endpoints. Called with mu held.
func (c *FlowController) checkEndpoints(now time.Time) {
	if !c.endpoints.NoEndpoints() {
		c.emptySince = time.Time{}
		return
	}
	if now.IsZero() {
		now = c.clock.Now()
	}
	if c.emptySince.IsZero() {
		c.emptySince = now
	}
	if c.noEndpointsTTL > 0 && c.emptyTimer == nil && c.queuedRequests > 0 {
		c.emptyTimer = c.clock.AfterFunc(c.noEndpointsTTL, c.dropNoEndpoints)
	}
}

// dropNoEndpoints runs when a request may have waited NoEndpointsTTL with
// no endpoints: it drops every request that has, and schedules itself again
// for the next one while the pool stays empty.
func (c *FlowController) dropNoEndpoints() {
	c.mu.Lock()
	defer c.unlock()
	c.emptyTimer = nil
	if c.closing.Load() || c.emptySince.IsZero() {
		return
	}
	if !c.endpoints.NoEndpoints() {
		c.emptySince = time.Time{}
		c.dispatchLocked(time.Time{})
		return
	}
	now := c.clock.Now()
	var next time.Time // the earliest deadline of a request kept
	for _, b := range c.bands.Load().desc {
		if b.queued == 0 {
			continue
		}
		var due []*waiter
		for _, f := range b.flows {
			for w := f.newest; w != nil; w = w.older {
				since := w.item.EnqueueTime
				if since.Before(c.emptySince) {
					since = c.emptySince
				}
				switch deadline := since.Add(c.noEndpointsTTL); {
				case !deadline.After(now):
					due = append(due, w)
				case next.IsZero() || deadline.Before(next):
					next = deadline
				}
			}
		}
		slices.SortFunc(due, func(x, y *waiter) int { return cmp.Compare(x.seq, y.seq) })
		for _, w := range due {
			c.unqueue(w, now)
			c.decide(w, OutcomeRejectedNoEndpoints, now)
		}
	}
	if !next.IsZero() {
		c.emptyTimer = c.clock.AfterFunc(next.Sub(now), c.dropNoEndpoints)
	}
}

// Nudge runs dispatch now. Call it when the gate may admit more for a reason
// the controller cannot see; enqueues, Done, expiry and cancellation already
// run dispatch themselves.
func (c *FlowController) Nudge() {
	c.mu.Lock()
	defer c.unlock()
	c.dispatchLocked(time.Time{})
}

// Close shuts the controller down: every queued request ends with
// [OutcomeRejectedShuttingDown], and every later EnqueueAndWait or Submit is
// rejected the same way at once, also one whose context is already done.
// Close returns when the EnqueueAndWait calls of the queued requests have
// returned (their Observer calls included) and the done functions of the
// queued Submits have run. Admissions already granted stay valid; their
// Done still returns their slots. Close may be called more than once; it
// must not be called from the Observer or a Submit callback.
func (c *FlowController) Close() {
	c.closing.Store(true)
	c.shutdown()
	c.waiters.Wait()
}

// shutdown ends every queued request with OutcomeRejectedShuttingDown, once,
// in each band from the oldest arrival to the newest.
func (c *FlowController) shutdown() {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return
	}
	c.closed = true
	now := c.clock.Now()
	for _, b := range c.bands.Load().desc {
		var all []*waiter
		for _, f := range b.flows {
			for w := f.newest; w != nil; w = w.older {
				all = append(all, w)
			}
		}
		slices.SortFunc(all, func(x, y *waiter) int { return cmp.Compare(x.seq, y.seq) })
		for _, w := range all {
			c.unqueue(w, now)
			c.decide(w, OutcomeRejectedShuttingDown, now)
		}
	}
}

// CapacitySnapshot returns the current state of band priority: the requests
// and bytes waiting in it, and its capacities. For a priority with no band
// it returns an error wrapping [capacity.ErrBandNotFound].
//
// It takes no lock and allocates nothing (except the error). Each counter is
// exact at the moment it is read; while a request is moving, the request
// count and the byte count may be read either side of that one move.
func (c *FlowController) CapacitySnapshot(priority int) (capacity.Snapshot, error) {
	b := c.bands.Load().lookup(priority)
	if b == nil {
		return capacity.Snapshot{}, fmt.Errorf("flowcontrol: priority %d: %w", priority, capacity.ErrBandNotFound)
	}
	lim := b.limits.Load()
	return capacity.Snapshot{
		Priority:        priority,
		QueuedRequests:  b.queuedRequests.Load(),
		QueuedBytes:     b.queuedBytes.Load(),
		QueuedCost:      b.queuedCost.Load(),
		RequestCapacity: lim.requests,
		ByteCapacity:    lim.bytes,
		CostCapacity:    lim.cost,
	}, nil
}

// FlowSnapshot returns the state of one flow in band priority: its waiting
// requests, their bytes and their cost, with the band's per-flow request
// capacity as RequestCapacity (its other capacities are unbounded). A flow
// with no waiters reads as empty. For a priority with no band it returns an
// error wrapping [capacity.ErrBandNotFound]. Unlike CapacitySnapshot it
// takes the controller's lock briefly.
func (c *FlowController) FlowSnapshot(priority int, flowID string) (capacity.Snapshot, error) {
	b := c.bands.Load().lookup(priority)
	if b == nil {
		return capacity.Snapshot{}, fmt.Errorf("flowcontrol: priority %d: %w", priority, capacity.ErrBandNotFound)
	}
	s := capacity.Snapshot{Priority: priority, RequestCapacity: b.limits.Load().flowRequests}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := b.flows[flowID]; f != nil {
		s.QueuedRequests, s.QueuedBytes, s.QueuedCost = int64(f.n), f.bytes, f.cost
	}
	return s, nil
}

// ProvisionBand adds a band, or changes the capacities and TTL of an existing
// one. For an existing band, Policy, Queue and Fairness must be left empty
// or name what the band already runs: a band's order cannot change while
// requests wait in it. The new limits apply to requests enqueued from now on;
// requests already queued keep their TTL and stay queued even if the band now
// holds more than its capacity. Requests already admitted keep the band they
// were admitted under. It fails with an error wrapping [ErrRejectedShuttingDown] after
// Close.
func (c *FlowController) ProvisionBand(bc BandConfig) error {
	p, err := checkBand("BandConfig", bc)
	if err != nil {
		return err
	}
	lim := newBandLimits(bc)
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return fmt.Errorf("flowcontrol: ProvisionBand(priority %d): %w", bc.Priority, ErrRejectedShuttingDown)
	}
	set := c.bands.Load()
	if b := set.lookup(bc.Priority); b != nil {
		if running := b.fairness.TypeName(); bc.Fairness != nil && bc.Fairness.TypeName() != running {
			return configError("BandConfig.Fairness", bc.Fairness.TypeName(),
				fmt.Sprintf("band %d already runs %q; a provisioned band's fairness cannot change", bc.Priority, running))
		}
		if running := b.policy.TypeName(); p != nil && p.TypeName() != running {
			return configError("BandConfig.Policy", p.TypeName(),
				fmt.Sprintf("band %d already runs %q; a provisioned band's policy cannot change", bc.Priority, running))
		}
		if running := b.kind; bc.Queue != "" && bc.Queue != running {
			return configError("BandConfig.Queue", bc.Queue,
				fmt.Sprintf("band %d already runs %q; a provisioned band's queue cannot change", bc.Priority, running))
		}
		b.limits.Store(lim)
		return nil
	}
	b, err := newBand("BandConfig", bc, p)
	if err != nil {
		return err
	}
	i, _ := set.search(bc.Priority)
	c.setBands(&bandSet{desc: slices.Insert(slices.Clone(set.desc), i, b)})
	return nil
}

// Clock returns the controller's clock: [Config.Clock], or [RealClock]
// when none was configured. Code around the controller that measures time
// (a gateway's queue-duration header, say) reads it so that it shares the
// controller's time line.
func (c *FlowController) Clock() Clock { return c.clock }

// GateRefusals returns how many times, since New, the gate refused the
// request offered to it: each TryAcquire that returned false. A request
// that waits is offered again at each event, so under a closed gate the
// count grows with the events, not with the requests; its rate beside the
// dispatch rate tells a gate-bound controller from one bound by its
// capacities. It reads one atomic counter and takes no lock.
func (c *FlowController) GateRefusals() uint64 { return c.refusals.Load() }

// InFlight returns the number of dispatched requests whose admission is not
// yet Done. Unlike CapacitySnapshot it takes the controller's lock briefly.
func (c *FlowController) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight
}
