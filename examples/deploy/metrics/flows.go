package metrics

import (
	"context"
	"log/slog"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
)

// flowBand names one flow in one band: the queue that
// flow_control_queue_size{fairness_id, priority} reads.
type flowBand struct {
	id       string
	priority int
}

// Enqueued tells m of a request about to be enqueued under key, the flow
// key it asks for, so that its flow has its own flow_control_queue_size
// and queue_bytes series from its first request: call it from the
// classifier, just before the controller sees the request. It is cheap
// (two map reads) once the flow is known in its band. Without it a flow
// is known from its first outcome ([Metrics.Observe]), and until then its
// waiting requests are counted under fairness_id "other".
func (m *Metrics) Enqueued(key flowcontrol.FlowKey) {
	w := m.watched.Load()
	if w == nil {
		return
	}
	if p, ok := w.resolve(key.Priority); ok {
		m.track(w, m.flowFor(key.ID), key.ID, p)
	}
}

// track records that flow id, whose series are f, has been seen in band
// priority, unless the flow's label is past the cap (its requests are
// then "other"'s), the band is not watched, or the queue gauges hold
// their cap of series: the flows tracked are at most the fairness_id cap
// times the watched bands, and at most MaxSeries.
func (m *Metrics) track(w *watched, f *flowSeries, id string, priority int) {
	if f.label != id || id == overflow {
		return
	}
	k := flowBand{id: id, priority: priority}
	if _, ok := m.tracked.load(k); ok {
		return
	}
	if _, found := slices.BinarySearch(w.priorities, priority); !found {
		return
	}
	bands := len(w.priorities)
	if m.gaugeCap.full(bands) {
		return // what the flow has waiting is read under "other"
	}
	m.tracked.loadOrMake(k, func(int) (struct{}, bool) { return struct{}{}, m.gaugeCap.take(bands) })
}

// resolve returns the band a request for priority p is queued in, as the
// controller chooses it: its own band, else the fallback, or under
// NeverPromote the nearest band below; false when none takes it.
func (w *watched) resolve(p int) (int, bool) {
	i, found := slices.BinarySearch(w.priorities, p)
	switch {
	case found:
		return p, true
	case !w.neverPromote:
		return w.fallback, true
	case i > 0:
		return w.priorities[i-1], true
	}
	return 0, false
}

// collectFlows sends flow_control_queue_size and queue_bytes of band
// priority, whose snapshot s has just been read: one series per flow seen
// in the band (read with FlowSnapshot, under the controller's lock, one
// brief hold per flow), and under "other" what the band holds beyond
// them — the flows past the cap, and flows not seen yet — when that is
// not nothing. Each flow is read at its own instant, so "other" may be
// off by a request moving meanwhile; it is never negative.
func (m *Metrics) collectFlows(ch chan<- prometheus.Metric, w *watched, ids []string, priority int, s capacity.Snapshot) {
	prio := strconv.Itoa(priority)
	restRequests, restBytes := s.QueuedRequests, s.QueuedBytes
	var foldedRequests, foldedBytes int64
	for _, id := range ids {
		fs, err := w.c.FlowSnapshot(priority, id)
		if err != nil {
			m.log.LogAttrs(context.Background(), slog.LevelWarn, "metrics: flow left out of the scrape",
				slog.Int("priority", priority), slog.Any("error", err))
			continue
		}
		r, b := m.collectModels(ch, id, priority, prio, fs)
		foldedRequests += r
		foldedBytes += b
		restRequests -= fs.QueuedRequests
		restBytes -= fs.QueuedBytes
	}
	if restRequests > 0 || restBytes > 0 {
		gauge(ch, m.queueSize, float64(max(restRequests, 0)), overflow, prio, "", "")
		gauge(ch, m.queueBytes, float64(max(restBytes, 0)), overflow, prio, "", "")
	}
	if foldedRequests > 0 || foldedBytes > 0 {
		gauge(ch, m.queueSize, float64(foldedRequests), overflow, prio, overflow, overflow)
		gauge(ch, m.queueBytes, float64(foldedBytes), overflow, prio, overflow, overflow)
	}
}

// collectModels sends the queue gauges of flow id in band priority, whose
// snapshot fs has just been read, split by models: each pair of models
// the flow has waited for in the band ([Metrics.Waiting] counts them),
// within what fs holds, 0 once none of them waits, as llm-d-router's
// gauges read; and the rest — requests of the flow without model labels,
// or the moment between a request's insert and its Waiting call — under
// empty model labels while it is not nothing, or when requests without
// labels have waited there. A flow that never waited in the band (its
// requests dispatched or refused at once) has no series: a series with
// empty model labels would misname what it asks for. It returns, not
// sends, what the flow has waiting for pairs of models past the series
// cap: the caller sends the band's sum under fairness_id "other".
func (m *Metrics) collectModels(ch chan<- prometheus.Metric, id string, priority int, prio string, fs capacity.Snapshot) (foldedRequests, foldedBytes int64) {
	restRequests, restBytes := fs.QueuedRequests, fs.QueuedBytes
	unlabelled := false // requests without model labels have waited here
	if f, ok := m.flows.load(id); ok && f.label == id {
		if p := f.waits.m.Load(); p != nil {
			for k, c := range *p {
				if k.priority != priority {
					continue
				}
				if k.models == (models{}) && !k.folded {
					unlabelled = true
					continue
				}
				n := max(min(c.requests.Load(), restRequests), 0)
				b := min(max(c.bytes.Load(), 0), restBytes)
				if n == 0 {
					b = 0
				}
				restRequests -= n
				restBytes -= b
				if k.folded {
					foldedRequests, foldedBytes = n, b
					continue
				}
				gauge(ch, m.queueSize, float64(n), id, prio, k.models.name, k.models.target)
				gauge(ch, m.queueBytes, float64(b), id, prio, k.models.name, k.models.target)
			}
		}
	}
	if restRequests > 0 || restBytes > 0 || unlabelled {
		gauge(ch, m.queueSize, float64(max(restRequests, 0)), id, prio, "", "")
		gauge(ch, m.queueBytes, float64(max(restBytes, 0)), id, prio, "", "")
	}
	return foldedRequests, foldedBytes
}

// trackedByBand returns the tracked flows of each band.
func (m *Metrics) trackedByBand() map[int][]string {
	p := m.tracked.m.Load()
	if p == nil {
		return nil
	}
	by := map[int][]string{}
	for k := range *p {
		by[k.priority] = append(by[k.priority], k.id)
	}
	return by
}
