package flowcontrol

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
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
	nonEmpty []uint64
	queued   backlog // in all bands
	// inFlight counts the admissions not yet Done, unless the lock-free
	// path's count is the count (see took).
	inFlight int
	closed   bool
	// drain measures all bands together, for global-capacity rejections.
	drain drainMeter
	// slab holds fresh Admissions, and leases, for the admissions made
	// under mu.
	slab slab
	// outbox lists the outcomes decided under mu, for unlock to deliver.
	outbox

	// closing is set as Close begins, before it takes mu, so that shutdown
	// wins over every outcome decided after that.
	closing atomic.Bool
	// bands is replaced under mu and read without it.
	bands atomic.Pointer[bandSet]
	// owed counts the calls Close waits for; see owed.
	owed owed
	// waiterPool recycles this controller's waiters; see recycle.
	waiterPool sync.Pool

	// Fixed by New.
	gate      gated    // the gate, and how often it refused
	clock     timeline // the clock, and its reading at New
	rules              // how requests are admitted into bands
	callbacks          // what the caller hears

	// The optional features, each nil when it is off; the phase files
	// call their hooks, which do nothing on a nil owner.
	fast        *lockFree      // start and end without mu while nothing waits: fast.go
	meter       *metering      // the gate hears costs and usage: metered.go
	reclaim     *reclaimer     // eviction and guaranteed shares: reclaim.go, guarantee.go
	noEndpoints *endpointWatch // drop requests while no model server is up: noendpoints.go
}

// rules are what New fixes of how a request is admitted into a band.
type rules struct {
	fallback       *band // nil with NeverPromote
	neverPromote   bool
	capacities     capacities // of all bands together
	empty          room       // of the controller with nothing queued
	noDisplacement bool
	defaultTTL     time.Duration
}

// callbacks are the functions of Config the controller calls back.
type callbacks struct {
	observer    func(Event)
	waiting     func(Event)
	revocations func(Revocation)
	// timed: an Observer or Waiting hears each request's enqueue time, so
	// the clock is read around each enqueue; only then.
	timed bool
}

// gated is the controller's gate and how often it refused.
type gated struct {
	gate.Gate
	// refusals counts the heads the gate refused; written under mu, read
	// without it.
	refusals atomic.Uint64
}

// timeline is the controller's clock and its reading at New, the epoch
// from which admissions and waiters keep their times in 8 bytes.
type timeline struct {
	Clock
	epoch time.Time
}

// New returns a controller for cfg. A bad configuration fails with an error
// naming the field and its value: no bands, duplicate priorities, an unknown
// policy name, a policy on a queue without the capability it needs, a
// negative capacity or TTL, a negative [gate.MaxInFlight] limit, a gate.MaxInFlight
// gate used by another controller, or a fallback band that is not
// configured.
func New(cfg Config) (*FlowController, error) {
	if len(cfg.Bands) == 0 {
		return nil, configError("Bands", "[]", "no bands configured")
	}
	if err := firstError(
		checkLimit("RequestCapacity", cfg.RequestCapacity),
		checkLimit("ByteCapacity", cfg.ByteCapacity),
		checkLimit("CostCapacity", cfg.CostCapacity),
		checkTTL("DefaultTTL", cfg.DefaultTTL),
		checkTTL("NoEndpointsTTL", cfg.NoEndpointsTTL),
		checkEviction(cfg.Eviction),
	); err != nil {
		return nil, err
	}
	desc := make([]*band, 0, len(cfg.Bands))
	first := make(map[int]int, len(cfg.Bands))
	guarantees := 0.0
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
		if guarantees += bc.Guarantee; guarantees > 1+1e-9 {
			return nil, configError(name+".Guarantee", bc.Guarantee, "takes the bands' guarantees past 1")
		}
	}
	slices.SortFunc(desc, func(a, b *band) int { return cmp.Compare(b.priority, a.priority) })
	if err := checkReclaim(cfg); err != nil {
		return nil, err
	}

	g := cfg.Gate
	if g == nil {
		g = newOpenGate()
	}
	clock := cfg.Clock
	if clock == nil {
		clock = RealClock{}
	}
	c := &FlowController{
		clock: timeline{Clock: clock, epoch: clock.Now()},
		rules: rules{
			neverPromote:   cfg.NeverPromote,
			capacities:     newCapacities(cfg.RequestCapacity, cfg.ByteCapacity, cfg.CostCapacity),
			noDisplacement: cfg.NoDisplacement,
			defaultTTL:     cfg.DefaultTTL,
		},
		callbacks: callbacks{
			observer:    cfg.Observer,
			waiting:     cfg.Waiting,
			revocations: cfg.Revocations,
			timed:       cfg.Observer != nil || cfg.Waiting != nil,
		},
		meter:       newMetering(g),
		reclaim:     newReclaimer(cfg.Eviction, guarantees > 0, g),
		noEndpoints: newEndpointWatch(g, cfg.NoEndpointsTTL),
	}
	c.gate.Gate = g
	c.empty = c.capacities.room()
	if c.reclaim != nil {
		c.reclaim.nudge = c.Nudge
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
	if b, ok := g.(gate.BoundGate); ok {
		if err := b.Bind(c); err != nil {
			return nil, fmt.Errorf("flowcontrol: Gate %s: %w", gateName(b), err)
		}
	}
	// Last, once nothing can fail: a controller that returns an error
	// leaves its gate as it found it.
	c.fast = newLockFree(c)
	return c, nil
}

// gateName names g in an error: its String, if it has one, or its type.
func gateName(g gate.Gate) string {
	if s, ok := g.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", g)
}

// newBand builds a band from a validated configuration.
func newBand(name string, bc BandConfig, p ordering.Policy) (*band, error) {
	p, kind, err := bandOrder(name, p, bc.Queue)
	if err != nil {
		return nil, err
	}
	fair := bc.Fairness
	if fair == nil {
		fair = GlobalStrict()
	}
	b := &band{
		priority:  bc.Priority,
		policy:    p,
		kind:      kind,
		fairness:  fair,
		sched:     fair.NewScheduler(),
		guarantee: bc.Guarantee,
		flows:     make(map[string]*Flow),
	}
	b.limits.Store(newBandLimits(bc))
	return b, nil
}

// setBands publishes set and re-derives the band indexes and the non-empty
// bitset from it. Called with mu held, or before c is shared.
func (c *FlowController) setBands(set *bandSet) {
	c.nonEmpty = make([]uint64, (len(set.desc)+63)/64)
	set.priorities = make([]int, len(set.desc))
	for i, b := range set.desc {
		b.index = i
		set.priorities[i] = b.priority
		if b.queued.requests > 0 {
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
// Close returns once every call that began before it is over: each
// EnqueueAndWait that queued has returned (its Observer call included), and
// each Submit's done function has returned, whether its outcome was decided
// at once, by Close, or a moment earlier on another goroutine (an expiry's
// timer, say). It does not wait for calls that begin once it has: they are
// rejected on their own goroutine, and a callback that submits again could
// otherwise hold it forever. Admissions already granted stay valid; their
// Done still returns their slots. Close may be called more than once.
//
// Close must not be called from the Observer or a Submit callback: it would
// wait for the call it runs in. It panics instead when it finds itself
// inside one while calls are still owed their outcomes (of any controller:
// it cannot tell them apart).
func (c *FlowController) Close() {
	c.closing.Store(true)
	c.shutdown()
	c.waitOwed()
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
	if c.reclaim != nil {
		c.reclaim.stop()
	}
	now := c.clock.Now()
	for _, b := range c.bands.Load().desc {
		var all []*waiter
		for _, f := range b.flows {
			for w := f.waiters.Back(); w != nil; w = w.links.Prev {
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

// ProvisionBand adds a band, or changes the capacities, TTL and guarantee
// of an existing one. For an existing band, Policy, Queue and Fairness must
// be left empty or name what the band already runs: a band's order cannot
// change while requests wait in it. A Guarantee of 0 keeps the band's
// guarantee, as an empty Policy keeps its policy; a guarantee can be
// changed, not removed. The new limits apply to requests enqueued from now on;
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
		if bc.Guarantee != 0 {
			if err := c.checkGuarantees(b, bc.Guarantee); err != nil {
				return err
			}
			b.guarantee = bc.Guarantee
		}
		b.limits.Store(lim)
		return nil
	}
	if err := c.checkGuarantees(nil, bc.Guarantee); err != nil {
		return err
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
func (c *FlowController) Clock() Clock { return c.clock.Clock }

// GateRefusals returns how many times, since New, the gate refused the
// request offered to it: each TryAcquire that returned false. A request
// that waits is offered again at each event, so under a closed gate the
// count grows with the events, not with the requests; its rate beside the
// dispatch rate tells a gate-bound controller from one bound by its
// capacities. It reads one atomic counter and takes no lock.
func (c *FlowController) GateRefusals() uint64 { return c.gate.refusals.Load() }

// InFlight returns the number of dispatched requests whose admission is not
// yet Done. Unlike CapacitySnapshot it takes the controller's lock briefly,
// unless the lock-free path counts them.
func (c *FlowController) InFlight() int {
	if c.fast != nil {
		return c.inFlightNow()
	}
	c.mu.Lock()
	defer c.unlock()
	return c.inFlight
}

// took counts an admission the gate has just granted, unless the lock-free
// path's count is the count. Called with mu held.
func (c *FlowController) took() {
	if c.fast == nil {
		c.inFlight++
	}
}

// untook takes back an admission took counted, which ended: see took.
// Called with mu held.
func (c *FlowController) untook() {
	if c.fast == nil {
		c.inFlight--
	}
}

// inFlightNow returns the admissions not yet Done. Called with mu held,
// or without it when the lock-free path counts them.
func (c *FlowController) inFlightNow() int {
	if c.fast != nil {
		return int(c.fast.slots.Taken())
	}
	return c.inFlight
}

// offer asks the gate whether the head of band b may start, counting a
// refusal. Called with mu held.
func (c *FlowController) offer(b *band) bool {
	if c.gate.TryAcquire(b.priority) {
		return true
	}
	c.gate.refusals.Add(1)
	return false
}

// openGate is the gate of a controller configured without one: it admits
// everything, and counts what it admitted, so that the controller can ask
// it without its lock. It reports no saturation.
type openGate struct{ inner gate.CountGate }

func newOpenGate() openGate {
	return openGate{gate.MaxInFlight(math.MaxInt).(gate.CountGate)}
}

func (g openGate) TryAcquire(priority int) bool { return g.inner.TryAcquire(priority) }
func (g openGate) Release(priority int)         { g.inner.Release(priority) }
func (g openGate) Count() *gate.Count           { return g.inner.Count() }
