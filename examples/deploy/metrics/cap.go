package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegate/sluice/flowcontrol"
)

// DefaultMaxSeries is how many series each family whose labels clients
// choose holds, the overflow series included, unless [Options.MaxSeries]
// says otherwise. The per-label caps bound each label's values, not their
// product: a client picks a fairness id and a model together, and each
// pair would be a series of its own. 10,000 series of the queue-duration
// histogram are about 20 MB of heap and 200,000 samples a scrape.
const DefaultMaxSeries = 10000

// minSeries is the least MaxSeries: room for the overflow series, one per
// outcome value, with some to spare.
const minSeries = 16

// seriesCap bounds the label sets of one histogram family: the first max
// distinct label sets have series of their own; every later one is folded
// into an overflow series (see [Metrics.folded]), whose label sets, one
// per outcome value, the cap sets aside room for. It is consulted only
// when a cache misses, so its lock is off the path of a known series.
type seriesCap[K comparable] struct {
	mu   sync.Mutex
	seen map[K]struct{}
	max  int
}

func newSeriesCap[K comparable](max int) *seriesCap[K] {
	return &seriesCap[K]{seen: map[K]struct{}{}, max: max}
}

// admit reports whether label set k has, or may now have, a series of its
// own.
func (c *seriesCap[K]) admit(k K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[k]; ok {
		return true
	}
	if len(c.seen) >= c.max {
		return false
	}
	c.seen[k] = struct{}{}
	return true
}

// queueTimeKey is the label set of a flow_control_request_queue_duration_seconds
// series, and enqueueTimeKey one of flow_control_request_enqueue_duration_seconds.
type (
	queueTimeKey   struct{ flow, priority, outcome, name, target string }
	enqueueTimeKey struct{ flow, priority, outcome string }
)

// gaugeCap bounds the series of flows and models of flow_control_queue_size
// and queue_bytes (the two have the same label sets): each flow tracked
// in a band, and each pair of models a tracked flow has waiting there,
// takes one place. Past it a flow is not tracked (what it has waiting is
// read under fairness_id "other") and a pair of models is folded.
type gaugeCap struct {
	used atomic.Int64
	max  int64
}

// limit is the places there are while bands bands are watched: room is
// left for the two "other" series of each.
func (c *gaugeCap) limit(bands int) int64 { return c.max - 2*int64(bands) }

// full reports whether every place is taken.
func (c *gaugeCap) full(bands int) bool { return c.used.Load() >= c.limit(bands) }

// take takes a place; it reports false when there is none.
func (c *gaugeCap) take(bands int) bool {
	limit := c.limit(bands)
	for {
		n := c.used.Load()
		if n >= limit {
			return false
		}
		if c.used.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// outcomeValues returns how many values the outcome label takes in the
// per-request families under o: llm-d-router's eight, or one per
// flowcontrol outcome.
func outcomeValues(o OutcomeLabels) int {
	if o != DroppedReasons {
		return 8
	}
	n := 0
	for flowcontrol.Outcome(n).String() != "Outcome("+strconv.Itoa(n)+")" {
		n++
	}
	return n
}

// foldKey names an overflow series: the band's priority label (kept by
// the requests counter, which clients cannot multiply), the outcome, and
// whether the request queued.
type foldKey struct {
	priority string
	outcome  flowcontrol.Outcome
	queued   bool
}

// foldedSeries returns the series of an event whose label set is past
// its family's cap: every label a client chooses (fairness_id, priority,
// model_name, target_model_name) is the overflow value, the outcome its
// own; the requests counter keeps the band.
func (m *Metrics) foldedSeries(k seriesKey) *series {
	fk := foldKey{priority: k.priority, outcome: k.outcome, queued: k.queued}
	if s, ok := m.folded.load(fk); ok {
		return s
	}
	return m.folded.loadOrMake(fk, func(int) (*series, bool) {
		outcome := m.outcomeLabel(fk.outcome, fk.queued)
		s := &series{
			queueTime: m.queueTime.WithLabelValues(overflow, overflow, outcome, overflow, overflow),
			total:     m.requests.WithLabelValues(outcome, fk.priority),
		}
		if !fk.queued {
			s.enqueueTime = m.foldedEnqueue(outcome)
		}
		return s, true
	})
}

// foldedEnqueue returns the overflow series of the enqueue-duration
// histogram for outcome label outcome.
func (m *Metrics) foldedEnqueue(outcome string) prometheus.Observer {
	if o, ok := m.foldedEnqueues.load(outcome); ok {
		return o
	}
	return m.foldedEnqueues.loadOrMake(outcome, func(int) (prometheus.Observer, bool) {
		return m.enqueueTime.WithLabelValues(overflow, overflow, outcome), true
	})
}
