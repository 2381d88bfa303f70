package gate

import (
	"errors"
	"math"
	"math/bits"
)

// Concurrency modes: what a [ConcurrencyGate] bounds. They are the values
// of llm-d-router's concurrency-detector concurrencyMode.
const (
	// ModeRequests bounds the requests in flight by MaxConcurrency.
	ModeRequests = "requests"
	// ModeTokens bounds the cost in flight (the requests' estimated
	// tokens, [github.com/sluicegate/sluice/flowcontrol.Request.Cost]) by MaxTokenConcurrency.
	ModeTokens = "tokens"
	// ModeHybrid bounds both; the more constraining one refuses.
	ModeHybrid = "hybrid"
)

// Defaults of [ConcurrencyConfig], llm-d-router's concurrency-detector's.
const (
	DefaultMaxConcurrency      = 100
	DefaultMaxTokenConcurrency = 1_000_000
)

// ConcurrencyConfig configures a [ConcurrencyGate]. The zero value of each
// field means its default, which is llm-d-router's.
type ConcurrencyConfig struct {
	// Mode is ModeRequests, ModeTokens or ModeHybrid (llm-d
	// concurrencyMode; default "requests").
	Mode string
	// MaxConcurrency bounds the requests in flight in ModeRequests and
	// ModeHybrid (llm-d maxConcurrency; default 100).
	MaxConcurrency int
	// MaxTokenConcurrency bounds the cost in flight in ModeTokens and
	// ModeHybrid (llm-d maxTokenConcurrency; default 1,000,000).
	MaxTokenConcurrency int64
}

// ConcurrencyGate is a budget of requests and cost (estimated tokens) in
// flight, as llm-d-router's concurrency-detector keeps one. Create one with
// [Concurrency].
//
// It admits while what is in flight is under its bounds, and counts a
// request's cost once the request has taken the slot (the controller picks
// the request only then; see [MeteredGate]), so the last
// request admitted may take the cost in flight over MaxTokenConcurrency by
// at most its own cost, as llm-d's detector allows. In ModeTokens and
// ModeHybrid the bound is therefore: the cost in flight, less the cost of
// the request admitted last, is under MaxTokenConcurrency. A request
// costlier than the whole budget is no exception: it is admitted when the
// cost in flight is under the budget, like any other, and nothing more is
// admitted until it returns, since its cost alone fills the budget.
//
// Costs are what clients send (a request's max_tokens, say), so the gate
// trusts none of them: it sums them exactly, in 128 bits, so that no cost
// up to math.MaxInt64, and no number of them, wraps the total, and
// Returned takes away exactly what Took added, which brings the total back
// to 0 once every request is back. A cost below 1, which
// [Slot] rules out, counts as 1, in Took and Returned alike.
// [ConcurrencyGate.InFlight] reports a total above math.MaxInt64 as
// math.MaxInt64.
//
// llm-d's limits are per endpoint, and its pool's capacity is their sum;
// a ConcurrencyGate bounds everything its controller sends. To carry a
// configuration over, set MaxConcurrency to maxConcurrency × endpoints
// (and MaxTokenConcurrency likewise).
//
// A ConcurrencyGate is a [MeteredGate], a
// [BoundGate] and a [SaturationDetector]
// ([ConcurrencyGate.Saturation]); its counts are guarded by the lock of the one
// controller it serves, and Bind refuses a second.
type ConcurrencyGate struct {
	maxRequests int64 // math.MaxInt64 when the mode does not bound requests
	maxCost     int64 // math.MaxInt64 when the mode does not bound cost
	mode        string
	boundsCost  bool // the mode bounds cost (maxCost is then the budget)
	// Guarded by the lock that serializes the gate's methods (its
	// controller's, or its Serial's). Plain integers, not atomics: an
	// atomic store costs as much as the rest of an admission's gate work.
	requests int64
	cost     sum128
	owner    binding
}

// sum128 is a sum of costs, each in [1, math.MaxInt64], exact in 128 bits:
// 2^64 of the largest cost still fit, and the requests in flight are
// counted in an int64.
type sum128 struct{ hi, lo uint64 }

func (s *sum128) add(c uint64) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, c, 0)
	s.hi += carry
}

// sub takes c away, stopping at 0: a cost handed back that was never
// added (a caller's mistake) cannot make the total negative.
func (s *sum128) sub(c uint64) {
	if s.hi == 0 && s.lo < c {
		*s = sum128{}
		return
	}
	var borrow uint64
	s.lo, borrow = bits.Sub64(s.lo, c, 0)
	s.hi -= borrow
}

// atLeast reports whether the sum is at least m.
func (s sum128) atLeast(m uint64) bool { return s.hi > 0 || s.lo >= m }

// int64 returns the sum, or math.MaxInt64 when it is larger.
func (s sum128) int64() int64 {
	if s.hi > 0 || s.lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(s.lo)
}

// counted is the cost the gate counts for a request of cost c: c itself,
// or 1 for a cost below 1.
func counted(c int64) uint64 { return uint64(max(c, 1)) }

// Concurrency returns a concurrency gate for cfg, or an error naming the
// first bad field: an unknown Mode, or a negative bound.
func Concurrency(cfg ConcurrencyConfig) (*ConcurrencyGate, error) {
	var err error
	if cfg.MaxConcurrency, err = orDefault("MaxConcurrency", "maxConcurrency", cfg.MaxConcurrency, DefaultMaxConcurrency); err != nil {
		return nil, err
	}
	if cfg.MaxTokenConcurrency, err = orDefault("MaxTokenConcurrency", "maxTokenConcurrency", cfg.MaxTokenConcurrency, DefaultMaxTokenConcurrency); err != nil {
		return nil, err
	}
	g := &ConcurrencyGate{maxRequests: math.MaxInt64, maxCost: math.MaxInt64, mode: cfg.Mode}
	switch cfg.Mode {
	case "", ModeRequests:
		g.mode = ModeRequests
		g.maxRequests = int64(cfg.MaxConcurrency)
	case ModeTokens:
		g.maxCost, g.boundsCost = cfg.MaxTokenConcurrency, true
	case ModeHybrid:
		g.maxRequests, g.maxCost, g.boundsCost = int64(cfg.MaxConcurrency), cfg.MaxTokenConcurrency, true
	default:
		return nil, configError("Mode", "concurrencyMode", `"`+cfg.Mode+`"`, `want "requests", "tokens" or "hybrid"`)
	}
	return g, nil
}

// TryAcquire reports whether the requests and the cost in flight are under
// the bounds of the gate's mode, and takes a request slot if so.
func (g *ConcurrencyGate) TryAcquire(int) bool {
	if g.requests >= g.maxRequests || (g.boundsCost && g.cost.atLeast(uint64(g.maxCost))) {
		return false
	}
	g.requests++
	return true
}

// Release gives back a request's slot: the request ended, and Took was
// not called for it, so no cost was counted.
func (g *ConcurrencyGate) Release(int) { g.requests = max(g.requests-1, 0) }

// Took counts the cost of the request that took the slot (1 for a cost
// below 1).
func (g *ConcurrencyGate) Took(s Slot) { g.cost.add(counted(s.Cost)) }

// Returned gives back a request's slot and exactly the cost Took counted
// for it; none for a slot handed back Unused with Cost 0, which no Took
// claimed. Neither count goes below 0, whatever is handed back.
func (g *ConcurrencyGate) Returned(u Usage) {
	g.requests = max(g.requests-1, 0)
	if !u.Unused || u.Cost != 0 { // not a slot no Took claimed
		g.cost.sub(counted(u.Cost))
	}
}

// Bind refuses a second controller: the counts are guarded by the first
// one's lock.
func (g *ConcurrencyGate) Bind(c Controller) error {
	if !g.owner.claim(c) {
		return errors.New("gate: ConcurrencyGate already serves another controller")
	}
	return nil
}

func (g *ConcurrencyGate) unbind(c Controller) { g.owner.release(c) }

// InFlight returns the requests and the cost in flight, the cost capped at
// math.MaxInt64 (the gate's own sum is exact beyond it). Like the gate's
// other methods it reads counts without synchronisation of its own: call
// it under the lock that serializes them — from a gate composed with this
// one, through [Serial.Saturation]'s lock, or while nothing starts or ends.
func (g *ConcurrencyGate) InFlight() (requests int, cost int64) {
	return int(g.requests), g.cost.int64()
}

// Saturation returns how full the budgets of the gate's mode are: the
// requests in flight ÷ MaxConcurrency, the cost in flight ÷
// MaxTokenConcurrency, or in ModeHybrid the larger of the two; at most 1,
// which the cost in flight may pass by the cost of the request admitted
// last. Like InFlight, it is called under the lock that serializes the
// gate's methods, as a gate composed with this one does from its
// TryAcquire.
func (g *ConcurrencyGate) Saturation() float64 {
	s := 0.0
	if g.maxRequests != math.MaxInt64 {
		s = float64(g.requests) / float64(g.maxRequests)
	}
	if g.boundsCost {
		cost := float64(g.cost.hi)*0x1p64 + float64(g.cost.lo)
		s = max(s, cost/float64(g.maxCost))
	}
	return min(s, 1)
}

// Mode returns the gate's mode: ModeRequests, ModeTokens or ModeHybrid.
func (g *ConcurrencyGate) Mode() string { return g.mode }
