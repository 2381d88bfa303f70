package metrics

import (
	"maps"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegate/sluice/flowcontrol"
)

// overflow is the label value that every fairness id past the cap, and
// every priority past maxPriorityLabels, is counted under, as llm-d-router
// does.
const overflow = "other"

// maxPriorityLabels bounds the distinct priority label values. Effective
// priorities name provisioned bands, so they are few; only a NeverPromote
// rejection reports the priority a client asked for, which may be anything.
const maxPriorityLabels = 256

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

// flowSeries holds the series of one fairness_id label value.
type flowSeries struct {
	label  string
	series cowMap[seriesKey, *series]
}

// seriesKey names the series of one event inside a flow: the band, the
// outcome, and whether the request was queued (which llm-d's outcome names
// tell apart).
type seriesKey struct {
	priority int
	outcome  flowcontrol.Outcome
	queued   bool
}

// series is the histogram and counter children that one event updates.
type series struct {
	queueTime prometheus.Observer
	total     prometheus.Counter
}

// flowFor returns the series of fairness id id: its own while fewer than
// the cap have been admitted, the overflow's once the cap is reached. The
// empty id and the overflow value itself use their own label and take no
// place under the cap.
func (m *Metrics) flowFor(id string) *flowSeries {
	if f, ok := m.flows.load(id); ok {
		return f
	}
	if m.flowsFull.Load() {
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

// seriesFor returns the series of an event in flow f.
func (m *Metrics) seriesFor(f *flowSeries, k seriesKey) *series {
	if s, ok := f.series.load(k); ok {
		return s
	}
	return f.series.loadOrMake(k, func(int) (*series, bool) {
		prio := m.priorityLabel(k.priority)
		outcome := m.outcomeLabel(k.outcome, k.queued)
		return &series{
			queueTime: m.queueTime.WithLabelValues(f.label, prio, outcome),
			total:     m.requests.WithLabelValues(outcome, prio),
		}, true
	})
}

// priorityLabel returns the label value of priority p: its decimal form,
// or the overflow value once maxPriorityLabels others are in use.
func (m *Metrics) priorityLabel(p int) string {
	if s, ok := m.priorities.load(p); ok {
		return s
	}
	return m.priorities.loadOrMake(p, func(size int) (string, bool) {
		if size >= maxPriorityLabels {
			return overflow, false
		}
		return strconv.Itoa(p), true
	})
}

// OutcomeLabels selects the values of the outcome label.
type OutcomeLabels int

const (
	// LLMDOutcomes labels outcomes with llm-d-router's names, so that its
	// dashboards and alerts work unchanged. It is the default. A request
	// that was queued (whose QueueTime is above 0) is "Evicted…", one that
	// never waited is "Rejected…":
	//
	//	flowcontrol outcome          never queued         queued
	//	dispatched                   Dispatched           Dispatched
	//	rejected-saturated           RejectedCapacity     RejectedCapacity
	//	rejected-no-endpoints        RejectedNoEndpoints  EvictedNoEndpoints
	//	rejected-ttl-expired         RejectedOther        EvictedTTL
	//	rejected-context-cancelled   RejectedOther        EvictedContextCancelled
	//	rejected-shutting-down       RejectedOther        EvictedOther
	//	evicted-queue-pressure       EvictedQueuePressure EvictedQueuePressure
	//
	// llm-d-router has no displacement from the queue, so
	// EvictedQueuePressure is Sluice's, in the same style. An outcome this
	// table does not know is RejectedOther or EvictedOther.
	LLMDOutcomes OutcomeLabels = iota
	// DroppedReasons labels outcomes with [flowcontrol.Outcome.String]:
	// "dispatched", or the x-llm-d-request-dropped-reason value
	// ("rejected-saturated", "evicted-queue-pressure", ...).
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
	case "evicted-queue-pressure":
		return "EvictedQueuePressure"
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
