package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegate/sluice/flowcontrol"
)

// RevocationBuckets are the upper bounds, in seconds, of
// flow_control_revocation_confirmation_seconds: llm-d-router's, from 5ms
// to 10s, the default confirmation timeout.
var RevocationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// revocations holds the families of in-flight eviction, which
// [Metrics.Revocations] updates. Each exists once a step has been heard,
// as llm-d-router's do once first recorded, so a controller that evicts
// nothing exports none of them.
type revocations struct {
	issued       *prometheus.CounterVec   // priority: the band revoked for
	ended        *prometheus.CounterVec   // outcome: confirmed or timed_out
	target       *prometheus.GaugeVec     // no variable label
	pending      *prometheus.GaugeVec     // no variable label
	confirmation *prometheus.HistogramVec // no variable label

	// mu orders the writes of the pending gauge with open, the issues
	// heard less the ends heard. The controller may report a
	// revocation's end before its issue (see flowcontrol.Revocation); an
	// issue heard after its own end (open back at 0 or below) carries
	// an older pending value than the end did, and is not written.
	// heard is set by the first step: from then on a scrape of a
	// watched controller reads its pending reclaim.
	mu    sync.Mutex
	open  int
	heard bool
}

// init makes rv's families, each with constLabels.
func (rv *revocations) init(constLabels prometheus.Labels) {
	*rv = revocations{
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        Prefix + "flow_control_revocations_issued_total",
			Help:        "In-flight admissions revoked to make room for a higher band, by the priority of the band they were revoked for.",
			ConstLabels: constLabels,
		}, []string{"priority"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: Prefix + "flow_control_revocations_total",
			Help: "Revocations by how they ended: confirmed (the holder stopped the request) or timed_out (it did not within the timeout). " +
				"Each issued revocation ends once.",
			ConstLabels: constLabels,
		}, []string{"outcome"}),
		target: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name:        Prefix + "flow_control_reclaim_target",
			Help:        "What the last revocation decision set out to free, in the gate's saturation units.",
			ConstLabels: constLabels,
		}, nil),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: Prefix + "flow_control_pending_reclaim",
			Help: "What the revocations not yet seen by the gate free, outstanding or in their grace after confirmation, " +
				"in the gate's saturation units: read from the watched controller at each scrape, otherwise as of the last revocation step.",
			ConstLabels: constLabels,
		}, nil),
		confirmation: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        Prefix + "flow_control_revocation_confirmation_seconds",
			Help:        "Time from a revocation to its confirmation, when the holder stopped the request; timeouts are not observed.",
			Buckets:     RevocationBuckets,
			ConstLabels: constLabels,
		}, nil),
	}
}

// Revocations counts one step of a revocation. Set it as the controller's
// revocation hook: cfg.Revocations = m.Revocations.
//
// An issue adds one to flow_control_revocations_issued_total{priority},
// priority being the band revoked for (capped as the other families'
// priorities are, see [Options.MaxPriorities]), and sets
// flow_control_reclaim_target to its decision's target. A confirmation or
// a timeout adds one to flow_control_revocations_total{outcome}
// ("confirmed" or "timed_out", llm-d-router's values); a confirmation also
// observes the time since the issue in
// flow_control_revocation_confirmation_seconds. Every step sets
// flow_control_pending_reclaim to the pending reclaim it reports, except
// an issue heard after its own end, whose value is older.
//
// The gauges hold the value of the last step heard, but for the pending
// reclaim of a controller the metrics [Metrics.Watch]: a scrape reads it
// from [flowcontrol.FlowController.PendingReclaim], since the controller
// frees a confirmed revocation's share when its grace has passed and
// reports no step then, and steps of concurrent revocations may be heard
// out of order.
func (m *Metrics) Revocations(r flowcontrol.Revocation) {
	rv := &m.rev
	issued := false
	switch r.Step {
	case flowcontrol.RevocationIssued:
		issued = true
		rv.issued.WithLabelValues(m.priorityLabel(r.For)).Inc()
		rv.target.WithLabelValues().Set(r.Target)
	case flowcontrol.RevocationConfirmed:
		rv.confirmation.WithLabelValues().Observe(r.Waited.Seconds())
		rv.ended.WithLabelValues(r.Step.String()).Inc()
	case flowcontrol.RevocationTimedOut:
		rv.ended.WithLabelValues(r.Step.String()).Inc()
	default:
		return // a step this package does not know: no label to give it
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.heard = true
	if issued {
		rv.open++
		if rv.open <= 0 {
			return
		}
	} else {
		rv.open--
	}
	rv.pending.WithLabelValues().Set(r.Pending)
}

// observeEviction counts the second event of a request revoked after its
// dispatch (evicted-priority or evicted). llm-d-router counts such a
// request once, Dispatched, in flow_control_requests_total: its outcome
// set has no value for a request killed after dispatch, and its
// revocation families count the kill. So with [LLMDOutcomes] the event
// changes no series; with [DroppedReasons], whose values are
// llm-d-router's dropped reasons, it adds one to
// flow_control_requests_total under that reason. The queue-duration and
// enqueue-duration histograms observed the request at its dispatch and
// observe nothing now.
func (m *Metrics) observeEviction(ev flowcontrol.Event) {
	if m.outcomes != DroppedReasons {
		return
	}
	k := evictionKey{priority: m.priorityLabel(ev.Effective.Priority), outcome: ev.Outcome}
	c, ok := m.evictions.load(k)
	if !ok {
		c = m.evictions.loadOrMake(k, func(int) (prometheus.Counter, bool) {
			return m.requests.WithLabelValues(k.outcome.String(), k.priority), true
		})
	}
	c.Inc()
}

// evictionKey names a series of flow_control_requests_total that counts
// evictions: the victim's band label and its outcome. There are at most
// (MaxPriorities + 1) × 2 of them.
type evictionKey struct {
	priority string
	outcome  flowcontrol.Outcome
}

func isEviction(o flowcontrol.Outcome) bool {
	return o == flowcontrol.OutcomeEvicted || o == flowcontrol.OutcomeEvictedPriority
}

// families are the revocation collectors, in the order they are described
// and collected.
func (rv *revocations) families() []prometheus.Collector {
	return []prometheus.Collector{rv.issued, rv.ended, rv.target, rv.pending, rv.confirmation}
}

func (rv *revocations) describe(ch chan<- *prometheus.Desc) {
	for _, f := range rv.families() {
		f.Describe(ch)
	}
}

// collect collects the families; with c, the watched controller, the
// pending reclaim is read from it now rather than from the last step.
func (rv *revocations) collect(ch chan<- prometheus.Metric, c *flowcontrol.FlowController) {
	rv.mu.Lock()
	if c != nil && rv.heard {
		rv.pending.WithLabelValues().Set(c.PendingReclaim())
	}
	rv.mu.Unlock()
	for _, f := range rv.families() {
		f.Collect(ch)
	}
}
