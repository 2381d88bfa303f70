package flowcontrol_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/ordering"
)

// The state-machine test drives a controller and a plain model side by side:
// per-band slices kept in policy order, an in-flight count, and a clock.
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

type modelBand struct {
	priority int
	reqCap   capacity.Limit
	byteCap  capacity.Limit
	ttl      time.Duration
	policy   modelPolicy
	queue    []*modelReq // in dispatch order
}

func (b *modelBand) bytes() int64 {
	var n int64
	for _, r := range b.queue {
		n += r.size
	}
	return n
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
	done      bool // Done was called
}

type model struct {
	now          time.Duration
	bands        map[int]*modelBand
	fallback     int
	neverPromote bool
	reqCap       capacity.Limit
	byteCap      capacity.Limit
	defaultTTL   time.Duration
	limit        int
	inFlight     int
	closed       bool
	reqs         []*modelReq
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

func (m *model) queued() (n, bytes int64) {
	for _, b := range m.bands {
		n += int64(len(b.queue))
		bytes += b.bytes()
	}
	return n, bytes
}

func (m *model) finish(r *modelReq, o flowcontrol.Outcome, queueTime time.Duration, byContext bool) {
	r.queued, r.finished, r.outcome, r.queueTime, r.byContext = false, true, o, queueTime, byContext
	if o == flowcontrol.OutcomeDispatched {
		m.inFlight++
	}
}

// dispatch starts requests while the highest waiting band's head fits the
// gate, and returns how many it started.
func (m *model) dispatch() int {
	started := 0
	for {
		var top *modelBand
		for _, b := range m.bands {
			if len(b.queue) > 0 && (top == nil || b.priority > top.priority) {
				top = b
			}
		}
		if top == nil || m.inFlight >= m.limit {
			return started
		}
		r := top.queue[0]
		top.queue = top.queue[1:]
		m.finish(r, flowcontrol.OutcomeDispatched, m.now-r.enqueued, false)
		started++
	}
}

func (m *model) remove(r *modelReq) {
	b := m.bands[r.effective]
	i := slices.Index(b.queue, r)
	b.queue = slices.Delete(b.queue, i, i+1)
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
		m.finish(r, flowcontrol.OutcomeRejectedShutdown, 0, false)
		return
	case alreadyDone:
		m.finish(r, flowcontrol.OutcomeCancelled, 0, true)
		return
	case b == nil:
		m.finish(r, flowcontrol.OutcomeRejectedCapacity, 0, false)
		return
	}
	total, totalBytes := m.queued()
	if !b.reqCap.Allows(int64(len(b.queue))+1) || !b.byteCap.Allows(b.bytes()+r.size) ||
		!m.reqCap.Allows(total+1) || !m.byteCap.Allows(totalBytes+r.size) {
		m.finish(r, flowcontrol.OutcomeRejectedCapacity, 0, false)
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

// advance moves the clock by d, expiring requests in deadline order.
func (m *model) advance(t *rapid.T, d time.Duration) {
	target := m.now + d
	for {
		var next *modelReq
		for _, r := range m.reqs {
			if r.queued && r.expireAt > 0 && r.expireAt <= target && (next == nil || r.expireAt < next.expireAt) {
				next = r
			}
		}
		if next == nil {
			break
		}
		m.now = next.expireAt
		m.remove(next)
		m.finish(next, flowcontrol.OutcomeExpired, next.ttl, next.ctxExpiry)
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
	m.byteCap = drawLimit(rt, "globalBytes", 40)
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
		DefaultTTL:      m.defaultTTL,
	}
	newModelBand := func(p int) *modelBand {
		return &modelBand{
			priority: p,
			reqCap:   drawLimit(rt, fmt.Sprintf("band[%d].requests", p), 3),
			byteCap:  drawLimit(rt, fmt.Sprintf("band[%d].bytes", p), 20),
			ttl:      drawTTL(rt, fmt.Sprintf("band[%d].ttl", p), 5),
			policy:   modelPolicy(rapid.IntRange(0, 2).Draw(rt, fmt.Sprintf("band[%d].policy", p))),
		}
	}
	bandConfig := func(b *modelBand) flowcontrol.BandConfig {
		p, q := b.policy.config()
		return flowcontrol.BandConfig{Priority: b.priority, RequestCapacity: b.reqCap, ByteCapacity: b.byteCap, TTL: b.ttl, Policy: p, Queue: q}
	}
	for _, p := range prios {
		b := newModelBand(p)
		m.bands[p] = b
		cfg.Bands = append(cfg.Bands, bandConfig(b))
	}
	gate := &switchGate{}
	gate.set(m.limit)
	cfg.Gate = gate
	rec := &recorder{}
	cfg.Observer = rec.observe
	fc, err := flowcontrol.New(cfg)
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
			r := &modelReq{
				seq:       len(m.reqs),
				requested: rapid.IntRange(-5, 5).Draw(rt, "priority"),
				size:      rapid.Int64Range(0, 8).Draw(rt, "size"),
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
			admit := start
			if rapid.Bool().Draw(rt, "submit") {
				admit = submit
			}
			r.call = admit(ctx, fc, flowcontrol.Request{
				Key:      key(fmt.Sprint("r", r.seq), r.requested),
				ByteSize: r.size,
				TTL:      own,
			})
			m.enqueue(r, own, deadline, alreadyDone)
		},
		"cancel": func(rt *rapid.T) {
			r := pick("cancelled", func(*modelReq) bool { return true })
			r.cancel()
			if r.queued {
				m.remove(r)
				m.finish(r, flowcontrol.OutcomeCancelled, m.now-r.enqueued, true)
				m.dispatch()
			}
		},
		"done": func(rt *rapid.T) {
			r := pick("finished", func(r *modelReq) bool { return r.finished && r.outcome == flowcontrol.OutcomeDispatched && !r.done })
			<-r.call.done
			r.call.adm.Done()
			if rapid.Bool().Draw(rt, "twice") {
				r.call.adm.Done()
			}
			r.done = true
			m.inFlight--
			m.dispatch()
		},
		"nudge": func(rt *rapid.T) {
			fc.Nudge()
			m.dispatch()
		},
		"gate": func(rt *rapid.T) {
			m.limit = rapid.IntRange(0, 4).Draw(rt, "limit")
			gate.set(m.limit)
			fc.Nudge()
			m.dispatch()
		},
		"provision": func(rt *rapid.T) {
			p := rapid.SampledFrom(modelPriorities).Draw(rt, "provisioned")
			nb := newModelBand(p)
			bc := bandConfig(nb)
			old, exists := m.bands[p]
			if exists {
				bc.Policy, bc.Queue = nil, "" // keep the band's order
			}
			err := fc.ProvisionBand(bc)
			if m.closed {
				if !errors.Is(err, flowcontrol.ErrClosed) {
					rt.Fatalf("ProvisionBand after Close: %v", err)
				}
				return
			}
			if err != nil {
				rt.Fatalf("ProvisionBand(%d): %v", p, err)
			}
			if exists {
				old.reqCap, old.byteCap, old.ttl = nb.reqCap, nb.byteCap, nb.ttl
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
			fc.Close()
			if !m.closed {
				m.closed = true
				for _, r := range m.reqs {
					if r.queued {
						m.remove(r)
						m.finish(r, flowcontrol.OutcomeRejectedShutdown, m.now-r.enqueued, false)
					}
				}
			}
		},
		"": func(rt *rapid.T) {
			synctest.Wait()
			checkModel(rt, fc, m, gate, rec, epoch)
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

func checkModel(rt *rapid.T, fc *flowcontrol.FlowController, m *model, gate *switchGate, rec *recorder, epoch time.Time) {
	if got := time.Since(epoch); got != m.now {
		rt.Fatalf("clock %v, model %v", got, m.now)
	}
	if got := fc.InFlight(); got != m.inFlight {
		rt.Fatalf("InFlight %d, model %d", got, m.inFlight)
	}
	gate.mu.Lock()
	overrun, gateInFlight := gate.overrun, gate.inFlight
	gate.mu.Unlock()
	if overrun || gateInFlight != m.inFlight {
		rt.Fatalf("gate: overrun %v, in flight %d, model %d", overrun, gateInFlight, m.inFlight)
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
		want := capacity.Snapshot{Priority: p, QueuedRequests: int64(len(b.queue)), QueuedBytes: b.bytes(), RequestCapacity: b.reqCap, ByteCapacity: b.byteCap}
		if err != nil || s != want {
			rt.Fatalf("CapacitySnapshot(%d) = %v, %v; model %v", p, s, err, want)
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
		wantKey := key(id, r.effective)
		if r.outcome == flowcontrol.OutcomeDispatched {
			a := r.call.adm
			if a == nil {
				rt.Fatalf("%s: error %v; the model dispatched it", id, r.call.err)
			}
			if a.Effective() != wantKey || a.Requested() != key(id, r.requested) || a.QueueTime() != r.queueTime {
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
		deadline, canceled := errors.Is(r.call.err, context.DeadlineExceeded), errors.Is(r.call.err, context.Canceled)
		wantDeadline := r.byContext && r.outcome == flowcontrol.OutcomeExpired
		wantCanceled := r.byContext && r.outcome == flowcontrol.OutcomeCancelled
		if deadline != wantDeadline || canceled != wantCanceled {
			rt.Fatalf("%s: matches DeadlineExceeded %v Canceled %v; want %v %v (%v)", id, deadline, canceled, wantDeadline, wantCanceled, r.call.err)
		}
		if r.outcome == flowcontrol.OutcomeRejectedCapacity {
			if rej.RetryAfter < 0 || rej.RetryAfter > 30*time.Second || rej.RetryAfter%time.Second != 0 {
				rt.Fatalf("%s: RetryAfter %v", id, rej.RetryAfter)
			}
		} else if rej.RetryAfter != 0 {
			rt.Fatalf("%s: RetryAfter %v on %v", id, rej.RetryAfter, rej.Outcome)
		}
	}
	// Every outcome, also those the model has none of: an event the model
	// never produced is as wrong as a missing one.
	for o := flowcontrol.OutcomeDispatched; o <= flowcontrol.OutcomeRejectedShutdown; o++ {
		if got, n := rec.count(o), counts[o]; got != n {
			rt.Fatalf("observer saw %d %v, model %d", got, o, n)
		}
	}
}
