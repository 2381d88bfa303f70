package flowcontrol_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// The state-machine test drives a controller and a plain model side by side:
// per-band slices kept in policy order, the fairness policies as plain
// rings, fair admission as a plan over those slices, an in-flight count,
// and a clock.
//
// Determinism: each rapid iteration runs in its own synctest bubble, so time
// is fake and moves only when the test sleeps; after every action the test
// waits until every goroutine is blocked. The gate's limit changes only
// together with a Nudge, so after every event "some request waits" implies
// "the gate is full": expiries and cancellations then never start anything,
// and the order in which simultaneous expiries are processed cannot matter.

// modelPriorities are the priorities requests ask for and bands may have.
var modelPriorities = []int{-3, -2, -1, 0, 1, 2, 3}

type modelPolicy int

const (
	policyFCFSFIFO modelPolicy = iota
	policyFCFSHeap
	policyEDF
)

func (p modelPolicy) config() (ordering.Policy, ordering.QueueKind) {
	switch p {
	case policyFCFSHeap:
		return ordering.FCFS(), ordering.QueueHeap
	case policyEDF:
		return ordering.EDF(), ordering.QueueHeap
	}
	return ordering.FCFS(), ordering.QueueFIFO
}

// modelFlows are the flow IDs requests draw from; weights are the weights
// of the deficit-round-robin bands.
var (
	modelFlows   = []string{"a", "b", "c"}
	modelWeights = map[string]int64{"a": 2}
)

type modelFairness int

const (
	fairStrict modelFairness = iota
	fairRoundRobin
	fairDRR         // quantum 1: heads of cost up to 4 need several rounds
	fairDRRAdaptive // quantum: the largest head cost seen
)

func (f modelFairness) config() flowcontrol.Fairness {
	switch f {
	case fairRoundRobin:
		return flowcontrol.RoundRobin()
	case fairDRR:
		return flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{Weights: modelWeights, Quantum: 1})
	case fairDRRAdaptive:
		return flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{Weights: modelWeights})
	}
	return flowcontrol.GlobalStrict()
}

type modelBand struct {
	priority   int
	reqCap     capacity.Limit
	byteCap    capacity.Limit
	costCap    capacity.Limit
	flowReqCap capacity.Limit
	ttl        time.Duration
	policy     modelPolicy
	fairness   modelFairness
	queue      []*modelReq // in the single-queue order of the band

	// The round-robin schedulers: the flows with waiters in ring order,
	// the current one, and deficit round robin's state.
	ring     []string
	cur      int
	deficit  map[string]int64
	credited map[string]bool
	quantum  int64
}

func (b *modelBand) bytes() int64 {
	var n int64
	for _, r := range b.queue {
		n += r.size
	}
	return n
}

func (b *modelBand) cost() int64 {
	var n int64
	for _, r := range b.queue {
		n += r.cost
	}
	return n
}

// flowReqs returns flow's waiters in the band, in the band's order.
func (b *modelBand) flowReqs(flow string) []*modelReq {
	var rs []*modelReq
	for _, r := range b.queue {
		if r.flow == flow {
			rs = append(rs, r)
		}
	}
	return rs
}

func (b *modelBand) head(flow string) *modelReq { return b.flowReqs(flow)[0] }

func (b *modelBand) weight(flow string) int64 {
	if w := modelWeights[flow]; w > 0 {
		return w
	}
	return 1
}

// sawHead raises the adaptive quantum to the cost of a new head of flow.
func (b *modelBand) sawHead(flow string) {
	if b.fairness == fairDRRAdaptive {
		b.quantum = max(b.quantum, b.head(flow).cost)
	}
}

// added updates the schedulers for r, just inserted.
func (b *modelBand) added(r *modelReq) {
	if len(b.flowReqs(r.flow)) == 1 {
		// A new flow joins the ring just before the current one.
		if len(b.ring) == 0 {
			b.ring, b.cur = []string{r.flow}, 0
		} else {
			b.ring = slices.Insert(b.ring, b.cur, r.flow)
			b.cur++
		}
		b.deficit[r.flow], b.credited[r.flow] = 0, false
		b.sawHead(r.flow)
	} else if b.head(r.flow) == r {
		b.sawHead(r.flow)
	}
}

// leaveRing drops flow, which has no waiters left, from the ring.
func (b *modelBand) leaveRing(flow string) {
	i := slices.Index(b.ring, flow)
	b.ring = slices.Delete(b.ring, i, i+1)
	if i < b.cur {
		b.cur--
	}
	if b.cur >= len(b.ring) {
		b.cur = 0
	}
	delete(b.deficit, flow)
	delete(b.credited, flow)
}

// removed updates the schedulers after r left other than by dispatch;
// wasHead says it was its flow's head.
func (b *modelBand) removed(r *modelReq, wasHead bool) {
	if len(b.flowReqs(r.flow)) == 0 {
		b.leaveRing(r.flow)
	} else if wasHead {
		b.sawHead(r.flow)
	}
}

// next returns the request the band offers next, by its fairness policy.
func (b *modelBand) next() *modelReq {
	switch b.fairness {
	case fairStrict:
		return b.queue[0]
	case fairRoundRobin:
		return b.head(b.ring[b.cur])
	}
	for misses := 0; ; {
		f := b.ring[b.cur]
		if !b.credited[f] {
			b.deficit[f] += b.quantum * b.weight(f)
			b.credited[f] = true
		}
		if h := b.head(f); h.cost <= b.deficit[f] {
			return h
		}
		b.credited[f] = false
		b.cur = (b.cur + 1) % len(b.ring)
		if misses++; misses == len(b.ring) {
			// A whole round without a fit: credit at once the rounds in
			// which none would fit, as the scheduler does (heads of cost
			// up to modelMaxCost under a quantum of 1 would otherwise
			// take that many rounds).
			rounds := int64(math.MaxInt64)
			for _, g := range b.ring {
				share := b.quantum * b.weight(g)
				rounds = min(rounds, (b.head(g).cost-b.deficit[g]+share-1)/share-1)
			}
			for _, g := range b.ring {
				b.deficit[g] += rounds * b.quantum * b.weight(g)
			}
			misses = 0
		}
	}
}

// served updates the schedulers after r, the request next returned, left
// for dispatch.
func (b *modelBand) served(r *modelReq) {
	f := r.flow
	left := len(b.flowReqs(f))
	switch b.fairness {
	case fairRoundRobin:
		b.cur = (b.cur + 1) % len(b.ring)
	case fairDRR, fairDRRAdaptive:
		b.deficit[f] -= r.cost
		if left > 0 {
			b.sawHead(f)
			if b.head(f).cost <= b.deficit[f] {
				break // the turn goes on
			}
		}
		b.credited[f] = false
		b.cur = (b.cur + 1) % len(b.ring)
	}
	if left == 0 {
		b.leaveRing(f)
	}
}

// before reports whether a leaves band b before c.
func (b *modelBand) before(a, c *modelReq) bool {
	if b.policy == policyEDF {
		aClass, cClass := a.ttl <= 0, c.ttl <= 0
		if aClass != cClass {
			return !aClass
		}
		if !aClass && a.enqueued+a.ttl != c.enqueued+c.ttl {
			return a.enqueued+a.ttl < c.enqueued+c.ttl
		}
	}
	if a.enqueued != c.enqueued {
		return a.enqueued < c.enqueued
	}
	return a.seq < c.seq
}

type modelReq struct {
	seq       int
	flow      string
	cost      int64
	call      *call
	cancel    context.CancelFunc
	requested int
	effective int // band priority, or requested when no band took it
	size      int64
	enqueued  time.Duration
	ttl       time.Duration // the item's TTL; 0 = none
	expireAt  time.Duration // 0 = never
	ctxExpiry bool          // the context's deadline, not a timer, expires it

	queued    bool
	finished  bool
	outcome   flowcontrol.Outcome
	queueTime time.Duration
	byContext bool // the context ended it
	displaced bool // a fairer flow's request displaced it: ErrDisplaced
	done      bool // Done was called
	callback  callbackMode

	// In-flight eviction (see model_evict_test.go).
	dispatchSeq int           // its place in the order of dispatches
	revoked     bool          // its admission was revoked
	revokedAt   time.Duration // when
	timedOut    bool          // its revocation timed out unconfirmed
}

// callbackMode is what a Submit's done function does besides recording
// its outcome. The panicking ones panic only when the test's own goroutine
// delivers the outcome (see modelCallbacks.direct): a panic on a timer's
// or an AfterFunc's goroutine would end the test process.
type callbackMode int

const (
	callbackPlain       callbackMode = iota
	callbackDonePanic                // on a dispatch: Done at once, then panic
	callbackKeepPanic                // on a dispatch: panic, keeping the admission
	callbackRejectPanic              // on a rejection: panic
	numCallbackModes
)

type model struct {
	now          time.Duration
	bands        map[int]*modelBand
	fallback     int
	neverPromote bool
	reqCap       capacity.Limit
	byteCap      capacity.Limit
	costCap      capacity.Limit
	noDisplace   bool
	defaultTTL   time.Duration
	limit        int
	fixedGate    bool // the gt is MaxInFlight(limit): the lock-free path runs
	inFlight     int
	closed       bool
	reqs         []*modelReq
	evict        modelEviction
}

func (m *model) resolve(p int) *modelBand {
	if b, ok := m.bands[p]; ok {
		return b
	}
	if !m.neverPromote {
		return m.bands[m.fallback]
	}
	var best *modelBand
	for q, b := range m.bands {
		if q < p && (best == nil || q > best.priority) {
			best = b
		}
	}
	return best
}

func (m *model) queued() (n, bytes, cost int64) {
	for _, b := range m.bands {
		n += int64(len(b.queue))
		bytes += b.bytes()
		cost += b.cost()
	}
	return n, bytes, cost
}

func (m *model) finish(r *modelReq, o flowcontrol.Outcome, queueTime time.Duration, byContext bool) {
	r.queued, r.finished, r.outcome, r.queueTime, r.byContext = false, true, o, queueTime, byContext
	switch {
	case o != flowcontrol.OutcomeDispatched:
	case r.callback == callbackDonePanic:
		// Its callback's Done frees the slot before anything else can
		// start, so it is as if it had never been taken: the controller
		// starts with the freed slot what the model starts with it here.
		r.done = true
	default:
		m.inFlight++
		m.evict.dispatches++
		r.dispatchSeq = m.evict.dispatches
	}
}

// dispatch starts requests while the highest waiting band's head fits the
// gate, and returns how many it started.
func (m *model) dispatch() int {
	started := 0
	var held []*modelReq
	for {
		var top *modelBand
		for _, b := range m.bands {
			if len(b.queue) > 0 && (top == nil || b.priority > top.priority) {
				top = b
			}
		}
		if top == nil {
			return started + m.releaseHeld(held)
		}
		if m.inFlight >= m.limit {
			m.reclaim(top)
			return started + m.releaseHeld(held)
		}
		r := top.next()
		i := slices.Index(top.queue, r)
		top.queue = slices.Delete(top.queue, i, i+1)
		top.served(r)
		m.finish(r, flowcontrol.OutcomeDispatched, m.now-r.enqueued, false)
		if r.callback == callbackDonePanic && m.evict.on {
			// Its callback's Done runs once the dispatch is over, after
			// the lock: until then the slot is held, and a refusal of the
			// next head decides revocations with it held, as the
			// controller's does.
			r.done = false
			m.inFlight++
			m.evict.dispatches++
			r.dispatchSeq = m.evict.dispatches
			held = append(held, r)
		}
		started++
	}
}

// releaseHeld ends the admissions a dispatch held for their callbacks'
// Done (see dispatch), and dispatches again with the slots they free; it
// returns how many that started.
func (m *model) releaseHeld(held []*modelReq) int {
	for _, r := range held {
		r.done = true
		m.inFlight--
		m.ended(r)
	}
	if len(held) == 0 {
		return 0
	}
	return m.dispatch()
}

// remove takes r out of its band other than by dispatch.
func (m *model) remove(r *modelReq) {
	b := m.bands[r.effective]
	wasHead := b.head(r.flow) == r
	i := slices.Index(b.queue, r)
	b.queue = slices.Delete(b.queue, i, i+1)
	b.removed(r, wasHead)
}

// refusal is the first limit that refuses r in band b once the requests in
// plan have left, and whether a limit of the band, of the controller, or
// one that can never fit refuses it.
type modelRefusal struct {
	kind          string // "" when r fits
	bound         int64
	global, never bool
}

func (m *model) refusal(b *modelBand, r *modelReq, plan []*modelReq) modelRefusal {
	gone := func(in *modelBand) (n, bytes, cost int64) {
		for _, v := range plan {
			if in == nil || v.effective == in.priority {
				n, bytes, cost = n+1, bytes+v.size, cost+v.cost
			}
		}
		return
	}
	bn, bby, bc := gone(b)
	gn, gby, gc := gone(nil)
	tn, tby, tc := m.queued()
	var out modelRefusal
	check := func(l capacity.Limit, kind string, held, add int64, global bool) {
		n, bounded := l.Value()
		if !bounded || (held <= n && add <= n-held) {
			return // an unbounded capacity is never checked; a bounded one exactly
		}
		if out.kind == "" {
			out.kind, out.bound, out.global = kind, n, global
		}
		if add > n {
			out.never = true
		}
	}
	check(b.flowReqCap, "flow", int64(len(b.flowReqs(r.flow))), 1, false)
	check(b.reqCap, "requests", int64(len(b.queue))-bn, 1, false)
	check(b.byteCap, "bytes", b.bytes()-bby, r.size, false)
	check(b.costCap, "cost", b.cost()-bc, r.cost, false)
	check(m.reqCap, "requests", tn-gn, 1, true)
	check(m.byteCap, "bytes", tby-gby, r.size, true)
	check(m.costCap, "cost", tc-gc, r.cost, true)
	return out
}

// displacement plans the requests r displaces to fit band b, or returns
// false when it is refused.
func (m *model) displacement(b *modelBand, r *modelReq) ([]*modelReq, bool) {
	var plan []*modelReq
	for {
		ref := m.refusal(b, r, plan)
		if ref.kind == "" {
			return plan, true
		}
		if m.noDisplace || ref.kind == "flow" || ref.never || len(plan) == 8 {
			return nil, false
		}
		measure := func(v *modelReq) int64 {
			switch ref.kind {
			case "bytes":
				return v.size
			case "cost":
				return v.cost
			}
			return 1
		}
		// The scope's flows, each a (band, flow) pair, and what they hold
		// once the plan has left.
		type flowKey struct {
			band int
			flow string
		}
		held := map[flowKey]int64{}
		newest := map[flowKey]*modelReq{}
		for p, in := range m.bands {
			if p != b.priority && !ref.global {
				continue
			}
			for _, v := range in.queue {
				if slices.Contains(plan, v) {
					continue
				}
				k := flowKey{p, v.flow}
				held[k] += measure(v)
				if newest[k] == nil || v.seq > newest[k].seq {
					newest[k] = v
				}
			}
		}
		// The flows holding some of the capacity, r's counted once.
		mine := flowKey{b.priority, r.flow}
		var flows int64
		for _, h := range held {
			if h > 0 {
				flows++
			}
		}
		if held[mine] <= 0 {
			flows++
		}
		var best flowKey
		found := false
		for k, h := range held {
			if k == mine || h <= 0 || k.band > b.priority {
				continue
			}
			if !found || h > held[best] || (h == held[best] && (k.band < best.band || (k.band == best.band && newest[k].seq > newest[best].seq))) {
				best, found = k, true
			}
		}
		if !found || held[mine] >= ref.bound/flows || held[best] <= held[mine]+measure(r) {
			return nil, false
		}
		plan = append(plan, newest[best])
	}
}

// enqueue applies a request for priority p; deadline > 0 gives its context a
// deadline that far ahead.
func (m *model) enqueue(r *modelReq, own, deadline time.Duration, alreadyDone bool) {
	b := m.resolve(r.requested)
	r.effective = r.requested
	if b != nil {
		r.effective = b.priority
	}
	switch {
	case m.closed: // shutdown wins over a done context
		m.finish(r, flowcontrol.OutcomeRejectedShuttingDown, 0, false)
		return
	case alreadyDone:
		m.finish(r, flowcontrol.OutcomeRejectedContextCancelled, 0, true)
		return
	case b == nil:
		m.finish(r, flowcontrol.OutcomeRejectedSaturated, 0, false)
		return
	}
	plan, ok := m.displacement(b, r)
	if !ok {
		m.finish(r, flowcontrol.OutcomeRejectedSaturated, 0, false)
		return
	}
	for _, v := range plan {
		m.remove(v)
		// It never reached a server: rejected-saturated, ErrDisplaced
		// beside it.
		v.displaced = true
		m.finish(v, flowcontrol.OutcomeRejectedSaturated, m.now-v.enqueued, false)
	}
	// With nothing waiting at or above its band and a free slot, the
	// request starts at once: it never joins a queue, and the fairness
	// policy never sees it (an adaptive quantum does not grow for it).
	first := m.inFlight < m.limit
	for p, in := range m.bands {
		if p >= b.priority && len(in.queue) > 0 {
			first = false
		}
	}
	if first {
		r.enqueued = m.now
		m.finish(r, flowcontrol.OutcomeDispatched, 0, false)
		return
	}
	ttl := minPositive(minPositive(b.ttl, m.defaultTTL), own)
	if deadline > 0 && (ttl == 0 || deadline <= ttl) {
		ttl, r.ctxExpiry = deadline, true
	}
	r.enqueued, r.ttl, r.queued = m.now, ttl, true
	if ttl > 0 {
		r.expireAt = m.now + ttl
	}
	i := 0
	for i < len(b.queue) && b.before(b.queue[i], r) {
		i++
	}
	b.queue = slices.Insert(b.queue, i, r)
	b.added(r)
	m.dispatch()
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// advance moves the clock by d, expiring requests in deadline order and
// taking the eviction decisions its wake-ups take.
func (m *model) advance(t *rapid.T, d time.Duration) {
	target := m.now + d
	for {
		var next *modelReq
		for _, r := range m.reqs {
			if r.queued && r.expireAt > 0 && r.expireAt <= target && (next == nil || r.expireAt < next.expireAt) {
				next = r
			}
		}
		if wake, ok := m.nextWake(target); ok && (next == nil || wake < next.expireAt) {
			m.now = wake
			m.dispatch()
			continue
		}
		if next == nil {
			break
		}
		m.now = next.expireAt
		m.remove(next)
		m.finish(next, flowcontrol.OutcomeRejectedTTLExpired, next.ttl, next.ctxExpiry)
		if m.dispatch() != 0 {
			t.Fatalf("model: an expiry started a request; the test's determinism argument is broken")
		}
	}
	m.now = target
}

func TestControllerMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// One fresh bubble per case. rapid reports failures, and draws past
		// the end of a shrunk case, by panicking; carry the panic out of
		// the bubble's goroutine to rapid's.
		var failure any
		synctest.Test(t, func(*testing.T) {
			defer func() { failure = recover() }()
			runModel(rt)
		})
		rethrow(failure)
	})
}

// rethrow re-raises a panic recovered in a bubble. rapid's shrinker tells
// failures apart by the traceback of their panic, so each kind is raised
// from its own line: a shrunk case that merely ran out of data must not
// look like the failure being shrunk.
func rethrow(failure any) {
	switch kind := fmt.Sprintf("%T", failure); {
	case failure == nil:
	case kind == "rapid.invalidData":
		panic(failure)
	case kind == "rapid.stopTest":
		panic(failure)
	default:
		panic(failure)
	}
}

func drawLimit(rt *rapid.T, label string, maxBound int64) capacity.Limit {
	if rapid.Bool().Draw(rt, label+"-bounded") {
		return capacity.Bounded(rapid.Int64Range(0, maxBound).Draw(rt, label))
	}
	return capacity.Unbounded()
}

// modelMaxCost and modelMaxBytes are the model's copy of the controller's
// clamp (flowcontrol.MaxRequestCost and MaxRequestBytes, both 1 << 40): a
// cost above it counts as it, one of 0 or less as 1; a byte size above it
// counts as it, a negative one as 0. The model keeps its own copy so that
// it states the semantics rather than reads them from the code under test.
const (
	modelMaxCost  int64 = 1 << 40
	modelMaxBytes int64 = 1 << 40
)

// drawHuge draws a client-supplied number: mostly small, sometimes anywhere
// up to MaxInt64, sometimes at the clamp's edges.
func drawHuge(rt *rapid.T, label string, small int64) int64 {
	return rapid.OneOf(
		rapid.Int64Range(-1, small),
		rapid.Int64Range(-1, small),
		rapid.Int64Range(math.MinInt64, math.MaxInt64),
		rapid.SampledFrom([]int64{modelMaxCost - 1, modelMaxCost, modelMaxCost + 1, math.MaxInt64 - 1, math.MaxInt64}),
	).Draw(rt, label)
}

// drawHugeLimit is drawLimit with a bound that is sometimes in the range
// of huge costs and sizes: a few of them fit, and the exact check matters.
func drawHugeLimit(rt *rapid.T, label string, maxBound int64) capacity.Limit {
	if rapid.IntRange(0, 3).Draw(rt, label+"-huge") == 0 {
		return capacity.Bounded(rapid.SampledFrom([]int64{modelMaxCost - 1, modelMaxCost, 2 * modelMaxCost, 3*modelMaxCost + 1, math.MaxInt64}).Draw(rt, label))
	}
	return drawLimit(rt, label, maxBound)
}

func drawTTL(rt *rapid.T, label string, maxSeconds int) time.Duration {
	if rapid.Bool().Draw(rt, label+"-set") {
		return time.Duration(rapid.IntRange(1, maxSeconds).Draw(rt, label)) * time.Second
	}
	return 0
}

func runModel(rt *rapid.T) {
	m := &model{bands: make(map[int]*modelBand)}
	m.neverPromote = rapid.Bool().Draw(rt, "neverPromote")
	m.reqCap = drawLimit(rt, "globalRequests", 6)
	m.byteCap = drawHugeLimit(rt, "globalBytes", 40)
	m.costCap = drawHugeLimit(rt, "globalCost", 12)
	m.noDisplace = rapid.Bool().Draw(rt, "noDisplacement")
	m.defaultTTL = drawTTL(rt, "defaultTTL", 8)
	m.limit = rapid.IntRange(0, 3).Draw(rt, "gateLimit")

	prios := rapid.SliceOfNDistinct(rapid.SampledFrom(modelPriorities), 1, len(modelPriorities), rapid.ID[int]).Draw(rt, "bands")
	if !m.neverPromote && !slices.Contains(prios, 0) {
		prios = append(prios, 0)
	}
	cfg := flowcontrol.Config{
		NeverPromote:    m.neverPromote,
		RequestCapacity: m.reqCap,
		ByteCapacity:    m.byteCap,
		CostCapacity:    m.costCap,
		NoDisplacement:  m.noDisplace,
		DefaultTTL:      m.defaultTTL,
	}
	newModelBand := func(p int) *modelBand {
		return &modelBand{
			priority:   p,
			reqCap:     drawLimit(rt, fmt.Sprintf("band[%d].requests", p), 4),
			byteCap:    drawHugeLimit(rt, fmt.Sprintf("band[%d].bytes", p), 20),
			costCap:    drawHugeLimit(rt, fmt.Sprintf("band[%d].cost", p), 10),
			flowReqCap: drawLimit(rt, fmt.Sprintf("band[%d].flowRequests", p), 3),
			ttl:        drawTTL(rt, fmt.Sprintf("band[%d].ttl", p), 5),
			policy:     modelPolicy(rapid.IntRange(0, 2).Draw(rt, fmt.Sprintf("band[%d].policy", p))),
			fairness:   modelFairness(rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("band[%d].fairness", p))),
			deficit:    map[string]int64{},
			credited:   map[string]bool{},
			quantum:    1,
		}
	}
	bandConfig := func(b *modelBand) flowcontrol.BandConfig {
		p, q := b.policy.config()
		return flowcontrol.BandConfig{
			Priority: b.priority, RequestCapacity: b.reqCap, ByteCapacity: b.byteCap, CostCapacity: b.costCap,
			FlowRequestCapacity: b.flowReqCap, TTL: b.ttl, Policy: p, Queue: q, Fairness: b.fairness.config(),
		}
	}
	for _, p := range prios {
		b := newModelBand(p)
		m.bands[p] = b
		cfg.Bands = append(cfg.Bands, bandConfig(b))
	}
	gt := &switchGate{}
	gt.set(m.limit)
	cfg.Gate = gt
	// MaxInFlight, whose limit is fixed, starts requests and ends
	// admissions without the controller's lock while nothing waits: the
	// model holds it to the same decisions.
	if m.fixedGate = rapid.Bool().Draw(rt, "maxInFlight"); m.fixedGate {
		cfg.Gate = gate.MaxInFlight(m.limit)
	}
	rec := &recorder{}
	cfg.Observer = rec.observe
	revs := &revocations{}
	if e := m.drawEviction(rt); e != nil {
		cfg.Eviction = e
		cfg.Revocations = revs.record
	}
	cb := &modelCallbacks{}
	fc, err := flowcontrol.New(cfg)
	if m.evict.on && !m.evictable() {
		// Eviction with no band to take victims from, or none to take
		// them for, can never act: New refuses it, naming the field.
		if err == nil || !strings.Contains(err.Error(), "flowcontrol: Eviction") {
			rt.Fatalf("New with eviction and bands %v below %d: %v, want an error naming Eviction", cfg.Bands, m.evict.below, err)
		}
		return
	}
	if err != nil {
		rt.Fatalf("New: %v", err)
	}
	epoch := time.Now()
	defer func() {
		// Leave the bubble clean even when the case fails.
		fc.Close()
		for _, r := range m.reqs {
			r.cancel()
			<-r.call.done
			if r.call.adm != nil {
				r.call.adm.Done()
			}
		}
	}()

	pick := func(label string, ok func(*modelReq) bool) *modelReq {
		var cands []*modelReq
		for _, r := range m.reqs {
			if ok(r) {
				cands = append(cands, r)
			}
		}
		if len(cands) == 0 {
			rt.Skip("nothing to pick")
		}
		return rapid.SampledFrom(cands).Draw(rt, label)
	}

	actions := map[string]func(*rapid.T){
		"enqueue": func(rt *rapid.T) {
			cost, size := drawHuge(rt, "cost", 4), drawHuge(rt, "size", 8)
			r := &modelReq{
				seq:       len(m.reqs),
				flow:      rapid.SampledFrom(modelFlows).Draw(rt, "flow"),
				cost:      min(max(cost, 1), modelMaxCost),
				requested: rapid.IntRange(-5, 5).Draw(rt, "priority"),
				size:      min(max(size, 0), modelMaxBytes),
			}
			own := drawTTL(rt, "ownTTL", 6)
			deadline := drawTTL(rt, "ctxDeadline", 6)
			alreadyDone := rapid.IntRange(0, 19).Draw(rt, "ctxDoneFirst") == 0
			ctx, cancel := context.WithCancel(context.Background())
			if deadline > 0 {
				ctx, cancel = context.WithTimeout(context.Background(), deadline)
			}
			if alreadyDone {
				cancel()
			}
			r.cancel = cancel
			m.reqs = append(m.reqs, r)
			fr := flowcontrol.Request{Key: key(r.flow, r.requested), ByteSize: size, Cost: cost, TTL: own}
			if rapid.Bool().Draw(rt, "submit") {
				r.callback = callbackMode(rapid.IntRange(0, int(numCallbackModes)-1).Draw(rt, "callback"))
				r.call = &call{req: fr, done: make(chan struct{})}
				cb.directly(rt, func() { cb.submit(ctx, fc, r.call, r.callback) })
			} else {
				r.call = start(ctx, fc, fr)
			}
			m.enqueue(r, own, deadline, alreadyDone)
		},
		"cancel": func(rt *rapid.T) {
			r := pick("cancelled", func(*modelReq) bool { return true })
			r.cancel()
			if r.queued {
				m.remove(r)
				m.finish(r, flowcontrol.OutcomeRejectedContextCancelled, m.now-r.enqueued, true)
				m.dispatch()
			}
		},
		"done": func(rt *rapid.T) {
			r := pick("finished", func(r *modelReq) bool { return r.finished && r.outcome == flowcontrol.OutcomeDispatched && !r.done })
			<-r.call.done
			cb.directly(rt, r.call.adm.Done)
			if rapid.Bool().Draw(rt, "twice") {
				r.call.adm.Done()
			}
			r.done = true
			m.inFlight--
			m.ended(r)
			m.dispatch()
		},
		"nudge": func(rt *rapid.T) {
			cb.directly(rt, fc.Nudge)
			m.dispatch()
		},
		"gate": func(rt *rapid.T) {
			if m.fixedGate {
				rt.Skip("MaxInFlight's limit is fixed")
			}
			m.limit = rapid.IntRange(0, 4).Draw(rt, "limit")
			gt.set(m.limit)
			cb.directly(rt, fc.Nudge)
			m.dispatch()
		},
		"provision": func(rt *rapid.T) {
			p := rapid.SampledFrom(modelPriorities).Draw(rt, "provisioned")
			nb := newModelBand(p)
			bc := bandConfig(nb)
			old, exists := m.bands[p]
			if exists {
				bc.Policy, bc.Queue, bc.Fairness = nil, "", nil // keep the band's order
			}
			err := fc.ProvisionBand(bc)
			if m.closed {
				if !errors.Is(err, flowcontrol.ErrRejectedShuttingDown) {
					rt.Fatalf("ProvisionBand after Close: %v", err)
				}
				return
			}
			if err != nil {
				rt.Fatalf("ProvisionBand(%d): %v", p, err)
			}
			if exists {
				old.reqCap, old.byteCap, old.costCap, old.flowReqCap, old.ttl = nb.reqCap, nb.byteCap, nb.costCap, nb.flowReqCap, nb.ttl
			} else {
				m.bands[p] = nb
			}
		},
		"advance": func(rt *rapid.T) {
			d := rapid.SampledFrom([]time.Duration{
				time.Nanosecond, 250 * time.Millisecond, 999 * time.Millisecond,
				time.Second, 1500 * time.Millisecond, 3 * time.Second,
			}).Draw(rt, "advance")
			time.Sleep(d)
			m.advance(rt, d)
		},
		"close": func(rt *rapid.T) {
			if rapid.IntRange(0, 9).Draw(rt, "closeNow") != 0 {
				rt.Skip("close is rare: it ends every case it happens in")
			}
			cb.directly(rt, fc.Close)
			if !m.closed {
				m.closed = true
				for _, r := range m.reqs {
					if r.queued {
						m.remove(r)
						m.finish(r, flowcontrol.OutcomeRejectedShuttingDown, m.now-r.enqueued, false)
					}
				}
			}
		},
		"": func(rt *rapid.T) {
			synctest.Wait()
			checkModel(rt, fc, m, gt, rec, epoch)
			checkEviction(rt, m, revs)
		},
	}
	// rapid picks actions uniformly: weight the common ones by listing
	// them more than once.
	for i := 2; i <= 4; i++ {
		actions[fmt.Sprint("enqueue", i)] = actions["enqueue"]
	}
	actions["advance2"] = actions["advance"]
	actions["done2"] = actions["done"]
	rt.Repeat(actions)
}

func checkModel(rt *rapid.T, fc *flowcontrol.FlowController, m *model, gt *switchGate, rec *recorder, epoch time.Time) {
	if got := time.Since(epoch); got != m.now {
		rt.Fatalf("clock %v, model %v", got, m.now)
	}
	if got := fc.InFlight(); got != m.inFlight {
		rt.Fatalf("InFlight %d, model %d", got, m.inFlight)
	}
	if !m.fixedGate { // MaxInFlight's count is what InFlight read
		gt.mu.Lock()
		overrun, gateInFlight := gt.overrun, gt.inFlight
		gt.mu.Unlock()
		if overrun || gateInFlight != m.inFlight {
			rt.Fatalf("gate: overrun %v, in flight %d, model %d", overrun, gateInFlight, m.inFlight)
		}
	}
	for _, p := range append([]int{-5, 5}, modelPriorities...) {
		s, err := fc.CapacitySnapshot(p)
		b, ok := m.bands[p]
		if !ok {
			if !errors.Is(err, capacity.ErrBandNotFound) {
				rt.Fatalf("CapacitySnapshot(%d) of a missing band: %v, %v", p, s, err)
			}
			continue
		}
		want := capacity.Snapshot{
			Priority: p, QueuedRequests: int64(len(b.queue)), QueuedBytes: b.bytes(), QueuedCost: b.cost(),
			RequestCapacity: b.reqCap, ByteCapacity: b.byteCap, CostCapacity: b.costCap,
		}
		if err != nil {
			rt.Fatalf("CapacitySnapshot(%d): %v", p, err)
		}
		if diff := cmp.Diff(want, s, cmpopts.EquateComparable(capacity.Limit{})); diff != "" {
			rt.Fatalf("CapacitySnapshot(%d) differs from the model (-model +controller):\n%s", p, diff)
		}
	}
	counts := map[flowcontrol.Outcome]int{}
	for _, r := range m.reqs {
		id := fmt.Sprint("r", r.seq)
		if !r.finished {
			if r.call.finished() {
				rt.Fatalf("%s returned (%v, %v); the model has it queued in band %d", id, r.call.adm, r.call.err, r.effective)
			}
			continue
		}
		counts[r.outcome]++
		if !r.call.finished() {
			rt.Fatalf("%s still waits; the model says %v", id, r.outcome)
		}
		wantKey := key(r.flow, r.effective)
		if r.outcome == flowcontrol.OutcomeDispatched {
			a := r.call.adm
			if a == nil {
				rt.Fatalf("%s: error %v; the model dispatched it", id, r.call.err)
			}
			if a.Effective() != wantKey || a.Requested() != key(r.flow, r.requested) || a.QueueTime() != r.queueTime {
				rt.Fatalf("%s: effective %v requested %v queued %v; model %v, %d, %v", id, a.Effective(), a.Requested(), a.QueueTime(), wantKey, r.requested, r.queueTime)
			}
			continue
		}
		var rej *flowcontrol.RejectionError
		if !errors.As(r.call.err, &rej) {
			rt.Fatalf("%s: admission %v error %v; the model says %v", id, r.call.adm, r.call.err, r.outcome)
		}
		if rej.Outcome != r.outcome || rej.Effective != wantKey || rej.QueueTime != r.queueTime {
			rt.Fatalf("%s: %v in %v after %v; model %v in %v after %v (%v)", id, rej.Outcome, rej.Effective, rej.QueueTime, r.outcome, wantKey, r.queueTime, r.call.err)
		}
		if displaced := errors.Is(r.call.err, flowcontrol.ErrDisplaced); displaced != r.displaced {
			rt.Fatalf("%s: matches ErrDisplaced %v; the model says displaced %v (%v)", id, displaced, r.displaced, r.call.err)
		}
		deadline, canceled := errors.Is(r.call.err, context.DeadlineExceeded), errors.Is(r.call.err, context.Canceled)
		wantDeadline := r.byContext && r.outcome == flowcontrol.OutcomeRejectedTTLExpired
		wantCanceled := r.byContext && r.outcome == flowcontrol.OutcomeRejectedContextCancelled
		if deadline != wantDeadline || canceled != wantCanceled {
			rt.Fatalf("%s: matches DeadlineExceeded %v Canceled %v; want %v %v (%v)", id, deadline, canceled, wantDeadline, wantCanceled, r.call.err)
		}
		// Retry-After: whole seconds in [1s, 30s] on every refusal that
		// can be retried — a capacity rejection of a request that can fit,
		// a displacement, an expiry of a queued request — 1s on an empty
		// pool, none otherwise.
		inRange := rej.RetryAfter >= time.Second && rej.RetryAfter <= 30*time.Second && rej.RetryAfter%time.Second == 0
		switch {
		case r.displaced, r.outcome == flowcontrol.OutcomeRejectedTTLExpired && rej.QueueTime > 0:
			if !inRange {
				rt.Fatalf("%s: RetryAfter %v on %v", id, rej.RetryAfter, rej.Outcome)
			}
		case r.outcome == flowcontrol.OutcomeRejectedSaturated:
			if !inRange && rej.RetryAfter != 0 {
				rt.Fatalf("%s: RetryAfter %v", id, rej.RetryAfter)
			}
			if errors.Is(rej, flowcontrol.ErrTooLarge) && rej.RetryAfter != 0 {
				rt.Fatalf("%s: RetryAfter %v on a request that can never fit", id, rej.RetryAfter)
			}
		case r.outcome == flowcontrol.OutcomeRejectedNoEndpoints:
			if rej.RetryAfter != time.Second {
				rt.Fatalf("%s: RetryAfter %v on %v, want 1s", id, rej.RetryAfter, rej.Outcome)
			}
		case rej.RetryAfter != 0:
			rt.Fatalf("%s: RetryAfter %v on %v", id, rej.RetryAfter, rej.Outcome)
		}
	}
	// Every outcome, also those the model has none of: an event the model
	// never produced is as wrong as a missing one.
	observed := map[flowcontrol.Outcome]int{}
	if m.evict.issued > 0 {
		counts[flowcontrol.OutcomeEvictedPriority] = m.evict.issued
	}
	for o := flowcontrol.OutcomeDispatched; o <= flowcontrol.OutcomeEvictedPriority; o++ {
		if n := rec.count(o); n > 0 {
			observed[o] = n
		}
	}
	if diff := cmp.Diff(counts, observed); diff != "" {
		rt.Fatalf("observed outcomes differ from the model (-model +observer):\n%s", diff)
	}
}

// modelCallbacks makes the done functions of the model's Submits, and
// knows when one may panic: only while the test's goroutine is inside a
// call of its own into the controller (directly), whose deliveries, and
// their panics, happen on that goroutine.
type modelCallbacks struct {
	direct atomic.Bool
	raised atomic.Int64 // panics raised by callbacks during the direct call
}

// directly runs f, a call into the controller, on the test's goroutine,
// letting callbacks panic; it recovers their panic and checks that f
// panicked exactly when a callback did.
func (cb *modelCallbacks) directly(rt *rapid.T, f func()) {
	cb.raised.Store(0)
	cb.direct.Store(true)
	var got any
	func() {
		defer func() { got = recover() }()
		f()
	}()
	cb.direct.Store(false)
	if got != nil && got != "callback boom" {
		panic(got) // rapid's own, or the controller's
	}
	if raised := cb.raised.Load(); (got != nil) != (raised > 0) {
		rt.Fatalf("%d callbacks panicked; the call into the controller panicked with %v", raised, got)
	}
}

// submit is the helpers' submit of c.req, with a callback that records the
// outcome in c, exactly once, and then does what mode says. (c is made
// beforehand: Submit may panic with its callback.)
func (cb *modelCallbacks) submit(ctx context.Context, fc *flowcontrol.FlowController, c *call, mode callbackMode) {
	fc.Submit(ctx, c.req, c.callback(func(adm *flowcontrol.Admission, err error) {
		if mode == callbackDonePanic && adm != nil {
			adm.Done()
		}
		if !cb.direct.Load() {
			return
		}
		if (adm != nil && (mode == callbackDonePanic || mode == callbackKeepPanic)) || (err != nil && mode == callbackRejectPanic) {
			cb.raised.Add(1)
			panic("callback boom")
		}
	}))
}
