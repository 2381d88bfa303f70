package gate

import (
	"errors"
	"math"
	"sync/atomic"
	"time"
)

// AdaptiveConfig configures an [AdaptiveGate]. llm-d-router has no
// adaptive detector; the names are Sluice's own. The zero value of each
// field but TargetFirstToken means its default.
type AdaptiveConfig struct {
	// TargetFirstToken is the time to first token, counted from dispatch,
	// above which a response is a sign of congestion. Required. A request
	// that waited w in the controller's band meets a time-to-first-token
	// SLO counted from its arrival only if its first token comes within
	// SLO − w of dispatch, so set it below SLO − TTL, the SLO less the
	// longest wait in front of the gate, by a margin.
	TargetFirstToken time.Duration
	// InitialLimit is the limit the gate starts from (default 100, llm-d's
	// maxConcurrency default): the fixed limit it replaces, typically.
	InitialLimit int
	// MinLimit and MaxLimit bound the limit (defaults 1 and 10,000).
	MinLimit, MaxLimit int
	// Backoff multiplies the limit at a decrease, in (0, 1) (default 0.9).
	Backoff float64
	// Increase is added to the limit for each timely response while the
	// limit is in use, so the limit grows by about Increase × limit per
	// round trip (default 0.1: a tenth per round trip).
	Increase float64
}

// Defaults of [AdaptiveConfig].
const (
	DefaultInitialLimit = 100
	DefaultMinLimit     = 1
	DefaultMaxLimit     = 10_000
	DefaultBackoff      = 0.9
	DefaultIncrease     = 0.1
)

// AdaptiveGate learns how many requests may be in flight from the time to
// first token of the responses, by additive increase and multiplicative
// decrease (AIMD). Create one with [Adaptive].
//
// For LLM traffic the time to first token, not the total time, tracks a
// model server's saturation: the total grows with the output length,
// while the first token waits for the server's queue and the prefill only.
// The gate hears it the moment the caller reports it through
// [github.com/sluicegate/sluice/flowcontrol.Admission.FirstToken] (flowhttp reports the first body byte,
// the ext_proc adapter the response headers), while the request still
// runs; for a response that reported none it learns from the hold time
// [Usage.Held] when the admission ends, which overstates the
// latency of a long response and comes a response's length later: report
// first tokens.
//
// For each response, with T the TargetFirstToken:
//   - later than T: the limit is multiplied by Backoff — at most once per
//     half of the requests in flight at the last decrease, since the
//     responses of requests started before a decrease still show the
//     congestion it answered;
//   - within T/2, while at least half the limit is in use: Increase is
//     added to the limit;
//   - between T/2 and T: the limit holds. This band keeps the gate from
//     probing past the point where the servers start to queue.
//
// A slot handed back unused teaches nothing, and neither does a negative
// time to first token, which no clock measures: it may only come from a
// caller gone wrong, and read as timely it would raise the limit. A time
// to first token of 0 is timely; one of any length beyond T, up to the
// largest Duration, is late. The limit stays within [MinLimit, MaxLimit]
// whatever the limits are, math.MaxInt included: the limit is kept as a
// float64 and its whole part is clamped to them, so neither the increase
// nor the decrease can wrap it.
//
// The gate learns as first tokens arrive, not as admissions end: by the
// rules above, after a drop in capacity the limit is multiplied by
// Backoff at most once per half a flight of responses, and after a rise
// it grows by about Increase × limit per round trip. examples/gates
// compares it with the saturation gate, which reads the servers' own
// queues every scrape, and with the gradient design this gate was chosen
// over, which needs each response's hold time and so learns only as
// admissions end; its README has the command and the tables.
//
// An AdaptiveGate is a [FirstTokenGate] (so a
// [MeteredGate]), a [BoundGate] and a
// [SaturationDetector] ([AdaptiveGate.Saturation]): its state is
// guarded by the lock of the one
// controller it serves, and Bind refuses a second. Limit may be called from
// any goroutine.
type AdaptiveGate struct {
	// Guarded by the lock that serializes the gate's methods (its
	// controller's, or its Serial's).
	limit              float64
	inFlight, limitInt int
	minInt, maxInt     int // MinLimit and MaxLimit, which limitInt stays within
	sinceCut, guard    int // responses since the last decrease; how many must pass before the next
	target, half       time.Duration
	min, max           float64
	backoff, increase  float64

	published atomic.Int64 // limitInt, for Limit
	owner     binding
}

// Adaptive returns an adaptive gate for cfg, or an error naming the first
// bad field: a missing or negative TargetFirstToken, a negative limit, a
// MinLimit above MaxLimit or an InitialLimit outside them, a Backoff
// outside (0, 1), an Increase that is not a finite positive number (NaN
// and the infinities are refused).
func Adaptive(cfg AdaptiveConfig) (*AdaptiveGate, error) {
	if cfg.TargetFirstToken <= 0 {
		return nil, configError("TargetFirstToken", "", cfg.TargetFirstToken, "required: the time to first token above which the servers count as congested")
	}
	for _, f := range []struct {
		name  string
		value *int
		def   int
	}{{"InitialLimit", &cfg.InitialLimit, DefaultInitialLimit}, {"MinLimit", &cfg.MinLimit, DefaultMinLimit}, {"MaxLimit", &cfg.MaxLimit, DefaultMaxLimit}} {
		if *f.value < 0 {
			return nil, configError(f.name, "", *f.value, "negative")
		}
		if *f.value == 0 {
			*f.value = f.def
		}
	}
	switch {
	case cfg.MinLimit > cfg.MaxLimit:
		return nil, configError("MinLimit", "", cfg.MinLimit, "above MaxLimit")
	case cfg.InitialLimit < cfg.MinLimit || cfg.InitialLimit > cfg.MaxLimit:
		return nil, configError("InitialLimit", "", cfg.InitialLimit, "outside [MinLimit, MaxLimit]")
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = DefaultBackoff
	}
	if !(cfg.Backoff > 0 && cfg.Backoff < 1) {
		return nil, configError("Backoff", "", cfg.Backoff, "not in (0, 1)")
	}
	if cfg.Increase == 0 {
		cfg.Increase = DefaultIncrease
	}
	if !(cfg.Increase > 0) || math.IsInf(cfg.Increase, 1) {
		return nil, configError("Increase", "", cfg.Increase, "not a finite positive number")
	}
	g := &AdaptiveGate{
		target:   cfg.TargetFirstToken,
		half:     cfg.TargetFirstToken / 2,
		min:      float64(cfg.MinLimit),
		max:      float64(cfg.MaxLimit),
		minInt:   cfg.MinLimit,
		maxInt:   cfg.MaxLimit,
		backoff:  cfg.Backoff,
		increase: cfg.Increase,
	}
	g.set(float64(cfg.InitialLimit))
	return g, nil
}

// set changes the limit, publishing its whole part when that changes. The
// whole part is clamped to [MinLimit, MaxLimit] before it is converted:
// float64(math.MaxInt) is 2^63, one more than math.MaxInt, and converting
// it to an int would wrap.
func (g *AdaptiveGate) set(limit float64) {
	g.limit = limit
	n := g.maxInt
	if limit < float64(g.maxInt) {
		n = max(int(limit), g.minInt)
	}
	if n != g.limitInt {
		g.limitInt = n
		g.published.Store(int64(n))
	}
}

// TryAcquire reports whether fewer requests than the limit are in flight,
// and takes a slot if so.
func (g *AdaptiveGate) TryAcquire(int) bool {
	if g.inFlight >= g.limitInt {
		return false
	}
	g.inFlight++
	return true
}

// Release gives back a slot: the request ended, with nothing to learn from.
func (g *AdaptiveGate) Release(int) { g.inFlight-- }

// Took does nothing: the gate counts requests, whatever their cost.
func (g *AdaptiveGate) Took(Slot) {}

// FirstToken learns from a response's time to first token d as soon as the
// caller reports it, while the request still runs: for a long response
// that is seconds before its admission ends.
func (g *AdaptiveGate) FirstToken(_ Slot, d time.Duration) {
	g.learn(d, g.inFlight)
}

// Returned gives back a slot and, unless the gate heard the response's
// first token already, learns from its time to first token, or its hold
// time when none was reported.
func (g *AdaptiveGate) Returned(u Usage) {
	used := g.inFlight
	g.inFlight--
	if u.Unused || u.Heard {
		return
	}
	latency := u.FirstToken
	if latency == 0 {
		latency = u.Held
	}
	g.learn(latency, used)
}

// learn adjusts the limit for one response's latency, with used requests in
// flight, this one included.
func (g *AdaptiveGate) learn(latency time.Duration, used int) {
	if latency < 0 {
		return // measured by no clock: teaches nothing
	}
	g.sinceCut++
	switch {
	case latency > g.target:
		if g.sinceCut >= g.guard {
			g.set(max(g.min, g.limit*g.backoff))
			g.sinceCut, g.guard = 0, used/2
		}
	case latency > g.half:
	case float64(used) >= g.limit/2:
		g.set(min(g.max, g.limit+g.increase))
	}
}

// Bind refuses a second controller: the gate's state is guarded by the
// first one's lock.
func (g *AdaptiveGate) Bind(c Controller) error {
	if !g.owner.claim(c) {
		return errors.New("gate: AdaptiveGate already serves another controller")
	}
	return nil
}

func (g *AdaptiveGate) unbind(c Controller) { g.owner.release(c) }

// Saturation returns the requests in flight ÷ the learned limit, at most
// 1 (a decrease may leave more in flight than the new limit). It is
// called under the lock that serializes the gate's methods, as a gate
// composed with this one does from its TryAcquire.
func (g *AdaptiveGate) Saturation() float64 {
	return min(float64(g.inFlight)/float64(max(g.limitInt, 1)), 1)
}

// Limit returns the current limit on requests in flight.
func (g *AdaptiveGate) Limit() int { return int(g.published.Load()) }
