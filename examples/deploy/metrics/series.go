package metrics

import (
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegate/sluice/flowcontrol"
)

// overflow is the label value that every fairness id past the cap (or
// too long, or not UTF-8), and every priority past the cap, is counted
// under, as llm-d-router does.
const overflow = "other"

// cowMap is a map that readers load without a lock: a write copies the map
// under a mutex and publishes the copy. It suits maps that are read on
// every event and written only when a new key first appears, a bounded
// number of times.
type cowMap[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

// load returns the value stored under k.
func (c *cowMap[K, V]) load(k K) (V, bool) {
	if p := c.m.Load(); p != nil {
		v, ok := (*p)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// loadOrMake returns the value stored under k or, if there is none, the one
// mk returns; mk runs under the writers' lock with the current size of the
// map, and its value is stored only if it reports true.
func (c *cowMap[K, V]) loadOrMake(k K, mk func(size int) (V, bool)) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	var size int
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
		size = len(*old)
	}
	v, store := mk(size)
	if !store {
		return v
	}
	m := make(map[K]V, size+1)
	if old != nil {
		maps.Copy(m, *old)
	}
	m[k] = v
	c.m.Store(&m)
	return v
}

// flowSeries holds the series of one fairness_id label value. Its cache
// is keyed by label values, not by the event's raw priority, so it holds
// at most (MaxPriorities + 1) × outcomes × 2 entries however many
// priorities clients ask for: every priority past the cap shares the
// "other" entries, and a write copies a map of that bounded size.
type flowSeries struct {
	label  string
	series cowMap[seriesKey, *series]
	// waiting holds the NotYetFinalized enqueue-duration series, by
	// priority label; waits what the flow has waiting, by band and models
	// (see models.go).
	waiting cowMap[string, prometheus.Observer]
	waits   cowMap[waitKey, *waitCount]
}

// seriesKey names the series of one event inside a flow: the band's
// priority label, the outcome, whether the request was queued (which
// llm-d's outcome names tell apart), and the model labels.
type seriesKey struct {
	priority string
	outcome  flowcontrol.Outcome
	queued   bool
	models   models
}

// series is the histogram and counter children that one event updates;
// enqueueTime only for a request that did not queue (one that did was
// counted by Waiting).
type series struct {
	queueTime   prometheus.Observer
	total       prometheus.Counter
	enqueueTime prometheus.Observer
}

// flowFor returns the series of fairness id id: its own while fewer than
// the cap have been admitted, the overflow's once the cap is reached, and
// the overflow's at once for an id longer than the length cap or not valid
// UTF-8 (which Prometheus refuses as a label value). The empty id and the
// overflow value itself use their own label and take no place under the
// cap.
func (m *Metrics) flowFor(id string) *flowSeries {
	if len(id) > m.maxLabelLen {
		return m.other // before any lookup: a long id costs no hashing
	}
	if f, ok := m.flows.load(id); ok {
		return f
	}
	if m.flowsFull.Load() || !utf8.ValidString(id) {
		return m.other
	}
	return m.flows.loadOrMake(id, func(int) (*flowSeries, bool) {
		if m.admitted >= m.maxFlows {
			m.flowsFull.Store(true)
			return m.other, false
		}
		m.admitted++
		return &flowSeries{label: id}, true
	})
}

// seriesFor returns the series of an event of band priority in flow f:
// its own, or the overflow series once its family holds its cap of label
// sets (see [Options.MaxSeries]).
func (m *Metrics) seriesFor(f *flowSeries, priority int, outcome flowcontrol.Outcome, queued bool, ml models) *series {
	k := seriesKey{priority: m.priorityLabel(priority), outcome: outcome, queued: queued, models: ml}
	if s, ok := f.series.load(k); ok {
		return s
	}
	return f.series.loadOrMake(k, func(int) (*series, bool) {
		outcome := m.outcomeLabel(k.outcome, k.queued)
		if !m.queueCap.admit(queueTimeKey{f.label, k.priority, outcome, ml.name, ml.target}) {
			// Past the family's cap: the overflow series, not kept in
			// the flow's cache, which so holds only admitted label sets.
			return m.foldedSeries(k), false
		}
		s := &series{
			queueTime: m.queueTime.WithLabelValues(f.label, k.priority, outcome, ml.name, ml.target),
			total:     m.requests.WithLabelValues(outcome, k.priority),
		}
		if !k.queued {
			if m.enqueueCap.admit(enqueueTimeKey{f.label, k.priority, outcome}) {
				s.enqueueTime = m.enqueueTime.WithLabelValues(f.label, k.priority, outcome)
			} else {
				s.enqueueTime = m.foldedEnqueue(outcome)
			}
		}
		return s, true
	})
}

// priorityLabel returns the label value of priority p: its decimal form
// (at most 20 bytes), or the overflow value once MaxPriorities others are
// in use.
func (m *Metrics) priorityLabel(p int) string {
	if s, ok := m.priorities.load(p); ok {
		return s
	}
	if m.prioritiesFull.Load() {
		return overflow
	}
	return m.priorities.loadOrMake(p, func(size int) (string, bool) {
		if size >= m.maxPriorities {
			m.prioritiesFull.Store(true)
			return overflow, false
		}
		return strconv.Itoa(p), true
	})
}

// OutcomeLabels selects the values of the outcome label.
type OutcomeLabels int

const (
	// LLMDOutcomes labels outcomes with llm-d-router's names, so that its
	// dashboards and alerts work unchanged. It is the default. The values
	// are llm-d-router's QueueOutcome set (pkg/epp/flowcontrol/types,
	// outcomes.go) and no other: Dispatched, RejectedCapacity,
	// RejectedNoEndpoints, RejectedOther, EvictedTTL, EvictedNoEndpoints,
	// EvictedContextCancelled, EvictedOther. In that set "Evicted…" is a
	// request removed from the queue (whose QueueTime is above 0), and
	// "Rejected…" one that never waited:
	//
	//	flowcontrol outcome          never queued         queued
	//	dispatched                   Dispatched           Dispatched
	//	rejected-saturated           RejectedCapacity     RejectedCapacity
	//	rejected-no-endpoints        RejectedNoEndpoints  EvictedNoEndpoints
	//	rejected-ttl-expired         RejectedOther        EvictedTTL
	//	rejected-context-cancelled   RejectedOther        EvictedContextCancelled
	//	rejected-shutting-down       RejectedOther        EvictedOther
	//
	// A queued rejected-saturated is a displacement by a fairer flow
	// (flowcontrol.ErrDisplaced). llm-d-router has no displacement from
	// the queue; the outcome it gives a request refused for capacity is
	// RejectedCapacity, so a displacement is RejectedCapacity too. An
	// outcome this table does not know is RejectedOther or EvictedOther.
	LLMDOutcomes OutcomeLabels = iota
	// DroppedReasons labels outcomes with [flowcontrol.Outcome.String]:
	// "dispatched", or the x-llm-d-request-dropped-reason value
	// ("rejected-saturated", "rejected-ttl-expired", ...).
	DroppedReasons
)

// outcomeLabel returns the outcome label value of outcome o.
func (m *Metrics) outcomeLabel(o flowcontrol.Outcome, queued bool) string {
	if m.outcomes == DroppedReasons {
		return o.String()
	}
	return llmdOutcome(o.String(), queued)
}

// llmdOutcome maps a dropped reason to llm-d-router's outcome name. It
// reads the name, not the constant, so that an outcome added to
// flowcontrol later is labelled Rejected/EvictedOther until it is listed.
func llmdOutcome(reason string, queued bool) string {
	switch reason {
	case "dispatched":
		return "Dispatched"
	case "rejected-saturated":
		return "RejectedCapacity"
	}
	if !queued {
		if reason == "rejected-no-endpoints" {
			return "RejectedNoEndpoints"
		}
		return "RejectedOther"
	}
	switch reason {
	case "rejected-no-endpoints":
		return "EvictedNoEndpoints"
	case "rejected-ttl-expired":
		return "EvictedTTL"
	case "rejected-context-cancelled":
		return "EvictedContextCancelled"
	}
	return "EvictedOther"
}
