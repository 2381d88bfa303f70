package gate

import (
	"errors"
	"fmt"
	"math"
)

// SaturationStatus is a snapshot of a [SaturationGate], for a status page
// or a demo's table.
type SaturationStatus struct {
	// Endpoints is the number of endpoints the gate knows; Fresh, those
	// whose metrics are fresh and valid; Saturated, those without room
	// (stale metrics, an invalid reading (see [Metrics]), or a queue or
	// KV cache at its threshold).
	Endpoints, Fresh, Saturated int
	// Room is this replica's share of the room at each fresh endpoint's
	// last refresh, summed.
	Room int64
	// Budget is how many more requests this replica may start before the
	// next refresh.
	Budget int64
}

// Status returns the gate's current state.
func (g *SaturationGate) Status() SaturationStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := SaturationStatus{Endpoints: len(g.endpoints)}
	for _, e := range g.order {
		if e.fresh() {
			s.Fresh++
			s.Room = addSat(s.Room, e.share)
		}
		if !e.fresh() || g.room(e.m) == 0 {
			s.Saturated++
		}
	}
	// limit is math.MinInt64 with no recent reading, and may be
	// math.MaxInt64: the difference must neither wrap negative nor
	// positive.
	if limit, started := g.limit.Load(), g.started.Load(); limit > started {
		s.Budget = limit - started
		if s.Budget < 0 {
			s.Budget = math.MaxInt64
		}
	}
	return s
}

// Ready returns nil while the gate admits on fresh metrics, and otherwise
// why it fails closed — no endpoint has reported, or none has fresh
// metrics — for a router's readiness probe.
func (g *SaturationGate) Ready() error {
	st := g.Status()
	switch invalid := g.invalid(); {
	case st.Endpoints == 0:
		return errors.New("the saturation gate fails closed: no endpoint has reported its metrics")
	case st.Fresh == 0 && invalid > 0:
		return fmt.Errorf("the saturation gate fails closed: none of its %d endpoints has fresh metrics, and %d reported values out of range", st.Endpoints, invalid)
	case st.Fresh == 0:
		return fmt.Errorf("the saturation gate fails closed: none of its %d endpoints has fresh metrics", st.Endpoints)
	}
	return nil
}

// invalid counts the endpoints whose last reading was invalid.
func (g *SaturationGate) invalid() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, e := range g.order {
		if e.bad {
			n++
		}
	}
	return n
}

// Saturation returns the share of the pool's capacity in use, a number
// in [0, 1]: what band ceilings ([Ceiling]) compare with each band's
// ceiling, and what flowcontrol's guarantees and in-flight eviction count
// a running request's footprint in ([SaturationDetector]). Each endpoint
// with fresh, valid metrics uses
//
//	with SlotsPerEndpoint S:  u = min(1, max((Running + Waiting) ÷ S, KVCache))
//	without:                  u = KVCache
//
// of its capacity (vllm:num_requests_running, vllm:num_requests_waiting,
// vllm:kv_cache_usage_perc), and one with stale metrics or an invalid
// reading uses all of it (u = 1). The pool's share is the mean of the u,
// and with S declared the starts this gate granted since the oldest
// refresh among the endpoints with recent readings, which no reading has
// seen yet, are added as slots in use:
//
//	with S, N endpoints:  min(1, (Σ S×u + starts since the oldest refresh) ÷ (N×S))
//	without:              Σ u ÷ N
//
// With Replicas, the starts counted are this replica's: the others'
// show at the next scrape. It is 1 with no endpoints. The sums are taken
// in the order of the
// endpoints' names, so the same readings give the same bits whatever
// order they arrived in. Requests waiting in a server's queue count as
// slots in use, since they will take one: a pool with every slot running
// and requests queued reads 1, and a ceiling below 1 then holds its band
// back, while a ceiling of 1 leaves the decision to the gate.
//
// Saturation reads two atomics and takes no lock; each Update, Remove and
// staleness refreshes what it reads.
func (g *SaturationGate) Saturation() float64 {
	u := g.usage.Load()
	used := u.used
	if pending := g.started.Load() - u.base; pending > 0 {
		used += float64(pending)
	}
	return min(1, used/u.capacity)
}

// DetectorSaturation returns llm-d-router's utilization-detector
// saturation, always a number in [0, 1]: the mean over the endpoints,
// summed in the order of their names, of min(1, max(Waiting ÷
// QueueDepthThreshold, KVCache ÷ KVCacheUtilThreshold)), an endpoint with
// stale metrics or an invalid reading counting 1; 1 with no endpoints.
// Below 1, some endpoint has room. It is the value of llm-d-router's
// gauge flow_control_pool_saturation, where 1 is the point at which the
// gate closes; band ceilings do not read it (see [SaturationGate.Saturation]).
// It reads one atomic.
func (g *SaturationGate) DetectorSaturation() float64 {
	return math.Float64frombits(g.detector.Load())
}

// score is e's share of the detector's saturation: 1 unless its metrics
// are fresh and valid. Called with mu held.
func (g *SaturationGate) score(e *endpoint) float64 {
	if !e.fresh() {
		return 1
	}
	return min(1, max(float64(e.m.Waiting)/float64(g.qThr), e.m.KVCache/g.kvThr))
}

// used is what e uses of the pool: slots when they are declared, else its
// share of its KV cache; all of it unless its metrics are fresh and valid.
// Called with mu held.
func (g *SaturationGate) used(e *endpoint) float64 {
	if g.slots == 0 {
		if !e.fresh() {
			return 1
		}
		return e.m.KVCache
	}
	s := float64(g.slots)
	if !e.fresh() {
		return s
	}
	// In float64: Running + Waiting may pass math.MaxInt.
	return s * min(1, max((float64(e.m.Running)+float64(e.m.Waiting))/s, e.m.KVCache))
}
