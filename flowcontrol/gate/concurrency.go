package gate

import (
	"errors"
	"math"
	"sync/atomic"

	"github.com/sluicegate/sluice/flowcontrol"
)

// Concurrency modes: what a [ConcurrencyGate] bounds. They are the values
// of llm-d-router's concurrency-detector concurrencyMode.
const (
	// ModeRequests bounds the requests in flight by MaxConcurrency.
	ModeRequests = "requests"
	// ModeTokens bounds the cost in flight (the requests' estimated
	// tokens, [flowcontrol.Request.Cost]) by MaxTokenConcurrency.
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
// the request only then; see [flowcontrol.MeteredGate]), so the last
// request admitted may take the cost in flight over MaxTokenConcurrency by
// at most its own cost, as llm-d's detector allows.
//
// llm-d's limits are per endpoint, and its pool's capacity is their sum;
// a ConcurrencyGate bounds everything its controller sends. To carry a
// configuration over, set MaxConcurrency to maxConcurrency × endpoints
// (and MaxTokenConcurrency likewise).
//
// A ConcurrencyGate is a [flowcontrol.MeteredGate] and a
// [flowcontrol.BoundGate]; its counts are guarded by the lock of the one
// controller it serves, and Bind refuses a second.
type ConcurrencyGate struct {
	maxRequests int64 // math.MaxInt64 when the mode does not bound requests
	maxCost     int64 // math.MaxInt64 when the mode does not bound cost
	mode        string
	// Guarded by the controller's lock. Plain integers, not atomics: an
	// atomic store costs as much as the rest of an admission's gate work.
	requests int64
	cost     int64
	owner    atomic.Pointer[flowcontrol.FlowController]
}

// Concurrency returns a concurrency gate for cfg, or an error naming the
// first bad field: an unknown Mode, or a negative bound.
func Concurrency(cfg ConcurrencyConfig) (*ConcurrencyGate, error) {
	if cfg.MaxConcurrency < 0 {
		return nil, configError("MaxConcurrency", "maxConcurrency", cfg.MaxConcurrency, "negative; 0 means the default 100")
	}
	if cfg.MaxTokenConcurrency < 0 {
		return nil, configError("MaxTokenConcurrency", "maxTokenConcurrency", cfg.MaxTokenConcurrency, "negative; 0 means the default 1000000")
	}
	if cfg.MaxConcurrency == 0 {
		cfg.MaxConcurrency = DefaultMaxConcurrency
	}
	if cfg.MaxTokenConcurrency == 0 {
		cfg.MaxTokenConcurrency = DefaultMaxTokenConcurrency
	}
	g := &ConcurrencyGate{maxRequests: math.MaxInt64, maxCost: math.MaxInt64, mode: cfg.Mode}
	switch cfg.Mode {
	case "", ModeRequests:
		g.mode = ModeRequests
		g.maxRequests = int64(cfg.MaxConcurrency)
	case ModeTokens:
		g.maxCost = cfg.MaxTokenConcurrency
	case ModeHybrid:
		g.maxRequests, g.maxCost = int64(cfg.MaxConcurrency), cfg.MaxTokenConcurrency
	default:
		return nil, configError("Mode", "concurrencyMode", `"`+cfg.Mode+`"`, `want "requests", "tokens" or "hybrid"`)
	}
	return g, nil
}

// TryAcquire reports whether the requests and the cost in flight are under
// the bounds of the gate's mode, and takes a request slot if so.
func (g *ConcurrencyGate) TryAcquire(int) bool {
	if g.requests >= g.maxRequests || g.cost >= g.maxCost {
		return false
	}
	g.requests++
	return true
}

// Release hands back a slot that TryAcquire granted and that was not used
// (a composing gate refused the request); no cost was counted for it.
func (g *ConcurrencyGate) Release(int) { g.requests-- }

// Took counts the cost of the request that took the slot.
func (g *ConcurrencyGate) Took(s flowcontrol.Slot) { g.cost += s.Cost }

// Returned gives back a request's slot and its cost.
func (g *ConcurrencyGate) Returned(u flowcontrol.Usage) {
	g.requests--
	g.cost -= u.Cost
}

// Bind refuses a second controller: the counts are guarded by the first
// one's lock.
func (g *ConcurrencyGate) Bind(c *flowcontrol.FlowController) error {
	if !g.owner.CompareAndSwap(nil, c) && g.owner.Load() != c {
		return errors.New("gate: ConcurrencyGate already serves another controller")
	}
	return nil
}

// InFlight returns the requests and the cost in flight. It reads counts
// that the controller's lock guards, without synchronisation: call it only
// while no admission starts or ends — from a gate composed with this one
// (under that lock), or when the controller is idle, as a test does.
func (g *ConcurrencyGate) InFlight() (requests int, cost int64) {
	return int(g.requests), g.cost
}

// Mode returns the gate's mode: ModeRequests, ModeTokens or ModeHybrid.
func (g *ConcurrencyGate) Mode() string { return g.mode }
