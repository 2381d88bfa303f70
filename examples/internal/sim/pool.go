package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// PoolConfig describes the model servers behind the controller.
//
// Each server runs up to Slots requests at once. A request's time to first
// token is Base + PromptTokens × PerPromptToken (the prefill); it then
// decodes for OutputTokens × PerOutputToken, and its response is complete.
// The arithmetic is on integers, so a request's service time is exact on
// every platform.
type PoolConfig struct {
	Servers, Slots int
	Base           time.Duration
	PerPromptToken time.Duration
	PerOutputToken time.Duration
	// Failures take servers down for a while.
	Failures []Failure
	// ServerQueues sends each admitted request at once to one healthy
	// server — the one with the fewest waiting, then the fewest running,
	// then the lowest index, as a router's queue and running-request
	// scorers pick an endpoint; with the Priority scheduler, first one
	// where it starts at once (a free slot, or a lower priority to
	// preempt) or else waits behind the fewest it cannot pass, as a
	// router that knows the bands it sent picks — where it waits in that
	// server's own queue until it can run (first come, or in priority
	// order with the Priority scheduler). Its time to first token then
	// counts from the start of its prefill, after that wait. Without
	// ServerQueues, admitted requests that find no free slot wait in one
	// queue of the pool for the first slot that frees.
	ServerQueues bool
	// KVCacheTokens, with ServerQueues, is each server's KV cache in
	// tokens, paged as vLLM's is: a running request holds its prompt's
	// tokens from its start and one more for each output token decoded.
	// The head of a server's queue starts only when its context (prompt,
	// and the output tokens a preemption kept) fits in what is free (or
	// nothing runs). When the decoding requests outgrow the cache, one is
	// preempted by recompute, as vLLM preempts: the one started last
	// (FirstCome) or the one of lowest priority, latest arrival among
	// ties (Priority). 0 means no KV-cache limit: only Slots bounds what
	// runs.
	//
	// A preempted request frees its KV cache and keeps the output tokens
	// it decoded: its output goes on from where it was, and a first token
	// it already sent stands. It goes back to its server's queue (at the
	// head with FirstCome, in its priority order with Priority), and when
	// it runs again its prefill is recomputed over its prompt and the
	// tokens it kept (Base + (prompt + kept) × PerPromptToken), after
	// which it decodes what is left. Record.Preemptions and
	// Record.RecomputedTokens count them.
	KVCacheTokens int
	// Scheduler is how each server picks the next request of its queue
	// (with ServerQueues), as vLLM's --scheduling-policy: FirstCome, the
	// zero value, or Priority.
	Scheduler Scheduler
	// PriorityOf, with the Priority scheduler, is the hand-off: the
	// priority the router sets on each admitted attempt (vLLM's request
	// "priority", lower runs first) from the band it was admitted from
	// (flowcontrol.Admission.Effective). nil hands nothing: every request
	// has priority 0, and the Priority scheduler then orders by arrival
	// alone and preempts nothing for a waiting request.
	PriorityOf func(band int) int
}

// Scheduler is a model server's scheduling policy: which waiting request
// runs next, and which running request a preemption takes. Both follow
// vLLM's (its --scheduling-policy fcfs and priority).
type Scheduler int

const (
	// FirstCome runs a server's queue in arrival order; a request
	// preempted for KV cache goes back to the head of the queue, and the
	// request a KV-cache overflow preempts is the one started last. A
	// waiting request never preempts a running one.
	FirstCome Scheduler = iota
	// Priority orders a server's queue by (priority, arrival at the
	// server): lower priority values first, ties first come (see
	// PoolConfig.PriorityOf). When the head of the queue cannot start —
	// no free slot, or no room in the KV cache for its context — and a
	// running request has a higher priority value, the running request
	// of the highest value, the latest arrival among ties, is preempted
	// by recompute (see PoolConfig.KVCacheTokens) and goes back to the
	// queue in its order; this repeats until the head starts or no
	// running request has a higher value. A KV-cache overflow preempts
	// the same victim.
	Priority
)

// String returns "fcfs" or "priority", vLLM's names for the policy.
func (s Scheduler) String() string {
	switch s {
	case FirstCome:
		return "fcfs"
	case Priority:
		return "priority"
	}
	return fmt.Sprintf("Scheduler(%d)", int(s))
}

// Failure takes Server down at At for For: the requests it is running fail
// (their clients see a server error) and its slots are gone until it
// recovers.
type Failure struct {
	Server  int
	At, For time.Duration
}

func (pc PoolConfig) validate() error {
	switch {
	case pc.Servers < 1:
		return fmt.Errorf("sim: Pool.Servers %d is below 1", pc.Servers)
	case pc.Slots < 1:
		return fmt.Errorf("sim: Pool.Slots %d is below 1", pc.Slots)
	case pc.Base < 0 || pc.PerPromptToken < 0 || pc.PerOutputToken < 0:
		return fmt.Errorf("sim: Pool.Base %v, PerPromptToken %v and PerOutputToken %v must not be negative",
			pc.Base, pc.PerPromptToken, pc.PerOutputToken)
	case pc.KVCacheTokens < 0 || (pc.KVCacheTokens > 0 && !pc.ServerQueues):
		return fmt.Errorf("sim: Pool.KVCacheTokens %d: want 0, or a positive size with ServerQueues", pc.KVCacheTokens)
	case pc.Scheduler != FirstCome && pc.Scheduler != Priority:
		return fmt.Errorf("sim: Pool.Scheduler %v: want FirstCome or Priority", pc.Scheduler)
	case pc.Scheduler == Priority && !pc.ServerQueues:
		return errors.New("sim: Pool.Scheduler is Priority without ServerQueues: only a server's own queue has a scheduler")
	case pc.PriorityOf != nil && pc.Scheduler != Priority:
		return errors.New("sim: Pool.PriorityOf is set but Pool.Scheduler is FirstCome, which ignores request priorities")
	}
	for i, f := range pc.Failures {
		if f.Server < 0 || f.Server >= pc.Servers || f.At < 0 || f.For <= 0 {
			return fmt.Errorf("sim: Pool.Failures[%d] %+v: want 0 <= Server < %d, At >= 0, For > 0", i, f, pc.Servers)
		}
	}
	return nil
}

// Pool is the simulated model servers. Its [Pool.Gate] admits a request
// while a healthy server has a free slot; requests admitted beyond that (by
// another gate) wait in the pool's own FIFO queue, as they would in a model
// server's waiting queue — or, with [PoolConfig.ServerQueues], in the queue
// of the server they were sent to, in the order of its
// [PoolConfig.Scheduler].
type Pool struct {
	cfg     PoolConfig
	clock   *Clock
	servers []server
	// waiting holds admitted requests that found no free slot (without
	// ServerQueues).
	waiting []*job
	// healthySlots is Slots times the healthy servers; admitted counts
	// the requests the gate let in and that have not released yet.
	healthySlots, admitted int
	// maxWaiting is the longest waiting queue seen since the last
	// ResetMaxWaiting.
	maxWaiting int
	// firstToken makes the pool report each request's first token to its
	// admission, at that virtual instant (for a metered gate).
	firstToken bool
	// preemptions counts the preemptions, for KV cache or for a waiting
	// request of higher priority.
	preemptions int
	// arrivals numbers the attempts in the order they reach a server, to
	// break ties of arrival time.
	arrivals uint64
	// held lists the attempts the pool holds, admitted and not yet ended,
	// for Abort: each record names its attempt's place (Record.held), and
	// unused places are in vacant, to be used again.
	held   []*job
	vacant []int
	nudge  func() // the controllers' Nudge, once they exist
	// revoked counts, for Abort, the revocation of an attempt of a
	// record and returns its client's response (Sim.rejection).
	revoked func(*Record, error) Response
}

type server struct {
	healthy bool
	running []*job
	queue   []*job // with ServerQueues: sent here, not yet running
	// overflow is the pending check for when the running requests'
	// growth overflows the KV cache (with KVCacheTokens).
	overflow flowcontrol.Timer
	// With KVCacheTokens, what its running requests hold: the prompts of
	// all; and of those decoding, their number, the sum of the instants
	// their decode began, and their output tokens.
	prompts, decoding, decodeSince, outputs int64
}

// job is one admitted attempt on its way through the pool.
type job struct {
	rec     *Record
	adm     *flowcontrol.Admission
	respond func(Response)
	// server is the server it runs on, or whose queue it waits in (with
	// ServerQueues).
	server  int
	index   int // in its server's running list
	started time.Duration
	// decodeAt is when its prefill ends and its first token comes.
	decodeAt time.Duration
	// firstAt is when its first token came, once sent is set; a request
	// preempted after its first token keeps it.
	firstAt time.Duration
	sent    bool
	// decoding is set while it runs past its prefill (with KVCacheTokens).
	decoding bool
	// priority is the priority handed to its server (PoolConfig.PriorityOf);
	// arrived is when it reached the server, and seq its place in the order
	// of arrivals, which breaks ties.
	priority int
	arrived  time.Duration
	seq      uint64
	// kept counts the output tokens decoded in runs a preemption ended,
	// which it keeps; context is what its current run prefilled (its
	// prompt and kept), and runs how many runs it started.
	kept, context, runs int
	done                flowcontrol.Timer // the completion event
	first               flowcontrol.Timer // the first-token event, when it is scheduled
}

func newPool(cfg PoolConfig, clock *Clock) *Pool {
	p := &Pool{cfg: cfg, clock: clock, servers: make([]server, cfg.Servers), healthySlots: cfg.Servers * cfg.Slots}
	for i := range p.servers {
		p.servers[i].healthy = true
	}
	for _, f := range cfg.Failures {
		clock.At(f.At, func() { p.fail(f.Server) })
		clock.At(f.At+f.For, func() { p.recover(f.Server) })
	}
	return p
}

// Gate returns the pool's gate: it admits a request while the requests it
// admitted and that are not yet done are fewer than the healthy servers'
// slots. Use it in one controller only.
func (p *Pool) Gate() gate.Gate { return poolGate{p} }

type poolGate struct{ p *Pool }

func (g poolGate) TryAcquire(int) bool {
	if g.p.admitted >= g.p.healthySlots {
		return false
	}
	g.p.admitted++
	return true
}

func (g poolGate) Release(int) { g.p.admitted-- }

// Running returns the number of requests the servers are running.
func (p *Pool) Running() int {
	if !p.cfg.ServerQueues {
		return p.admitted - len(p.waiting)
	}
	n := 0
	for i := range p.servers {
		n += len(p.servers[i].running)
	}
	return n
}

// ServerMetrics is one server's load, as its metrics endpoint reports it.
type ServerMetrics struct {
	// Healthy is false while the server is down: a scrape of it fails.
	Healthy bool
	// Waiting counts the requests in its queue (with ServerQueues), and
	// Running those it runs.
	Waiting, Running int
	// KVCache is the fraction of its KV cache its running requests hold;
	// 0 without PoolConfig.KVCacheTokens.
	KVCache float64
}

// Metrics returns server i's load now.
func (p *Pool) Metrics(i int) ServerMetrics {
	s := &p.servers[i]
	m := ServerMetrics{Healthy: s.healthy, Waiting: len(s.queue), Running: len(s.running)}
	if p.cfg.KVCacheTokens > 0 {
		m.KVCache = float64(p.kvUsed(s)) / float64(p.cfg.KVCacheTokens)
	}
	return m
}

// Preemptions returns the number of requests preempted so far because the
// KV cache overflowed.
func (p *Pool) Preemptions() int { return p.preemptions }

// Clock returns the simulation's clock, for a gate that times what the
// pool reports.
func (p *Pool) Clock() *Clock { return p.clock }

// Servers returns the number of servers, healthy or not.
func (p *Pool) Servers() int { return len(p.servers) }

// MaxWaiting returns the longest waiting queue — of any one server with
// ServerQueues, of the pool's queue without — since the last
// ResetMaxWaiting, or since the start.
func (p *Pool) MaxWaiting() int { return p.maxWaiting }

// ResetMaxWaiting starts a new measure of MaxWaiting from the queues'
// lengths now.
func (p *Pool) ResetMaxWaiting() {
	p.maxWaiting = len(p.waiting)
	for i := range p.servers {
		p.maxWaiting = max(p.maxWaiting, len(p.servers[i].queue))
	}
}

// HealthySlots returns the slots of the servers that are up.
func (p *Pool) HealthySlots() int { return p.healthySlots }

// take is an attempt the controller admitted reaching the pool: it holds
// it until it ends, and starts it.
func (p *Pool) take(j *job) {
	if p.cfg.PriorityOf != nil {
		j.priority = p.cfg.PriorityOf(j.adm.Effective().Priority)
	}
	if n := len(p.vacant); n > 0 {
		p.held[p.vacant[n-1]] = j
		j.rec.held = p.vacant[n-1] + 1
		p.vacant = p.vacant[:n-1]
	} else {
		p.held = append(p.held, j)
		j.rec.held = len(p.held)
	}
	p.start(j)
}

// start runs an admitted attempt on the healthy server with the most free
// slots (the lowest index on a tie), or queues it if none has one. With
// ServerQueues it sends it to a server instead.
func (p *Pool) start(j *job) {
	if p.cfg.ServerQueues {
		p.send(j)
		return
	}
	best, free := -1, 0
	for i := range p.servers {
		s := &p.servers[i]
		if f := p.cfg.Slots - len(s.running); s.healthy && f > free {
			best, free = i, f
		}
	}
	if best < 0 {
		p.waiting = append(p.waiting, j)
		p.maxWaiting = max(p.maxWaiting, len(p.waiting))
		return
	}
	p.run(best, j)
}

// run starts j on server i now: its first token (if the pool reports
// first tokens or pages a KV cache) and its completion are scheduled.
func (p *Pool) run(i int, j *job) {
	s := &p.servers[i]
	now := p.clock.Elapsed()
	j.context = j.rec.PromptTokens + j.kept
	if j.runs > 0 {
		j.rec.RecomputedTokens += j.context
	}
	j.runs++
	ttft := p.cfg.Base + time.Duration(j.context)*p.cfg.PerPromptToken
	service := ttft + time.Duration(j.rec.OutputTokens-j.kept)*p.cfg.PerOutputToken
	j.server, j.index, j.started, j.decodeAt = i, len(s.running), now, now+ttft
	s.running = append(s.running, j)
	s.prompts += int64(j.context)
	if p.firstToken || p.cfg.KVCacheTokens > 0 {
		j.first = p.clock.AfterFunc(ttft, func() { p.firstTokenOf(j) })
	}
	j.done = p.clock.AfterFunc(service, func() { p.finish(j, false) })
	p.watchKV(i)
}

// firstTokenOf is j's prefill ending: its first token, unless a first run
// preempted later sent it already, and the start of its decode.
func (p *Pool) firstTokenOf(j *job) {
	j.first = nil
	if !j.sent {
		j.sent, j.firstAt = true, p.clock.Elapsed()
		if p.firstToken {
			j.adm.FirstToken()
		}
	}
	if p.cfg.KVCacheTokens > 0 {
		s := &p.servers[j.server]
		j.decoding = true
		s.decoding++
		s.decodeSince += int64(j.decodeAt)
		s.outputs += int64(j.rec.OutputTokens - j.kept)
		p.watchKV(j.server)
	}
}

// kvUsed returns the KV-cache tokens server s's running requests hold now:
// their prompts, and the output tokens decoded so far, counted for the
// server as a whole (the decode time of all its decoding requests over
// PerOutputToken, rounded down).
func (p *Pool) kvUsed(s *server) int {
	decoded := s.outputs
	if p.cfg.PerOutputToken > 0 {
		decoded = (s.decoding*int64(p.clock.Elapsed()) - s.decodeSince) / int64(p.cfg.PerOutputToken)
	}
	return int(s.prompts + decoded)
}

// watchKV arranges the check for when server i's KV cache overflows, as
// its decoding requests grow: each event that changes how many decode
// calls it again.
func (p *Pool) watchKV(i int) {
	kv := p.cfg.KVCacheTokens
	if kv == 0 {
		return
	}
	s := &p.servers[i]
	if s.overflow != nil {
		s.overflow.Stop()
		s.overflow = nil
	}
	if len(s.running) < 2 {
		return // one request runs alone, however large
	}
	if s.decoding == 0 || p.cfg.PerOutputToken == 0 {
		if p.kvUsed(s) > kv {
			s.overflow = p.clock.AfterFunc(0, func() { p.checkKV(i) })
		}
		return
	}
	// The decoding requests add one token each per PerOutputToken: the
	// cache overflows then, unless an event changes that first (and calls
	// watchKV again).
	wait := time.Duration(max(int64(kv-p.kvUsed(s)+1), 0)*int64(p.cfg.PerOutputToken)) / time.Duration(s.decoding)
	s.overflow = p.clock.AfterFunc(max(wait, time.Nanosecond), func() { p.checkKV(i) })
}

// checkKV preempts requests of server i while its KV cache overflows —
// the one started last (FirstCome) or the lowest in priority (Priority) —
// then starts what fits.
func (p *Pool) checkKV(i int) {
	s := &p.servers[i]
	s.overflow = nil
	for len(s.running) > 1 && p.kvUsed(s) > p.cfg.KVCacheTokens {
		v := s.running[0]
		for _, j := range s.running[1:] {
			if p.cfg.Scheduler == Priority && later(j, v) || p.cfg.Scheduler == FirstCome && j.started >= v.started {
				v = j
			}
		}
		p.preempt(v)
	}
	p.admit(i)
	p.watchKV(i)
}

// later reports whether a comes after b in a Priority queue: a higher
// priority value, or the same and a later arrival.
func later(a, b *job) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if a.arrived != b.arrived {
		return a.arrived > b.arrived
	}
	return a.seq > b.seq
}

// decodedInRun returns the output tokens j has decoded in its current run
// by now.
func (p *Pool) decodedInRun(j *job, now time.Duration) int {
	if now < j.decodeAt {
		return 0
	}
	left := j.rec.OutputTokens - j.kept
	if per := p.cfg.PerOutputToken; per > 0 {
		return min(int((now-j.decodeAt)/per), left)
	}
	return left
}

// preempt stops running j by recompute, as vLLM preempts: its KV cache is
// freed, the output tokens it decoded are kept (and a first token it sent
// stands), and it goes back to its server's queue, to prefill its prompt
// and those tokens again when it runs next.
func (p *Pool) preempt(j *job) {
	now := p.clock.Elapsed()
	if !j.sent && now >= j.decodeAt {
		// Its prefill ended at this instant, or did with no event to
		// tell it: its first token came.
		if j.first != nil {
			j.first.Stop()
			p.firstTokenOf(j)
		} else {
			j.sent, j.firstAt = true, j.decodeAt
		}
	}
	decoded := p.decodedInRun(j, now)
	p.remove(j)
	j.done.Stop()
	if j.first != nil {
		j.first.Stop()
		j.first = nil
	}
	j.kept += decoded
	j.rec.Preemptions++
	p.preemptions++
	p.enqueue(j, true)
}

// enqueue puts j in its server's queue: with FirstCome at the tail, or at
// the head if it was preempted; with Priority in its order.
func (p *Pool) enqueue(j *job, preempted bool) {
	s := &p.servers[j.server]
	switch {
	case p.cfg.Scheduler == Priority:
		k, _ := slices.BinarySearchFunc(s.queue, j, func(q, j *job) int {
			if later(q, j) {
				return 1
			}
			return -1
		})
		s.queue = slices.Insert(s.queue, k, j)
	case preempted:
		s.queue = slices.Insert(s.queue, 0, j)
	default:
		s.queue = append(s.queue, j)
	}
}

// remove takes j out of its server's running list.
func (p *Pool) remove(j *job) {
	s := &p.servers[j.server]
	s.prompts -= int64(j.context)
	if j.decoding {
		j.decoding = false
		s.decoding--
		s.decodeSince -= int64(j.decodeAt)
		s.outputs -= int64(j.rec.OutputTokens - j.kept)
	}
	last := len(s.running) - 1
	s.running[j.index] = s.running[last]
	s.running[j.index].index = j.index
	s.running[last] = nil
	s.running = s.running[:last]
}

// send routes an admitted attempt to the healthy server with the fewest
// waiting, then the fewest running, then the lowest index, and runs it
// there if it can start; with the Priority scheduler, first to one where
// it can start at once, or else wait behind the fewest requests it cannot
// pass. With no healthy server it fails at once.
func (p *Pool) send(j *job) {
	best := -1
	for i := range p.servers {
		s := &p.servers[i]
		if !s.healthy {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &p.servers[best]
		if p.cfg.Scheduler == Priority {
			// Only the requests served before j delay it: a server where
			// fewer of them than its slots are starts j at once.
			if a, c := p.behind(s, j), p.behind(b, j); a != c {
				if a < c {
					best = i
				}
				continue
			}
		}
		if len(s.queue) < len(b.queue) || (len(s.queue) == len(b.queue) && len(s.running) < len(b.running)) {
			best = i
		}
	}
	if best < 0 {
		p.failQueued(j)
		return
	}
	j.server, j.arrived, j.seq = best, p.clock.Elapsed(), p.arrivals
	p.arrivals++
	s := &p.servers[best]
	p.enqueue(j, false)
	p.admit(best)
	p.maxWaiting = max(p.maxWaiting, len(s.queue))
}

// behind is how far from a slot j would wait on s under the Priority
// scheduler: the requests there it cannot pass beyond the slots less one,
// 0 where it would start at once (on a free slot, or preempting a lower
// priority).
func (p *Pool) behind(s *server, j *job) int {
	return max(ahead(s, j)-p.cfg.Slots+1, 0)
}

// ahead counts the requests on s, waiting or running, of j's priority or
// a higher one (a value no greater): with the Priority scheduler, those
// that j cannot pass.
func ahead(s *server, j *job) int {
	n := 0
	for _, q := range s.queue {
		if q.priority <= j.priority {
			n++
		}
	}
	for _, r := range s.running {
		if r.priority <= j.priority {
			n++
		}
	}
	return n
}

// admit runs the head of server i's queue while it fits: a free slot,
// and room in the KV cache for its context (or nothing running). With the
// Priority scheduler, a head that does not fit preempts the running
// request latest in priority order while that one has a higher priority
// value.
func (p *Pool) admit(i int) {
	s := &p.servers[i]
	preempted := false
	for len(s.queue) > 0 && s.healthy {
		j := s.queue[0]
		kv := p.cfg.KVCacheTokens
		if len(s.running) >= p.cfg.Slots || kv > 0 && len(s.running) > 0 && p.kvUsed(s)+j.rec.PromptTokens+j.kept > kv {
			if p.cfg.Scheduler != Priority || len(s.running) == 0 {
				break
			}
			v := s.running[0]
			for _, r := range s.running[1:] {
				if later(r, v) {
					v = r
				}
			}
			if v.priority <= j.priority {
				break
			}
			p.preempt(v)
			preempted = true
			continue
		}
		s.queue[0] = nil
		s.queue = s.queue[1:]
		p.run(i, j)
	}
	if preempted {
		p.maxWaiting = max(p.maxWaiting, len(s.queue))
		p.watchKV(i)
	}
}

// failQueued fails an attempt that was admitted but never ran: its server
// went down, or there was none.
func (p *Pool) failQueued(j *job) {
	p.unhold(j)
	j.rec.Failures++
	j.respond(Response{Failed: true, QueueTime: j.adm.QueueTime(), Effective: j.adm.Effective().Priority})
	j.adm.Done()
}

// finish ends a running job: complete, or failed with its server. The
// response is written while the request still holds its slot and its
// admission (a gateway stamps headers as the response passes); then the
// slot is freed and the admission released, which lets the controller
// dispatch the next request.
func (p *Pool) finish(j *job, failed bool) {
	p.unhold(j)
	p.remove(j)
	if j.first != nil {
		j.first.Stop()
		j.first = nil
	}

	r := j.rec
	if failed {
		r.Failures++
	} else {
		r.Served = true
		r.QueueTime = j.adm.QueueTime()
		r.FirstToken = j.decodeAt
		if j.sent {
			r.FirstToken = j.firstAt
		}
	}
	j.respond(Response{Served: !failed, Failed: failed, QueueTime: j.adm.QueueTime(), Effective: j.adm.Effective().Priority})
	p.free(j)
}

// free gives the slot j ran in to the next attempt waiting for one, then
// releases j's admission, which lets the controller dispatch the next
// request.
func (p *Pool) free(j *job) {
	s := &p.servers[j.server]
	if p.cfg.ServerQueues {
		p.admit(j.server)
		p.watchKV(j.server)
	} else if len(p.waiting) > 0 && s.healthy {
		next := p.waiting[0]
		p.waiting[0] = nil
		p.waiting = p.waiting[1:]
		p.start(next)
	}
	j.adm.Done()
}

// unhold drops j, which is ending, from the attempts the pool holds,
// before its response is written: from then on Abort finds none of its
// record, even from that response's callback.
func (p *Pool) unhold(j *job) {
	i := j.rec.held - 1
	p.held[i], j.rec.held = nil, 0
	p.vacant = append(p.vacant, i)
}

// Abort ends now the attempt of r that the pool holds — admitted, and
// running or waiting for a slot — as a server does a request whose client
// went away, or whose admission the router revoked: a running attempt
// stops generating and its slot goes at once to the next attempt waiting
// for one; its client gets a Response with Aborted set, and, if its
// admission was revoked, the eviction as its Rejection (with the
// Retry-After that comes with it; Record.Drops counts it); its admission
// is released (Done), which confirms a revocation and lets the controller
// dispatch. The work already done is lost: r counts the output tokens
// decoded so far in WastedTokens (those a preemption kept included, and
// those of an attempt waiting after a preemption) and the time its
// current run's prefill ran in WastedPrefill. Abort
// returns false, and does nothing, when the pool holds no attempt of r
// (it was not admitted yet, or has ended).
func (p *Pool) Abort(r *Record) bool {
	if r.held == 0 {
		return false
	}
	j := p.held[r.held-1]
	p.unhold(j)
	r.Aborts++
	var resp Response
	if err := j.adm.Err(); err != nil && p.revoked != nil {
		resp = p.revoked(r, err)
	}
	resp.Aborted, resp.QueueTime, resp.Effective = true, j.adm.QueueTime(), j.adm.Effective().Priority
	if !p.running(j) {
		r.WastedTokens += j.kept
		p.unqueue(j)
		j.respond(resp)
		j.adm.Done()
		return true
	}
	now := p.clock.Elapsed()
	r.WastedPrefill += min(now, j.decodeAt) - j.started
	r.WastedTokens += j.kept + p.decodedInRun(j, now)
	p.remove(j)
	j.done.Stop()
	if j.first != nil {
		j.first.Stop()
		j.first = nil
	}
	j.respond(resp)
	p.free(j)
	return true
}

// running reports whether j runs on a server, rather than waiting in a
// queue for a slot.
func (p *Pool) running(j *job) bool {
	s := &p.servers[j.server]
	return j.index < len(s.running) && s.running[j.index] == j
}

// unqueue takes j, which waits for a slot, out of its queue.
func (p *Pool) unqueue(j *job) {
	q := &p.waiting
	if p.cfg.ServerQueues {
		q = &p.servers[j.server].queue
	}
	if i := slices.Index(*q, j); i >= 0 {
		*q = slices.Delete(*q, i, i+1)
	}
}

// fail takes server i down; its running requests fail, and so do those
// waiting in its queue.
func (p *Pool) fail(i int) {
	s := &p.servers[i]
	if !s.healthy {
		return
	}
	s.healthy = false
	p.healthySlots -= p.cfg.Slots
	if s.overflow != nil {
		s.overflow.Stop()
		s.overflow = nil
	}
	for len(s.running) > 0 {
		j := s.running[len(s.running)-1]
		j.done.Stop()
		p.finish(j, true)
	}
	for len(s.queue) > 0 {
		j := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		p.failQueued(j)
	}
}

// recover brings server i back and lets the controller use its slots.
func (p *Pool) recover(i int) {
	s := &p.servers[i]
	if s.healthy {
		return
	}
	s.healthy = true
	p.healthySlots += p.cfg.Slots
	for len(p.waiting) > 0 && len(s.running) < p.cfg.Slots {
		next := p.waiting[0]
		p.waiting[0] = nil
		p.waiting = p.waiting[1:]
		p.start(next)
	}
	if p.nudge != nil {
		p.nudge()
	}
}
