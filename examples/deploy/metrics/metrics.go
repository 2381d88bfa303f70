package metrics

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
)

// Prefix is the start of every metric name: llm-d-router's endpoint picker
// subsystem.
const Prefix = "llm_d_epp_"

// DefaultMaxFairnessIDs is how many distinct fairness_id label values a
// [Metrics] keeps unless [Options.MaxFairnessIDs] says otherwise, as in
// llm-d-router.
const DefaultMaxFairnessIDs = 1000

// DefaultMaxLabelLength is the longest fairness_id label value, in bytes,
// a [Metrics] keeps unless [Options.MaxLabelLength] says otherwise: a
// longer flow id is counted under "other". Flow ids come from a request
// header, which may be as long as the server's header limit (1 MB by
// default); 128 bytes hold a UUID, a tenant name or a hash with room to
// spare.
const DefaultMaxLabelLength = 128

// DefaultMaxPriorities is how many distinct priority label values a
// [Metrics] keeps unless [Options.MaxPriorities] says otherwise; later
// ones are counted under "other". Effective priorities name provisioned
// bands, so they are few; only a rejection under NeverPromote reports the
// priority a client asked for, which may be any integer.
const DefaultMaxPriorities = 256

// SourceMetrics is the source_type of a model server's metrics endpoint in
// llm-d-router ("metrics-data-source"), for [Metrics.PollError].
const SourceMetrics = "metrics-data-source"

// QueueDurationBuckets are the upper bounds, in seconds, of
// flow_control_request_queue_duration_seconds: llm-d-router's, from 100µs
// to 60s.
var QueueDurationBuckets = []float64{
	0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// Options configures a [Metrics]. The zero Options is ready to use.
type Options struct {
	// InferencePool, if not empty, is set as the inference_pool label of
	// every flow_control_* series, as llm-d-router labels them.
	InferencePool string
	// MaxFairnessIDs caps the distinct fairness_id label values: the first
	// MaxFairnessIDs flow ids seen keep their own label, every later one is
	// counted under "other". 0 means [DefaultMaxFairnessIDs]; a negative
	// value counts every flow under "other". The empty id and "other"
	// itself take no place under the cap.
	MaxFairnessIDs int
	// MaxLabelLength caps the length, in bytes, of a fairness_id label
	// value: a longer flow id, or one that is not valid UTF-8, is counted
	// under "other" and takes no place under MaxFairnessIDs. 0 means
	// [DefaultMaxLabelLength]; a negative value counts every non-empty
	// flow under "other".
	MaxLabelLength int
	// MaxPriorities caps the distinct priority label values: the first
	// MaxPriorities priorities seen keep their own label, every later one
	// is counted under "other". 0 means [DefaultMaxPriorities]; a negative
	// value counts every priority under "other".
	MaxPriorities int
	// Outcomes selects the outcome label values; the zero value is
	// [LLMDOutcomes].
	Outcomes OutcomeLabels
	// MaxModelNames caps the distinct model_name and target_model_name
	// label values, which share it: the first MaxModelNames names seen
	// keep their own label, every later one is counted under "other"
	// (names come from request bodies). 0 means [DefaultMaxModelNames]; a
	// negative value counts every named model under "other". A name
	// longer than MaxLabelLength is "other" too.
	MaxModelNames int
	// MaxSeries caps the series of each family whose labels clients
	// choose — the queue- and enqueue-duration histograms, whose
	// fairness_id, priority, model_name and target_model_name come from
	// a request, and the flows and models of queue_size and queue_bytes
	// — overflow series included: the per-label caps bound each label's
	// values, not their product. Past it a new label set is counted under
	// the overflow series, which has every client-chosen label "other"
	// (see the package doc). 0 means [DefaultMaxSeries]; a value below
	// 16, negative ones included, is 16, room for the overflow series.
	MaxSeries int
	// QueueDurationBuckets replaces [QueueDurationBuckets] when not nil;
	// the bounds must increase strictly.
	QueueDurationBuckets []float64
	// Logger receives what a scrape swallows: a band that cannot be read,
	// a registered func that panicked. Nil discards it.
	Logger *slog.Logger
}

// Metrics exports a flow controller's metrics to Prometheus under
// llm-d-router's names. It is a [prometheus.Collector]: register it with
// prometheus.Registerer.Register.
//
// Two kinds of metric make it up. Per-request metrics (the queue-duration
// histogram and the requests counter) are updated by [Metrics.Observe],
// which a controller calls through [flowcontrol.Config.Observer]. State
// metrics (queue sizes, utilisation, in-flight requests, pool saturation)
// are read at scrape time, from the lock-free snapshots of the controller
// that [Metrics.Watch] names and from the funcs registered with
// [Metrics.PoolSaturation], [Metrics.GateLimit] and
// [Metrics.StaleEndpoints]; nothing updates them on the request path.
//
// Create one with [New]. A Metrics is safe for concurrent use.
type Metrics struct {
	outcomes OutcomeLabels
	log      *slog.Logger

	queueTime   *prometheus.HistogramVec // fairness_id, priority, outcome, model_name, target_model_name
	enqueueTime *prometheus.HistogramVec // fairness_id, priority, outcome
	requests    *prometheus.CounterVec   // outcome, priority
	pollErrors  *prometheus.CounterVec   // source_type

	// Label caches: see series.go.
	flows          cowMap[string, *flowSeries]
	flowsFull      atomic.Bool
	admitted       int // flow ids with their own label; guarded by flows.mu
	maxFlows       int
	maxLabelLen    int
	other          *flowSeries
	priorities     cowMap[int, string]
	prioritiesFull atomic.Bool
	maxPriorities  int
	modelNames     cowMap[string, string]
	modelsFull     atomic.Bool
	maxModels      int
	// Series caps, and the overflow series past them: see cap.go.
	queueCap       *seriesCap[queueTimeKey]
	enqueueCap     *seriesCap[enqueueTimeKey]
	gaugeCap       gaugeCap
	folded         cowMap[foldKey, *series]
	foldedEnqueues cowMap[string, prometheus.Observer]
	// unread counts what the overflow flow has waiting: no scrape reads it.
	unread waitCount
	// evictions holds the requests counter's series of evicted requests
	// (DroppedReasons only): see revocations.go.
	evictions cowMap[evictionKey, prometheus.Counter]

	// rev holds the families of in-flight eviction.
	rev revocations

	watched atomic.Pointer[watched]
	// tracked holds each flow seen in each watched band, for the per-flow
	// queue gauges: see flows.go.
	tracked cowMap[flowBand, struct{}]
	// funcs holds the registered funcs, indexed by funcSaturation etc.
	funcs [numFuncs]atomic.Pointer[funcGauge]

	// Descriptions of the metrics read at scrape time.
	queueSize, queueBytes, queueCost                         *prometheus.Desc
	utilRequests, utilBytes, utilCost                        *prometheus.Desc
	globalRequests, globalBytes, globalCost                  *prometheus.Desc
	inFlight, gateRefusals, poolSaturation, gateLimit, stale *prometheus.Desc
}

// The registered funcs, in the order Collect reads them.
const (
	funcSaturation = iota
	funcGateLimit
	funcStale
	numFuncs
)

// funcGauge is a gauge whose value a registered func returns at scrape
// time.
type funcGauge struct {
	desc   *prometheus.Desc
	name   string // for the log
	labels []string
	f      func() float64
}

// watched is what a scrape reads from a controller. It is immutable once
// published.
type watched struct {
	c          *flowcontrol.FlowController
	priorities []int // sorted, distinct
	requests   capacity.Limit
	bytes      capacity.Limit
	cost       capacity.Limit
	// fallback and neverPromote are the controller's, to tell which band
	// a request is queued in ([Metrics.Enqueued]).
	fallback     int
	neverPromote bool
}

// New returns a Metrics configured by opts. It panics if
// opts.QueueDurationBuckets do not increase strictly.
func New(opts Options) *Metrics {
	var constLabels prometheus.Labels
	if opts.InferencePool != "" {
		constLabels = prometheus.Labels{"inference_pool": opts.InferencePool}
	}
	buckets := slices.Clone(opts.QueueDurationBuckets)
	if buckets == nil {
		buckets = slices.Clone(QueueDurationBuckets)
	}
	for i := 1; i < len(buckets); i++ {
		if !(buckets[i] > buckets[i-1]) {
			panic(fmt.Sprintf("metrics: QueueDurationBuckets %v do not increase strictly", opts.QueueDurationBuckets))
		}
	}
	maxFlows := cmp.Or(opts.MaxFairnessIDs, DefaultMaxFairnessIDs)
	maxLabelLen := cmp.Or(opts.MaxLabelLength, DefaultMaxLabelLength)
	maxPriorities := cmp.Or(opts.MaxPriorities, DefaultMaxPriorities)
	maxModels := cmp.Or(opts.MaxModelNames, DefaultMaxModelNames)
	maxSeries := max(cmp.Or(opts.MaxSeries, DefaultMaxSeries), minSeries)
	// The overflow series of the histograms take one place per outcome
	// value; the enqueue histogram has NotYetFinalized besides.
	outcomes := outcomeValues(opts.Outcomes)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		outcomes:      opts.Outcomes,
		log:           log,
		maxFlows:      maxFlows,
		maxLabelLen:   max(maxLabelLen, 0),
		maxPriorities: maxPriorities,
		maxModels:     maxModels,
		queueCap:      newSeriesCap[queueTimeKey](maxSeries - outcomes),
		enqueueCap:    newSeriesCap[enqueueTimeKey](maxSeries - outcomes - 1),
		gaugeCap:      gaugeCap{max: int64(maxSeries)},
		other:         &flowSeries{label: overflow},
		queueTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        Prefix + "flow_control_request_queue_duration_seconds",
			Help:        "Time requests spent in flow control, from enqueue to their outcome; 0 for a request dispatched or refused at once.",
			Buckets:     buckets,
			ConstLabels: constLabels,
		}, []string{"fairness_id", "priority", "outcome", "model_name", "target_model_name"}),
		enqueueTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: Prefix + "flow_control_request_enqueue_duration_seconds",
			Help: "Time the controller took over a request's enqueue (capacity checks, the gate's first answer, the insert), " +
				"by the outcome reached within it, or NotYetFinalized for a request left waiting.",
			Buckets:     EnqueueDurationBuckets,
			ConstLabels: constLabels,
		}, []string{"fairness_id", "priority", "outcome"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        Prefix + "flow_control_requests_total",
			Help:        "Requests that reached an outcome in flow control, one count each, by outcome and the band that handled them.",
			ConstLabels: constLabels,
		}, []string{"outcome", "priority"}),
		pollErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: Prefix + "datalayer_poll_errors_total",
			Help: "Failed polls of a model-server data source, by source type.",
		}, []string{"source_type"}),
	}
	m.rev.init(constLabels)
	// The empty id and the overflow value have their own series from the
	// start, so that neither takes a place under the cap.
	m.flows.loadOrMake("", func(int) (*flowSeries, bool) { return &flowSeries{}, true })
	m.flows.loadOrMake(overflow, func(int) (*flowSeries, bool) { return m.other, true })

	band := []string{"priority"}
	desc := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(Prefix+name, help, labels, constLabels)
	}
	flow := []string{"fairness_id", "priority", "model_name", "target_model_name"}
	m.queueSize = desc("flow_control_queue_size", "Requests of a flow waiting in a priority band.", flow)
	m.queueBytes = desc("flow_control_queue_bytes", "Bytes of the requests of a flow waiting in a priority band.", flow)
	m.queueCost = desc("flow_control_queue_cost", "Summed cost (estimated tokens) of the requests waiting in a priority band.", band)
	// The utilization of each capacity: what waits over the capacity, in
	// a band and in all bands, for each of the three things counted.
	util := func(suffix, what, capacity string) (inBand, global *prometheus.Desc) {
		inBand = desc("flow_control_capacity_utilization_"+suffix,
			what+" waiting in a band over its "+capacity+" capacity; above 1 after the capacity shrank. Absent for an unbounded capacity.", band)
		global = desc("flow_control_global_capacity_utilization_"+suffix,
			what+" waiting in all bands over the global "+capacity+" capacity. Absent when it is unbounded.", nil)
		return inBand, global
	}
	m.utilRequests, m.globalRequests = util("requests", "Requests", "request")
	m.utilBytes, m.globalBytes = util("bytes", "Bytes", "byte")
	m.utilCost, m.globalCost = util("cost", "Cost", "cost")
	m.inFlight = desc("flow_control_requests_in_flight", "Requests dispatched by flow control and not yet done.", nil)
	m.gateRefusals = desc("flow_control_gate_refusals_total",
		"Times the gate refused the request flow control offered it; a waiting request is offered again at each event.", nil)
	m.poolSaturation = desc("flow_control_pool_saturation",
		"Saturation of the model-server pool that gates dispatch; 1 is the gating set point, above 1 oversubscribed.", []string{"stage"})
	m.gateLimit = desc("flow_control_gate_limit", "Requests the gate lets be in flight at once now.", nil)
	m.stale = desc("flow_control_stale_endpoints",
		"Endpoints whose metrics are missing or stale, which the saturation gate counts as saturated.", []string{"detector"})
	return m
}

// Observe counts one outcome: it adds the event's queue time to the
// queue-duration histogram and one to the requests counter. Set it as the
// controller's observer: cfg.Observer = m.Observe.
//
// Labels: fairness_id is the flow's id (capped in count and length, see
// [Options.MaxFairnessIDs] and [Options.MaxLabelLength]), priority the
// band that handled the request (its effective priority; capped, see
// [Options.MaxPriorities]), outcome as [Options.Outcomes] selects. Every
// value past a cap is "other", so the series are bounded whatever clients
// send. Observe allocates nothing once an event's series exist, nor for an
// event counted under "other" once those series exist.
//
// The second event of a request revoked after its dispatch
// ([flowcontrol.OutcomeEvictedPriority] or [flowcontrol.OutcomeEvicted])
// is counted as llm-d-router counts such a request: not again with
// [LLMDOutcomes], once more under its dropped reason with
// [DroppedReasons]. Its revocation is counted by [Metrics.Revocations].
func (m *Metrics) Observe(ev flowcontrol.Event) {
	if isEviction(ev.Outcome) {
		m.observeEviction(ev)
		return
	}
	f := m.flowFor(ev.Effective.ID)
	ml := m.modelsOf(ev.Tag)
	s := m.seriesFor(f, ev.Effective.Priority, ev.Outcome, ev.Queued || ev.QueueTime > 0, ml)
	s.queueTime.Observe(ev.QueueTime.Seconds())
	s.total.Inc()
	if s.enqueueTime != nil {
		s.enqueueTime.Observe(ev.EnqueueTime.Seconds())
	}
	if ev.Queued {
		m.waitCountFor(f, ev.Effective.Priority, ml).add(-1, -ev.ByteSize)
	}
	if w := m.watched.Load(); w != nil {
		m.track(w, f, ev.Effective.ID, ev.Effective.Priority)
	}
}

// Watch makes every later scrape read c: the queue size, bytes, cost and
// utilisation of each band of cfg.Bands; the utilisation of cfg's bounded
// global capacities, summed over those bands; and c's requests in flight.
// cfg is the configuration c was made from; it is copied. A band
// provisioned later is added with [Metrics.WatchBand]. A later Watch
// replaces the earlier one.
func (m *Metrics) Watch(c *flowcontrol.FlowController, cfg flowcontrol.Config) {
	w := &watched{c: c, requests: cfg.RequestCapacity, bytes: cfg.ByteCapacity, cost: cfg.CostCapacity,
		fallback: cfg.FallbackPriority, neverPromote: cfg.NeverPromote}
	for _, b := range cfg.Bands {
		w.priorities = append(w.priorities, b.Priority)
	}
	slices.Sort(w.priorities)
	w.priorities = slices.Compact(w.priorities)
	m.watched.Store(w)
}

// WatchBand adds band priority, provisioned after [Metrics.Watch] with
// ProvisionBand, to the bands a scrape reads. It does nothing before Watch
// or for a band already read.
func (m *Metrics) WatchBand(priority int) {
	for {
		old := m.watched.Load()
		if old == nil {
			return
		}
		i, found := slices.BinarySearch(old.priorities, priority)
		if found {
			return
		}
		w := *old
		w.priorities = slices.Insert(slices.Clone(old.priorities), i, priority)
		if m.watched.CompareAndSwap(old, &w) {
			return
		}
	}
}

// The funcs below are called at scrape time only, and must be safe for
// concurrent use. A later call replaces the func; nil removes the metric.

// PoolSaturation makes every later scrape report f() as
// flow_control_pool_saturation{stage="effective"}: the value that gates
// dispatch, such as a saturation gate's Saturation method.
func (m *Metrics) PoolSaturation(f func() float64) {
	m.setFunc(funcSaturation, m.poolSaturation, "flow_control_pool_saturation", f, "effective")
}

// GateLimit makes every later scrape report f() as flow_control_gate_limit:
// the requests the gate lets be in flight at once now, such as a
// concurrency gate's maximum or an adaptive gate's learned limit. Beside
// flow_control_requests_in_flight it shows how close the gate is to
// refusing.
func (m *Metrics) GateLimit(f func() float64) {
	m.setFunc(funcGateLimit, m.gateLimit, "flow_control_gate_limit", f)
}

// StaleEndpoints makes every later scrape report f() as
// flow_control_stale_endpoints{detector}: the endpoints whose metrics are
// missing or stale, which a saturation gate counts as saturated (for a
// gate.SaturationGate, Status().Endpoints - Status().Fresh). A nonzero
// value during a dispatch stall points at metrics collection, not load.
// detector names the gate; llm-d-router's default detector is
// "utilization-detector".
func (m *Metrics) StaleEndpoints(detector string, f func() int) {
	var g func() float64
	if f != nil {
		g = func() float64 { return float64(f()) }
	}
	m.setFunc(funcStale, m.stale, "flow_control_stale_endpoints", g, detector)
}

func (m *Metrics) setFunc(i int, d *prometheus.Desc, name string, f func() float64, labels ...string) {
	if f == nil {
		m.funcs[i].Store(nil)
		return
	}
	m.funcs[i].Store(&funcGauge{desc: d, name: name, labels: labels, f: f})
}

// PollError counts one failed poll of a model-server data source of type
// sourceType, such as [SourceMetrics] for a vLLM /metrics scrape, in
// datalayer_poll_errors_total{source_type}. Pass a constant: every distinct
// value is a series.
func (m *Metrics) PollError(sourceType string) {
	m.pollErrors.WithLabelValues(sourceType).Inc()
}

// Describe sends the descriptions of every metric m may export.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.queueTime.Describe(ch)
	m.enqueueTime.Describe(ch)
	m.requests.Describe(ch)
	m.pollErrors.Describe(ch)
	m.rev.describe(ch)
	for _, d := range []*prometheus.Desc{
		m.queueSize, m.queueBytes, m.queueCost,
		m.utilRequests, m.utilBytes, m.utilCost,
		m.globalRequests, m.globalBytes, m.globalCost,
		m.inFlight, m.gateRefusals, m.poolSaturation, m.gateLimit, m.stale,
	} {
		ch <- d
	}
}

// Collect sends the current value of every metric. A band that cannot be
// read is left out and logged; a registered func that panics is left out
// and logged, and the scrape goes on.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.queueTime.Collect(ch)
	m.enqueueTime.Collect(ch)
	m.requests.Collect(ch)
	m.pollErrors.Collect(ch)
	w := m.watched.Load()
	var c *flowcontrol.FlowController
	if w != nil {
		c = w.c
	}
	m.rev.collect(ch, c)
	if w != nil {
		m.collectBands(ch, w)
	}
	for i := range m.funcs {
		if g := m.funcs[i].Load(); g != nil {
			if v, ok := m.call(g.name, g.f); ok {
				gauge(ch, g.desc, v, g.labels...)
			}
		}
	}
}

// collectBands sends the state of the watched controller.
func (m *Metrics) collectBands(ch chan<- prometheus.Metric, w *watched) {
	var requests, bytes, cost int64
	flows := m.trackedByBand()
	for _, p := range w.priorities {
		s, err := w.c.CapacitySnapshot(p)
		if err != nil {
			m.log.LogAttrs(context.Background(), slog.LevelWarn, "metrics: band left out of the scrape",
				slog.Int("priority", p), slog.Any("error", err))
			continue
		}
		prio := strconv.Itoa(p)
		m.collectFlows(ch, w, flows[p], p, s)
		gauge(ch, m.queueCost, float64(s.QueuedCost), prio)
		utilization(ch, m.utilRequests, s.QueuedRequests, s.RequestCapacity, prio)
		utilization(ch, m.utilBytes, s.QueuedBytes, s.ByteCapacity, prio)
		utilization(ch, m.utilCost, s.QueuedCost, s.CostCapacity, prio)
		requests += s.QueuedRequests
		bytes += s.QueuedBytes
		cost += s.QueuedCost
	}
	utilization(ch, m.globalRequests, requests, w.requests)
	utilization(ch, m.globalBytes, bytes, w.bytes)
	utilization(ch, m.globalCost, cost, w.cost)
	gauge(ch, m.inFlight, float64(w.c.InFlight()))
	ch <- prometheus.MustNewConstMetric(m.gateRefusals, prometheus.CounterValue, float64(w.c.GateRefusals()))
}

// call returns f(), or false if f panicked, which it logs.
func (m *Metrics) call(name string, f func() float64) (v float64, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			m.log.LogAttrs(context.Background(), slog.LevelError, "metrics: a registered func panicked; its metric is left out of the scrape",
				slog.String("metric", Prefix+name), slog.String("panic", fmt.Sprint(r)))
		}
	}()
	return f(), true
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// utilization sends used over the bound of l as the gauge d, and nothing
// for an unbounded l. A bound of 0 reads 0 while nothing is used and 1 when
// something is (left from a larger bound).
func utilization(ch chan<- prometheus.Metric, d *prometheus.Desc, used int64, l capacity.Limit, labels ...string) {
	n, bounded := l.Value()
	if !bounded {
		return
	}
	var r float64
	switch {
	case n > 0:
		r = float64(used) / float64(n)
	case used > 0:
		r = 1
	}
	gauge(ch, d, r, labels...)
}
