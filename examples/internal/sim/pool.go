package sim

import (
	"fmt"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
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
// server's waiting queue.
type Pool struct {
	cfg     PoolConfig
	clock   *Clock
	servers []server
	// waiting holds admitted requests that found no free slot.
	waiting []*job
	// healthySlots is Slots times the healthy servers; admitted counts
	// the requests the gate let in and that have not released yet.
	healthySlots, admitted int
	nudge                  func() // the controller's Nudge, once it exists
}

type server struct {
	healthy bool
	running []*job
}

// job is one admitted attempt on its way through the pool.
type job struct {
	rec     *Record
	adm     *flowcontrol.Admission
	respond func(Response)
	server  int
	index   int // in its server's running list
	started time.Duration
	done    flowcontrol.Timer // the completion event
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
func (p *Pool) Gate() flowcontrol.Gate { return poolGate{p} }

type poolGate struct{ p *Pool }

func (g poolGate) TryAcquire(int) bool {
	if g.p.admitted >= g.p.healthySlots {
		return false
	}
	g.p.admitted++
	return true
}

func (g poolGate) Release(int) { g.p.admitted-- }

// Running returns the number of requests the servers are running, and
// Waiting those admitted that wait for a slot.
func (p *Pool) Running() int { return p.admitted - len(p.waiting) }

// HealthySlots returns the slots of the servers that are up.
func (p *Pool) HealthySlots() int { return p.healthySlots }

// serviceTimes returns a request's time to first token and its whole
// service time.
func (p *Pool) serviceTimes(r *Record) (ttft, service time.Duration) {
	ttft = p.cfg.Base + time.Duration(r.PromptTokens)*p.cfg.PerPromptToken
	return ttft, ttft + time.Duration(r.OutputTokens)*p.cfg.PerOutputToken
}

// start runs an admitted attempt on the healthy server with the most free
// slots (the lowest index on a tie), or queues it if none has one.
func (p *Pool) start(j *job) {
	best, free := -1, 0
	for i := range p.servers {
		s := &p.servers[i]
		if f := p.cfg.Slots - len(s.running); s.healthy && f > free {
			best, free = i, f
		}
	}
	if best < 0 {
		p.waiting = append(p.waiting, j)
		return
	}
	s := &p.servers[best]
	j.server, j.index, j.started = best, len(s.running), p.clock.Elapsed()
	s.running = append(s.running, j)
	_, service := p.serviceTimes(j.rec)
	j.done = p.clock.AfterFunc(service, func() { p.finish(j, false) })
}

// finish ends a running job: complete, or failed with its server. The
// response is written while the request still holds its slot and its
// admission (a gateway stamps headers as the response passes); then the
// slot is freed and the admission released, which lets the controller
// dispatch the next request.
func (p *Pool) finish(j *job, failed bool) {
	s := &p.servers[j.server]
	last := len(s.running) - 1
	s.running[j.index] = s.running[last]
	s.running[j.index].index = j.index
	s.running[last] = nil
	s.running = s.running[:last]

	r := j.rec
	if failed {
		r.Failures++
	} else {
		ttft, _ := p.serviceTimes(r)
		r.Served = true
		r.QueueTime = j.adm.QueueTime()
		r.FirstToken = j.started + ttft
	}
	j.respond(Response{Served: !failed, Failed: failed, QueueTime: j.adm.QueueTime(), Effective: j.adm.Effective().Priority})
	if len(p.waiting) > 0 && s.healthy {
		next := p.waiting[0]
		p.waiting[0] = nil
		p.waiting = p.waiting[1:]
		p.start(next)
	}
	j.adm.Done()
}

// fail takes server i down; its running requests fail.
func (p *Pool) fail(i int) {
	s := &p.servers[i]
	if !s.healthy {
		return
	}
	s.healthy = false
	p.healthySlots -= p.cfg.Slots
	for len(s.running) > 0 {
		j := s.running[len(s.running)-1]
		j.done.Stop()
		p.finish(j, true)
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
