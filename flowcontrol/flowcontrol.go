// Package flowcontrol is the admission gate a router puts in front of its
// model servers: a [FlowController] queues requests in priority bands, orders
// each band by its policy, and dispatches them one at a time through a
// [Gate], strictly by priority, reporting for each request which band really
// handled it.
//
// # Outcomes
//
// [FlowController.EnqueueAndWait] blocks until exactly one outcome:
//
//	outcome                   error wraps   dropped reason               HTTP
//	OutcomeDispatched         (none)        -                            200
//	OutcomeRejectedCapacity   ErrSaturated  rejected-saturated           429  (+ RetryAfter)
//	OutcomeExpired            ErrExpired    rejected-ttl-expired         429
//	OutcomeCancelled          ErrCancelled  rejected-context-cancelled   503
//	OutcomeRejectedShutdown   ErrClosed     rejected-shutting-down       503
//
// The dropped reason is the value of the x-llm-d-request-dropped-reason
// header ([DroppedReasonHeader]).
//
// # Bands and fallback
//
// A band has a priority (higher is more important; negative bands are
// sheddable), a request capacity and a byte capacity bounding what waits in
// it, a queue-wait TTL and an ordering policy. A request asks for a priority;
// if that band is not provisioned it is queued in the fallback band
// ([Config.FallbackPriority], 0 unless set) — or, with [Config.NeverPromote],
// in the nearest band at or below its priority, and rejected for capacity if
// there is none. The band is chosen once, at enqueue: the admission reports
// both the requested and the effective key, and provisioning the requested
// band later changes neither.
//
// Capacities bound waiting requests. A request enters its band only if the
// band and the controller, with it added, stay within their request and
// byte capacities; this is checked at enqueue, also for a request that would
// start at once, so a bounded capacity of 0 closes a band and a request larger
// than a byte capacity is always refused. Capacity rejections carry a
// Retry-After projection from the band's measured dispatch rate.
//
// # Dispatch and strict priority
//
// Dispatch is driven by events — an enqueue, a Done, an expiry or
// cancellation, and [FlowController.Nudge] — never by a clock. On each event
// the controller offers the head of the highest waiting band to the gate, and
// repeats until the gate refuses or nothing waits. Within a band, the band's
// ordering policy picks the head.
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
// deadline is an expiry, not a cancellation: the outcome is OutcomeExpired and
// the error matches both ErrExpired and context.DeadlineExceeded. An explicit
// cancellation of the context is OutcomeCancelled and matches ErrCancelled
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
// OutcomeRejectedShutdown and returns once their EnqueueAndWait calls have
// returned. Later calls fail at once. The controller runs no goroutines of
// its own: every goroutine in it is a caller's.
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
	// the gate, and the dispatch that follows each change. Gate and queue
	// methods are called only with mu held; nothing else is — the Observer,
	// timers and contexts are handled after mu is released.
	mu sync.Mutex
	// nonEmpty has bit i set while bands.desc[i] has waiters, so finding
	// the highest waiting band costs one word per 64 bands.
	nonEmpty       []uint64
	queuedRequests int64 // in all bands
	queuedBytes    int64
	inFlight       int // admissions not yet Done
	closed         bool
	// slab holds fresh Admissions for immediate dispatches; see
	// admissionSlab.
	slab []Admission

	// bands is replaced under mu and read without it.
	bands atomic.Pointer[bandSet]
	// waiters counts EnqueueAndWait calls that queued and have not
	// returned; Close waits for it.
	waiters sync.WaitGroup

	// Fixed by New.
	gate            Gate
	fallback        *band // nil with NeverPromote
	neverPromote    bool
	requestCapacity capacity.Limit
	byteCapacity    capacity.Limit
	defaultTTL      time.Duration
	observer        func(Event)
}

// waiter is one queued request.
type waiter struct {
	item  ordering.Item // item.Value is the waiter
	ready chan struct{} // closed when the request leaves its queue other than by its own abandon
	band  *band

	// Guarded by the controller's mu. Once queued is false, outcome is
	// final; the waiting goroutine reads it after ready is closed or after
	// taking mu itself.
	queued    bool
	outcome   Outcome
	byContext bool // the context ended the wait (expiry by deadline, or cancellation)

	adm Admission // returned on dispatch; adm.queueTime is set for every outcome
}

// New returns a controller for cfg. A bad configuration fails with an error
// naming the field and its value: no bands, duplicate priorities, an unknown
// policy name, a policy on a queue without the capability it needs, a
// negative capacity or TTL, or a fallback band that is not configured.
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
	if err := checkTTL("DefaultTTL", cfg.DefaultTTL); err != nil {
		return nil, err
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
		neverPromote:    cfg.NeverPromote,
		requestCapacity: cfg.RequestCapacity,
		byteCapacity:    cfg.ByteCapacity,
		defaultTTL:      cfg.DefaultTTL,
		observer:        cfg.Observer,
	}
	if c.gate == nil {
		c.gate = openGate{}
	}
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
	return c, nil
}

// newBand builds a band from a validated configuration.
func newBand(name string, bc BandConfig, p ordering.Policy) (*band, error) {
	q, err := newQueue(name, p, bc.Queue)
	if err != nil {
		return nil, err
	}
	b := &band{priority: bc.Priority, queue: q}
	b.limits.Store(&bandLimits{requests: bc.RequestCapacity, bytes: bc.ByteCapacity, ttl: bc.TTL})
	return b, nil
}

// setBands publishes set and re-derives the band indexes and the non-empty
// bitset from it. Called with mu held, or before c is shared.
func (c *FlowController) setBands(set *bandSet) {
	c.nonEmpty = make([]uint64, (len(set.desc)+63)/64)
	for i, b := range set.desc {
		b.index = i
		if b.queue.Len() > 0 {
			c.nonEmpty[i/64] |= 1 << (i % 64)
		}
	}
	c.bands.Store(set)
}

// resolve returns the band a request for priority p is queued in, or nil if
// none may take it.
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
func (c *FlowController) EnqueueAndWait(ctx context.Context, req Request) (*Admission, error) {
	if err := ctx.Err(); err != nil {
		// The caller is gone already: queueing it would only hold a slot.
		rej := &RejectionError{Outcome: OutcomeCancelled, Requested: req.Key}
		rej.Effective = effectiveKey(req.Key, c.resolve(c.bands.Load(), req.Key.Priority))
		rej.setContext(ctx, err)
		return nil, c.rejected(rej)
	}
	deadline, hasDeadline := ctx.Deadline()
	size := max(req.ByteSize, 0)

	c.mu.Lock()
	b := c.resolve(c.bands.Load(), req.Key.Priority)
	if c.closed || b == nil {
		c.mu.Unlock()
		rej := &RejectionError{Outcome: OutcomeRejectedShutdown, Requested: req.Key, Effective: effectiveKey(req.Key, b)}
		if !c.closed {
			rej.Outcome, rej.limit = OutcomeRejectedCapacity, limitNoBand
		}
		return nil, c.rejected(rej)
	}
	lim := b.limits.Load()
	if limit, bound := c.overLimit(b, lim, size); limit != limitNone {
		retry := b.meter.retryAfter(time.Now(), int64(b.queue.Len()))
		c.mu.Unlock()
		return nil, c.rejected(&RejectionError{
			Outcome:    OutcomeRejectedCapacity,
			Requested:  req.Key,
			Effective:  effectiveKey(req.Key, b),
			RetryAfter: retry,
			limit:      limit,
			limitVal:   bound,
		})
	}

	// When nothing at or above this band waits, the request would be the
	// head dispatch offers to the gate first: offer it before queueing it.
	top := c.firstNonEmpty()
	first := top < 0 || top > b.index
	if first && c.gate.TryAcquire(b.priority) {
		c.inFlight++
		b.meter.record(time.Time{})
		a := c.newAdmission()
		c.mu.Unlock()
		*a = Admission{c: c, requested: req.Key, effective: b.priority}
		c.observe(Event{Requested: req.Key, Effective: a.Effective(), Outcome: OutcomeDispatched})
		return a, nil
	}

	now := time.Now()
	ttl := minTTL(minTTL(lim.ttl, c.defaultTTL), req.TTL)
	timerTTL := ttl
	if hasDeadline {
		if left := deadline.Sub(now); ttl == 0 || left <= ttl {
			// The context's own timer expires the request; a timer of ours
			// at the same instant would race it.
			ttl, timerTTL = max(left, 1), 0
		}
	}
	received := req.ReceivedTime
	if received.IsZero() {
		received = now
	}
	w := &waiter{ready: make(chan struct{}), band: b, queued: true}
	w.adm = Admission{c: c, requested: req.Key, effective: b.priority}
	w.item = ordering.Item{
		ReceivedTime: received,
		EnqueueTime:  now,
		Header:       req.Header,
		TTL:          ttl,
		ByteSize:     size,
		Value:        w,
	}
	b.queue.Add(&w.item)
	c.queuedRequests++
	c.queuedBytes += size
	c.publish(b)
	if !first {
		// A band at or above this one waits: offer its head again, as on
		// every event. (When this request was first, the gate has just
		// refused it and nothing else may go before it.)
		c.dispatchLocked(now)
	}
	if !w.queued { // dispatched by its own enqueue
		c.mu.Unlock()
		return c.finish(w, ctx)
	}
	c.waiters.Add(1)
	c.mu.Unlock()
	defer c.waiters.Done()

	var expiry <-chan time.Time
	if timerTTL > 0 {
		t := time.NewTimer(timerTTL)
		defer t.Stop()
		expiry = t.C
	}
	select {
	case <-w.ready:
	case <-expiry:
		c.abandon(w, OutcomeExpired, false)
	case <-ctx.Done():
		o := OutcomeCancelled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			o = OutcomeExpired
		}
		c.abandon(w, o, true)
	}
	return c.finish(w, ctx)
}

// admissionSlab is how many Admissions one allocation provides to immediate
// dispatches. Allocating them one by one costs more than the rest of an
// immediate admission; a slab divides that cost by its size. Each Admission
// is still used for one request only. The price is memory: an Admission kept
// alive keeps its whole slab (32 × 56 bytes) alive.
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

// setContext records the context's error, and its cause when that differs,
// and derives the outcome from them.
func (e *RejectionError) setContext(ctx context.Context, err error) {
	e.ctxErr = err
	if cause := context.Cause(ctx); cause != nil && cause != err {
		e.ctxCause = cause
	}
	if errors.Is(err, context.DeadlineExceeded) {
		e.Outcome = OutcomeExpired
	} else {
		e.Outcome = OutcomeCancelled
	}
}

// overLimit reports the first limit that adding a request of size bytes to
// b would exceed, and its bound. Called with mu held.
func (c *FlowController) overLimit(b *band, lim *bandLimits, size int64) (limitKind, int64) {
	switch {
	case !lim.requests.Fits(b.queuedRequests.Load(), 1):
		n, _ := lim.requests.Value()
		return limitBandRequests, n
	case !lim.bytes.Fits(b.queuedBytes.Load(), size):
		n, _ := lim.bytes.Value()
		return limitBandBytes, n
	case !c.requestCapacity.Fits(c.queuedRequests, 1):
		n, _ := c.requestCapacity.Value()
		return limitGlobalRequests, n
	case !c.byteCapacity.Fits(c.queuedBytes, size):
		n, _ := c.byteCapacity.Value()
		return limitGlobalBytes, n
	}
	return limitNone, 0
}

// publish mirrors b's queue into its atomic counters and the non-empty
// bitset. Called with mu held after every change to b.queue.
func (c *FlowController) publish(b *band) {
	n := b.queue.Len()
	b.queuedRequests.Store(int64(n))
	b.queuedBytes.Store(b.queue.ByteSize())
	bit := uint64(1) << (b.index % 64)
	if n > 0 {
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

// dispatchLocked offers the head of the highest waiting band to the gate
// until the gate refuses or nothing waits. now is the time of the event, or
// the zero Time to read the clock on the first dispatch. Called with mu
// held.
func (c *FlowController) dispatchLocked(now time.Time) {
	if c.queuedRequests == 0 {
		return
	}
	desc := c.bands.Load().desc
	for {
		i := c.firstNonEmpty()
		if i < 0 {
			return
		}
		b := desc[i]
		if !c.gate.TryAcquire(b.priority) {
			return // strict priority: nothing below a refused band starts
		}
		it := b.queue.PopHead()
		w := it.Value.(*waiter)
		if now.IsZero() {
			now = time.Now()
		}
		c.queuedRequests--
		c.queuedBytes -= it.ByteSize
		c.publish(b)
		c.inFlight++
		b.meter.record(now)
		w.queued, w.outcome = false, OutcomeDispatched
		w.adm.queueTime = now.Sub(it.EnqueueTime)
		close(w.ready)
	}
}

// abandon ends a queued request that expired or was cancelled, unless it
// already left its queue (dispatched or shut down), in which case that
// earlier outcome stands.
func (c *FlowController) abandon(w *waiter, o Outcome, byContext bool) {
	c.mu.Lock()
	if w.queued {
		now := time.Now()
		b := w.band
		b.queue.Remove(&w.item)
		c.queuedRequests--
		c.queuedBytes -= w.item.ByteSize
		c.publish(b)
		w.queued, w.outcome, w.byContext = false, o, byContext
		w.adm.queueTime = now.Sub(w.item.EnqueueTime)
		// The band may have been the one holding lower bands back.
		c.dispatchLocked(now)
	}
	c.mu.Unlock()
}

// finish turns a waiter's final outcome into EnqueueAndWait's results and
// reports it to the observer.
func (c *FlowController) finish(w *waiter, ctx context.Context) (*Admission, error) {
	if w.outcome == OutcomeDispatched {
		c.observe(Event{Requested: w.adm.requested, Effective: w.adm.Effective(), Outcome: OutcomeDispatched, QueueTime: w.adm.queueTime})
		return &w.adm, nil
	}
	rej := &RejectionError{
		Outcome:   w.outcome,
		Requested: w.adm.requested,
		Effective: w.adm.Effective(),
		QueueTime: w.adm.queueTime,
	}
	if w.byContext {
		rej.setContext(ctx, ctx.Err())
	}
	return nil, c.rejected(rej)
}

// observe reports ev to the observer, if any. Called without mu.
func (c *FlowController) observe(ev Event) {
	if c.observer != nil {
		c.observer(ev)
	}
}

// rejected reports a rejection to the observer and returns it as an error.
func (c *FlowController) rejected(rej *RejectionError) error {
	c.observe(Event{Requested: rej.Requested, Effective: rej.Effective, Outcome: rej.Outcome, QueueTime: rej.QueueTime})
	return rej
}

// release ends admission a, unless it already ended: it returns the gate
// slot and dispatches whatever that lets start.
func (c *FlowController) release(a *Admission) {
	c.mu.Lock()
	if !a.done {
		a.done = true
		c.inFlight--
		c.gate.Release(a.effective)
		c.dispatchLocked(time.Time{})
	}
	c.mu.Unlock()
}

// Nudge runs dispatch now. Call it when the gate may admit more for a reason
// the controller cannot see; enqueues, Done, expiry and cancellation already
// run dispatch themselves.
func (c *FlowController) Nudge() {
	c.mu.Lock()
	c.dispatchLocked(time.Time{})
	c.mu.Unlock()
}

// Close shuts the controller down: every queued request ends with
// [OutcomeRejectedShutdown], and every later EnqueueAndWait is rejected the
// same way at once. Close returns when the EnqueueAndWait calls of the queued
// requests have returned (their Observer calls included). Admissions already
// granted stay valid; their Done still returns their slots. Close may be
// called more than once; it must not be called from the Observer.
func (c *FlowController) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		now := time.Now()
		for _, b := range c.bands.Load().desc {
			for it := b.queue.PopHead(); it != nil; it = b.queue.PopHead() {
				w := it.Value.(*waiter)
				w.queued, w.outcome = false, OutcomeRejectedShutdown
				w.adm.queueTime = now.Sub(it.EnqueueTime)
				close(w.ready)
			}
			c.publish(b)
		}
		c.queuedRequests, c.queuedBytes = 0, 0
	}
	c.mu.Unlock()
	c.waiters.Wait()
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
		RequestCapacity: lim.requests,
		ByteCapacity:    lim.bytes,
	}, nil
}

// ProvisionBand adds a band, or changes the capacities and TTL of an existing
// one. For an existing band, Policy, PolicyName and Queue must be left empty
// or name what the band already runs: a band's order cannot change while
// requests wait in it. The new limits apply to requests enqueued from now on;
// requests already queued keep their TTL and stay queued even if the band now
// holds more than its capacity. Requests already admitted keep the band they
// were admitted under. It fails with an error wrapping [ErrClosed] after
// Close.
func (c *FlowController) ProvisionBand(bc BandConfig) error {
	p, err := checkBand("BandConfig", bc)
	if err != nil {
		return err
	}
	lim := &bandLimits{requests: bc.RequestCapacity, bytes: bc.ByteCapacity, ttl: bc.TTL}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("flowcontrol: ProvisionBand(priority %d): %w", bc.Priority, ErrClosed)
	}
	set := c.bands.Load()
	if b := set.lookup(bc.Priority); b != nil {
		if running := b.queue.Policy().TypeName(); p != nil && p.TypeName() != running {
			return configError("BandConfig.Policy", p.TypeName(),
				fmt.Sprintf("band %d already runs %q; a provisioned band's policy cannot change", bc.Priority, running))
		}
		if running := b.queue.Kind(); bc.Queue != "" && bc.Queue != running {
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

// InFlight returns the number of dispatched requests whose admission is not
// yet Done. Unlike CapacitySnapshot it takes the controller's lock briefly.
func (c *FlowController) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight
}
