package metrics

import (
	"sync/atomic"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegate/sluice/flowcontrol"
)

// DefaultMaxModelNames is how many distinct model_name and
// target_model_name label values (the two share the cap) a [Metrics]
// keeps unless [Options.MaxModelNames] says otherwise, as in llm-d-router:
// later ones are counted under "other".
const DefaultMaxModelNames = 1000

// NotYetFinalized is the outcome label of an enqueue after which the
// request waits in its queue, in flow_control_request_enqueue_duration_seconds,
// as llm-d-router labels it; with [DroppedReasons] it is "queued".
const NotYetFinalized = "NotYetFinalized"

// EnqueueDurationBuckets are the upper bounds, in seconds, of
// flow_control_request_enqueue_duration_seconds: llm-d-router's, from
// 100µs to 100ms.
var EnqueueDurationBuckets = []float64{0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1}

// RequestLabels is the [flowcontrol.Request.Tag] that gives a request's
// series their model_name and target_model_name labels: set it as the
// request's Tag (a classifier sets [flowhttp.Classification.Tag]), and
// [Metrics.Observe] and [Metrics.Waiting] read it back from the
// controller's events. A request with another Tag, or none, is labelled
// with two empty values. Each value is capped in length and count like a
// fairness id ([Options.MaxLabelLength], [Options.MaxModelNames]).
//
// [flowhttp.Classification.Tag]: https://pkg.go.dev/github.com/sluicegate/sluice/flowcontrol/flowhttp#Classification
type RequestLabels struct {
	// ModelName is the model the request asks for: its body's "model".
	ModelName string
	// TargetModelName is the model it is served by. In llm-d-router it is
	// what its model rewrite chose before dispatch; Sluice rewrites no
	// model, so it is ModelName unless the caller knows better.
	TargetModelName string
}

// models is the pair of model label values of one series.
type models struct{ name, target string }

// modelsOf returns the bounded model labels of an event's tag.
func (m *Metrics) modelsOf(tag any) models {
	l, ok := tag.(RequestLabels)
	if !ok {
		return models{}
	}
	return models{name: m.modelLabel(l.ModelName), target: m.modelLabel(l.TargetModelName)}
}

// modelLabel returns the label value of model name s: itself while fewer
// than the cap are in use, the overflow value past it, or at once for a
// name longer than the length cap or not valid UTF-8. The empty name takes
// no place under the cap.
func (m *Metrics) modelLabel(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > m.maxLabelLen {
		return overflow
	}
	if v, ok := m.modelNames.load(s); ok {
		return v
	}
	if m.modelsFull.Load() || !utf8.ValidString(s) {
		return overflow
	}
	return m.modelNames.loadOrMake(s, func(size int) (string, bool) {
		if size >= m.maxModels {
			m.modelsFull.Store(true)
			return overflow, false
		}
		return s, true
	})
}

// waitKey names the requests of one flow waiting in one band for one pair
// of models.
type waitKey struct {
	priority int
	models   models
	// folded marks the requests of every pair of models past the queue
	// gauges' series cap (models is then empty).
	folded bool
}

// waitCount is what waits under a waitKey, as Waiting and Observe count it.
// It may read below 0 for a moment: a Submit's outcome can be observed
// before its Waiting call.
type waitCount struct {
	requests, bytes atomic.Int64
}

// Waiting counts a request that has just entered its queue: its enqueue's
// duration in flow_control_request_enqueue_duration_seconds with outcome
// NotYetFinalized, and its place under its models in the flow's
// flow_control_queue_size and queue_bytes. Set it as the controller's
// Waiting hook, beside the Observer: cfg.Waiting = m.Waiting. Without it,
// the enqueue durations of requests that wait are missing and the queue
// gauges carry empty model labels.
func (m *Metrics) Waiting(ev flowcontrol.Event) {
	f := m.flowFor(ev.Effective.ID)
	ml := m.modelsOf(ev.Tag)
	m.waitingSeries(f, ev.Effective.Priority).Observe(ev.EnqueueTime.Seconds())
	m.waitCountFor(f, ev.Effective.Priority, ml).add(1, ev.ByteSize)
	if w := m.watched.Load(); w != nil {
		m.track(w, f, ev.Effective.ID, ev.Effective.Priority)
	}
}

// waitingSeries returns the NotYetFinalized enqueue-duration series of
// band priority in flow f.
func (m *Metrics) waitingSeries(f *flowSeries, priority int) prometheus.Observer {
	p := m.priorityLabel(priority)
	if s, ok := f.waiting.load(p); ok {
		return s
	}
	return f.waiting.loadOrMake(p, func(int) (prometheus.Observer, bool) {
		label := NotYetFinalized
		if m.outcomes == DroppedReasons {
			label = "queued"
		}
		if !m.enqueueCap.admit(enqueueTimeKey{f.label, p, label}) {
			return m.foldedEnqueue(label), false
		}
		return m.enqueueTime.WithLabelValues(f.label, p, label), true
	})
}

// waitCountFor returns the count of flow f's requests waiting in band
// priority for models ml. Only flows with their own label keep counts
// (the overflow flow's are read by no scrape), for the bands a request
// can wait in (provisioned ones); a pair of models takes a place under
// the queue gauges' series cap, and past it the flow's requests of any
// new pair are counted together, under a folded key that a scrape reads
// under fairness_id "other". So the counts are at most the cap plus two
// per flow and band.
func (m *Metrics) waitCountFor(f *flowSeries, priority int, ml models) *waitCount {
	if f == m.other {
		return &m.unread
	}
	k := waitKey{priority: priority, models: ml}
	if c, ok := f.waits.load(k); ok {
		return c
	}
	bands := m.watchedBands()
	if ml != (models{}) && m.gaugeCap.full(bands) {
		k = waitKey{priority: priority, folded: true} // full: no lock to find out
		if c, ok := f.waits.load(k); ok {
			return c
		}
	}
	c := f.waits.loadOrMake(k, func(int) (*waitCount, bool) {
		if k.models == (models{}) || m.gaugeCap.take(bands) {
			return new(waitCount), true
		}
		return nil, false
	})
	if c != nil {
		return c
	}
	k = waitKey{priority: priority, folded: true}
	return f.waits.loadOrMake(k, func(int) (*waitCount, bool) { return new(waitCount), true })
}

// watchedBands returns how many bands a scrape reads.
func (m *Metrics) watchedBands() int {
	if w := m.watched.Load(); w != nil {
		return len(w.priorities)
	}
	return 0
}

func (c *waitCount) add(requests, bytes int64) {
	c.requests.Add(requests)
	c.bytes.Add(bytes)
}
