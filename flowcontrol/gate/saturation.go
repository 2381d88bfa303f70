package gate

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Metrics is what a model server last reported about its load, as a scraper
// reads it from the server's metrics endpoint.
//
// Each field has a range, and a reading with any field out of it — a
// negative count, a KVCache that is NaN, infinite or outside [0, 1], a
// ReadAt later than the gate's clock — is invalid: [SaturationGate.Update]
// counts the endpoint as saturated until its next valid reading, exactly
// as it counts a reading of a full queue and a full KV cache taken at the
// same time, and as stale once that time is older than the staleness
// threshold. A server or a scraper gone wrong so fails closed, never open.
type Metrics struct {
	// Waiting is the number of requests queued in the server, not yet
	// running (vLLM's vllm:num_requests_waiting); at least 0.
	Waiting int
	// Running is the number of requests the server is running
	// (vllm:num_requests_running); at least 0. The gate's start budget
	// does not read it, as llm-d-router's detector does not; the share of
	// the pool in use ([SaturationGate.Saturation]) does, when
	// SlotsPerEndpoint is declared.
	Running int
	// KVCache is the fraction of the server's KV cache in use, from 0 to 1
	// (vllm:kv_cache_usage_perc).
	KVCache float64
	// ReadAt is when the metrics were read, on the gate's clock, and not
	// later than the gate's clock reads at Update. The zero Time means the
	// moment [SaturationGate.Update] is called: a reading newer than any
	// before it.
	ReadAt time.Time
}

// valid reports whether every field of m is in its range, ReadAt being
// no later than now.
func (m Metrics) valid(now time.Time) bool {
	return m.Waiting >= 0 && m.Running >= 0 &&
		m.KVCache >= 0 && m.KVCache <= 1 && // false for NaN
		!m.ReadAt.After(now)
}

// SaturationConfig configures a [SaturationGate]. The zero value of each
// field means its default, which is llm-d-router's.
type SaturationConfig struct {
	// QueueDepthThreshold is the waiting-queue depth at which an endpoint
	// counts as saturated (llm-d utilization-detector queueDepthThreshold;
	// default 5). It is also the bound on what the gate starts between
	// two refreshes: see [SaturationGate].
	QueueDepthThreshold int
	// KVCacheUtilThreshold is the KV-cache utilisation, a fraction in
	// (0, 1], at which an endpoint counts as saturated (llm-d
	// kvCacheUtilThreshold; default 0.8).
	KVCacheUtilThreshold float64
	// MetricsStalenessThreshold is the age at which an endpoint's metrics
	// are stale; a stale endpoint counts as saturated, so the gate fails
	// closed when its scraper stops (llm-d metricsStalenessThreshold;
	// default 200ms).
	MetricsStalenessThreshold time.Duration
	// SlotsPerEndpoint declares how many requests each model server runs
	// at once — vLLM's --max-num-seqs, whose default depends on vLLM's
	// version and hardware: set it on the server and here alike — so
	// that [SaturationGate.Saturation], the share of
	// the pool in use that band ceilings ([Ceiling]), guarantees and
	// in-flight eviction read, counts slots: an endpoint then uses
	// (Running + Waiting) ÷ SlotsPerEndpoint of its capacity, or its
	// KV-cache use if that is higher. 0, the default, declares none, and
	// the share in use is the KV-cache use alone. It changes nothing in
	// what the gate admits, which stays llm-d-router's queue-depth and
	// KV-cache rule. Not negative.
	SlotsPerEndpoint int
	// PriorityScheduling declares that the model servers serve their
	// queues in the priority order the router hands them and preempt a
	// lower priority for a higher one: vLLM run with --scheduling-policy
	// priority, behind a router whose hand-off is on
	// (flowhttp.PriorityHandoff; sluice-gateway -priority-handoff). Their
	// queues' depth then overstates the wait of every band above the
	// lowest there, since a request waits only behind those of its band
	// and above, and a gate that reads it keeps the higher bands out
	// whenever the lower ones fill the queues. With PriorityScheduling
	// the gate also admits a request of band p that llm-d-router's rule
	// refuses while a request of a lower band it started is in flight
	// and its own requests in flight of band p and above are fewer than
	// SlotsPerEndpoint for each endpoint with fresh metrics (this
	// replica's share of them, with Replicas): some server then has a
	// slot that runs lower work, which it preempts for the request.
	// Between two readings it also gives its start budget one start back
	// for each of its requests that ends after running, so metrics a
	// second old do not hold short jobs to llm-d-router's rooms. See
	// "Priority scheduling" in [SaturationGate]. It requires
	// SlotsPerEndpoint.
	PriorityScheduling bool
	// Replicas is the number of router replicas that read the same
	// metrics and share the same model servers, each with its own
	// controller and its own gate (default 1). Replica is this gate's
	// index among them, from 0 to Replicas-1. Each replica starts its
	// share of the room, so that together they start no more than one
	// router would; see [SaturationGate].
	Replicas, Replica int
	// Clock times the staleness of metrics; nil means the real clock. Give
	// it the controller's clock.
	Clock Clock
}

// Defaults of [SaturationConfig], llm-d-router's utilization-detector's.
const (
	DefaultQueueDepthThreshold       = 5
	DefaultKVCacheUtilThreshold      = 0.8
	DefaultMetricsStalenessThreshold = 200 * time.Millisecond
)

// SaturationGate admits requests while the model servers, by their own
// latest metrics, have room: it is llm-d-router's utilization-detector as a
// [Gate]. Create one with [Saturation] and feed it with
// [SaturationGate.Update] from a scraper, on any goroutine.
//
// An endpoint has room when its metrics are fresh and valid (see [Metrics])
// and its KV-cache utilisation is under KVCacheUtilThreshold; its room is then
// QueueDepthThreshold − Waiting (at least 0): the requests that may still
// join its waiting queue before the queue reaches the threshold. The pool
// is saturated, as llm-d defines it, when no endpoint has room — every
// endpoint has Waiting ≥ QueueDepthThreshold, or KV-cache utilisation ≥
// KVCacheUtilThreshold, or stale metrics, or an invalid reading (a NaN
// KV-cache usage, a negative count: anything out of range fails closed).
// The rooms are summed saturating at math.MaxInt64, so no threshold and
// no number of endpoints wraps the budget.
//
// # The start budget
//
// Metrics arrive every scrape interval, and a router dispatches many times
// in between: a gate that only asked "is the pool saturated?" would start
// requests without limit until the next scrape showed the queues it had
// filled. This gate bounds the starts instead. Each refresh of an
// endpoint's metrics sets its room, and the gate admits, from the oldest
// refresh among the endpoints with fresh metrics, at most as many starts
// as the sum of their rooms: whatever endpoint the router picks for each
// request, the requests started after each endpoint's metrics were read do
// not outnumber the places left under the thresholds. A router that sends
// each request to the endpoint with the shortest waiting queue (llm-d's
// queue scorer) therefore never pushes a queue past QueueDepthThreshold
// between two scrapes, if the scrape sees every request started before it.
// Starts after the oldest refresh are counted against all the room, even
// those that landed on endpoints refreshed since, so with endpoints
// scraped at different moments the bound is conservative: it never admits
// more, and may admit fewer, than the room.
//
// When metrics arrive, Update calls [github.com/sluicegate/sluice/flowcontrol.FlowController.Nudge],
// so waiting requests start as soon as there is room; the controller runs
// no goroutine or ticker for it. An endpoint's metrics become stale
// MetricsStalenessThreshold after they were read (a timer on the
// configured clock, armed by Update), and its room drops to zero until the
// next Update: TryAcquire reads no clock.
//
// # Replicas
//
// N router replicas in front of the same servers read the same metrics;
// each would start the whole room. With Replicas N, replica i starts its
// share of each endpoint's room: room/N, plus one of the room mod N
// remaining starts, which go to the replicas in a rotation that depends on
// the endpoint and its ReadAt. Every replica computes the same rotation
// from the same metrics, so the shares sum to the room exactly when the
// replicas are refreshed from the same scrape; replicas that scrape on
// their own sum to the room on average.
//
// # Endpoints
//
// The gate knows the endpoints it was given metrics for and not removed
// ([SaturationGate.Remove]). With none at all it reports
// [EndpointGate.NoEndpoints], and the controller ends waiting
// requests with [github.com/sluicegate/sluice/flowcontrol.OutcomeRejectedNoEndpoints] (503) after its
// NoEndpointsTTL. Before the first Update there are none.
//
// # The share of the pool in use
//
// What the gate admits and how full the pool is are two readings. The
// first is llm-d-router's rule above: the queues' depth and the KV cache,
// against their thresholds. The second, [SaturationGate.Saturation], is
// the share of the pool's capacity in use — slots when SlotsPerEndpoint
// is declared, the KV cache otherwise — and it is what a band ceiling
// ([Ceiling]) compares with each band's ceiling: with SlotsPerEndpoint 16
// and four endpoints, a band whose ceiling is 0.5 starts a request only
// while fewer than 32 of the 64 slots are taken, whatever the depth of
// the queues. llm-d-router's own saturation, from the queue depth, stays
// readable as [SaturationGate.DetectorSaturation], for its gauge.
//
// # Priority scheduling
//
// With [SaturationConfig.PriorityScheduling] the gate counts its own
// requests in flight by band, from each start to its Returned (or
// Release), and admits a band past llm-d-router's rule on those counts
// alone, as described there: with four endpoints of 16 slots, chat starts
// while fewer than 64 chat requests are in flight and some batch request
// is, however deep the batch work queued at the servers. The bound is the
// slots, not the slots and the queues: past them a request would wait at
// one server behind its own band, where the router's queue serves it at
// the first slot that frees on any server. Such a start counts against
// the start budget as any other: it takes a place the lower bands would
// have taken. Without a lower band in flight the servers' queues hold
// only the band's own work and above, and llm-d-router's rule alone
// decides; with no endpoint fresh, nothing starts. The router should send
// such a request to the server with the fewest requests of its band and
// above, where a lower one runs.
//
// Between two readings the gate also counts the ends of its own requests
// that ran: each freed a place at some server, so from the newest refresh
// on each such end gives the budget one more start, whatever the band.
// Metrics a second old then no longer cap the starts at the rooms of the
// last reading while the servers finish requests every few hundred
// milliseconds. Ends before the newest refresh may show in a reading
// already, and count only there.
//
// A SaturationGate is a [MeteredGate] (Release hands back a
// start that a composing gate took and did not use), a
// [BoundGate], a [EndpointGate] and a
// [SaturationDetector] ([SaturationGate.Saturation]). It serves one
// controller. Its methods are safe for concurrent use.
type SaturationGate struct {
	// started counts the starts granted and not handed back, ever. It is
	// written under the controller's lock only, and read by Update.
	started atomic.Int64
	// ended counts, with PriorityScheduling only, the requests that ended
	// after they ran: each freed a place at some server.
	ended atomic.Int64
	// limit is the value started-ended may reach: the rooms of the
	// endpoints with recent readings plus the least started among their
	// refreshes (saturating at math.MaxInt64), less the most ended among
	// them; math.MinInt64 with no recent reading. Written under mu.
	limit atomic.Int64
	// known is the number of endpoints, for NoEndpoints.
	known atomic.Int32
	// detector holds the bits of the float64 DetectorSaturation
	// returns. Written under mu, by recompute.
	detector atomic.Uint64
	// usage is what Saturation reads: the pool's use at the last
	// readings. Written under mu, by recompute.
	usage atomic.Pointer[poolUsage]

	qThr              int
	slots             int
	kvThr             float64
	stale             time.Duration
	replicas, replica int
	clock             Clock
	mu                sync.Mutex
	endpoints         map[string]*endpoint // guarded by mu
	// order holds the endpoints sorted by name, guarded by mu: every sum
	// over them is taken in this order, so that the same readings give
	// the same bits whatever order they arrived in.
	order []*endpoint
	fc    Controller // set by Bind, guarded by mu
	// fresh is the number of endpoints with fresh, valid metrics, set by
	// recompute; bands counts the requests in flight by band, with
	// PriorityScheduling only (nil otherwise).
	fresh atomic.Int64
	bands *bandsInFlight
}

// endpoint is what the gate keeps of one model server. Guarded by the
// gate's mu.
type endpoint struct {
	name string
	m    Metrics
	// recent is true while the last reading, valid or not, is younger
	// than the staleness threshold. An invalid recent reading (bad) takes
	// part in the budget as a saturated one would: no room, and its
	// refresh counts among the refreshes the starts are counted from.
	recent bool
	bad    bool
	share  int64 // this replica's share of the room at the last refresh; 0 when stale or bad
	base   int64 // started at the last refresh
	ended  int64 // the gate's ended at the last refresh
	gen    uint64
	timer  Timer // the staleness timer of the last refresh
}

// poolUsage is the pool's use at the last readings, published whole so
// that Saturation never reads the parts of two.
type poolUsage struct {
	// used is the slots in use at the last readings (summed, the stale
	// and invalid endpoints counted full) when slots are declared, and
	// the mean KV-cache use otherwise; capacity is what it is a share of:
	// the endpoints' slots, or 1.
	used, capacity float64
	// base is the starts granted at the oldest refresh among the
	// endpoints with recent readings: the starts since then are in no
	// reading yet. math.MaxInt64 when none is recent, or when slots are
	// not declared (a start's share of the KV cache is unknown).
	base int64
}

// full is the use of a pool with no endpoints.
var full = &poolUsage{used: 1, capacity: 1, base: math.MaxInt64}

// Saturation returns a saturation gate for cfg, or an error naming the
// first bad field: a negative threshold, staleness or SlotsPerEndpoint, a
// KVCacheUtilThreshold outside (0, 1] (NaN and the infinities included), a
// negative Replicas or a Replica outside [0, Replicas).
func Saturation(cfg SaturationConfig) (*SaturationGate, error) {
	var err error
	if cfg.QueueDepthThreshold, err = orDefault("QueueDepthThreshold", "queueDepthThreshold", cfg.QueueDepthThreshold, DefaultQueueDepthThreshold); err != nil {
		return nil, err
	}
	if cfg.KVCacheUtilThreshold == 0 {
		cfg.KVCacheUtilThreshold = DefaultKVCacheUtilThreshold
	}
	if !(cfg.KVCacheUtilThreshold > 0 && cfg.KVCacheUtilThreshold <= 1) {
		return nil, configError("KVCacheUtilThreshold", "kvCacheUtilThreshold", cfg.KVCacheUtilThreshold, "not a fraction in (0, 1]")
	}
	if cfg.MetricsStalenessThreshold, err = orDefault("MetricsStalenessThreshold", "metricsStalenessThreshold", cfg.MetricsStalenessThreshold, DefaultMetricsStalenessThreshold); err != nil {
		return nil, err
	}
	if cfg.SlotsPerEndpoint < 0 {
		return nil, configError("SlotsPerEndpoint", "", cfg.SlotsPerEndpoint, "negative; 0 declares none")
	}
	if cfg.PriorityScheduling && cfg.SlotsPerEndpoint == 0 {
		return nil, errors.New("gate: SaturationConfig.PriorityScheduling needs SlotsPerEndpoint: the room it gives the higher bands counts the servers' slots")
	}
	if cfg.Replicas < 0 {
		return nil, configError("Replicas", "", cfg.Replicas, "negative; 0 means 1")
	}
	cfg.Replicas = max(cfg.Replicas, 1)
	if cfg.Replica < 0 || cfg.Replica >= cfg.Replicas {
		return nil, configError("Replica", "", cfg.Replica, "outside [0, Replicas)")
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	g := &SaturationGate{
		qThr:      cfg.QueueDepthThreshold,
		slots:     cfg.SlotsPerEndpoint,
		kvThr:     cfg.KVCacheUtilThreshold,
		stale:     cfg.MetricsStalenessThreshold,
		replicas:  cfg.Replicas,
		replica:   cfg.Replica,
		clock:     cfg.Clock,
		endpoints: map[string]*endpoint{},
	}
	if cfg.PriorityScheduling {
		g.bands = &bandsInFlight{}
	}
	g.limit.Store(math.MinInt64)
	g.detector.Store(math.Float64bits(1))
	g.usage.Store(full)
	return g, nil
}

// TryAcquire reports whether the start budget allows one more start, and
// takes it if so. It reads two atomics and writes one; with
// PriorityScheduling it also counts the start in its band, under a lock
// of its own.
func (g *SaturationGate) TryAcquire(priority int) bool {
	if g.started.Load()-g.ended.Load() >= g.limit.Load() {
		if g.bands == nil || !g.bands.jump(priority, g.priorityRoom()) {
			return false
		}
	} else if g.bands != nil {
		g.bands.add(priority, 1)
	}
	g.started.Add(1)
	return true
}

// Lag returns MetricsStalenessThreshold, for [github.com/sluicegate/sluice/flowcontrol.Eviction.Grace]
// ([LagGate]): the gate reads no metrics older than that, so a
// slot a model server freed is in its view by then.
func (g *SaturationGate) Lag() time.Duration { return g.stale }

// Release hears that a request ended, which the next metrics show. With
// PriorityScheduling it counts the end, and the band's count drops;
// otherwise it changes nothing. A start that never ran comes back
// through Returned.
func (g *SaturationGate) Release(priority int) {
	if g.bands != nil && g.bands.add(priority, -1) < 0 {
		g.ended.Add(1)
	}
}

// Took does nothing: a start costs one place in a queue, whatever the
// request's cost.
func (g *SaturationGate) Took(Slot) {}

// Returned hands back the start of a request that never ran. For one that
// ran it does nothing, since the next metrics show what it left behind,
// unless PriorityScheduling is on: it then counts the end, which gives
// the budget a start until the next refresh.
func (g *SaturationGate) Returned(u Usage) {
	if u.Unused {
		g.started.Add(-1)
	}
	if g.bands != nil && g.bands.add(u.Priority, -1) < 0 && !u.Unused {
		g.ended.Add(1)
	}
}

// ServersPreempt reports whether PriorityScheduling is on: see
// [PreemptingGate].
func (g *SaturationGate) ServersPreempt() bool { return g.bands != nil }

// NoEndpoints reports whether the gate knows no endpoint at all.
func (g *SaturationGate) NoEndpoints() bool { return g.known.Load() == 0 }

// Bind records the controller that Update and Remove nudge. It refuses a
// second controller.
func (g *SaturationGate) Bind(c Controller) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fc != nil && g.fc != c {
		return errors.New("gate: SaturationGate already serves another controller")
	}
	g.fc = c
	return nil
}

func (g *SaturationGate) unbind(c Controller) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fc == c {
		g.fc = nil
	}
}

// Update records an endpoint's latest metrics, adding the endpoint if it is
// new, and nudges the controller. Metrics with a ReadAt no later than the
// one the gate has for that endpoint are ignored (a reading counts once);
// metrics with a zero ReadAt are a new reading, taken now; metrics already older than
// MetricsStalenessThreshold make the endpoint stale at once. An invalid
// reading (see [Metrics]) leaves the endpoint saturated until a valid one
// arrives; one whose ReadAt is in the future is taken as read now (and
// ignored if the gate has a reading of that instant already), so that the
// next valid reading still counts. Any goroutine
// may call Update, but not a Gate method: it takes the controller's lock
// to nudge it.
func (g *SaturationGate) Update(name string, m Metrics) {
	now := g.clock.Now()
	stamped := m.ReadAt.IsZero()
	if stamped {
		m.ReadAt = now
	}
	valid := m.valid(now)
	if m.ReadAt.After(now) {
		m.ReadAt = now // as if read now, when it might first have been
	}
	g.mu.Lock()
	e := g.endpoints[name]
	switch {
	case e == nil:
		e = &endpoint{name: name}
		g.endpoints[name] = e
		i, _ := slices.BinarySearchFunc(g.order, name, byName)
		g.order = slices.Insert(g.order, i, e)
		g.known.Store(int32(len(g.endpoints)))
	case !stamped && !m.ReadAt.After(e.m.ReadAt):
		g.mu.Unlock() // the same reading again, or an older one
		return
	}
	e.m, e.bad = m, !valid
	e.gen++
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.recent, e.share = false, 0
	if age := now.Sub(m.ReadAt); age < g.stale {
		e.recent = true
		if valid {
			e.share = share(g.room(m), g.replicas, g.replica, name, m.ReadAt)
		}
		e.base, e.ended = g.started.Load(), g.ended.Load()
		gen := e.gen
		e.timer = g.clock.AfterFunc(g.stale-age, func() { g.expire(name, e, gen) })
	}
	g.recompute()
	fc := g.fc
	g.mu.Unlock()
	if fc != nil {
		fc.Nudge()
	}
}

// Remove forgets an endpoint (it left the pool) and nudges the controller,
// which learns so whether the pool is now empty.
func (g *SaturationGate) Remove(name string) {
	g.mu.Lock()
	e := g.endpoints[name]
	if e == nil {
		g.mu.Unlock()
		return
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	delete(g.endpoints, name)
	if i, found := slices.BinarySearchFunc(g.order, name, byName); found {
		g.order = slices.Delete(g.order, i, i+1)
	}
	g.known.Store(int32(len(g.endpoints)))
	g.recompute()
	fc := g.fc
	g.mu.Unlock()
	if fc != nil {
		fc.Nudge()
	}
}

// fresh reports whether e's metrics are fresh and valid.
func (e *endpoint) fresh() bool { return e.recent && !e.bad }

// expire marks e stale, unless it was refreshed or removed since the
// refresh gen armed the timer.
func (g *SaturationGate) expire(name string, e *endpoint, gen uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.endpoints[name] != e || e.gen != gen {
		return
	}
	e.recent, e.share, e.timer = false, 0, nil
	g.recompute()
}

// room is the number of requests an endpoint's queue may still take before
// it reaches the queue threshold; 0 over the KV-cache threshold.
func (g *SaturationGate) room(m Metrics) int {
	if m.KVCache >= g.kvThr || m.Waiting >= g.qThr {
		return 0
	}
	return g.qThr - max(m.Waiting, 0)
}

// recompute publishes the start limit and the saturation from the
// endpoints. Called with mu held.
func (g *SaturationGate) recompute() {
	var rooms int64
	base, recent := int64(math.MaxInt64), false
	ended := int64(0)
	score, used := 0.0, 0.0
	fresh := int64(0)
	for _, e := range g.order {
		if e.recent {
			rooms = addSat(rooms, e.share)
			base, recent = min(base, e.base), true
			ended = max(ended, e.ended)
		}
		if e.fresh() {
			fresh++
		}
		score += g.score(e)
		used += g.used(e)
	}
	g.fresh.Store(fresh)
	n := float64(len(g.order))
	switch {
	case n == 0:
		g.detector.Store(math.Float64bits(1))
		g.usage.Store(full)
	case g.slots > 0:
		g.detector.Store(math.Float64bits(score / n))
		g.usage.Store(&poolUsage{used: used, capacity: n * float64(g.slots), base: base})
	default:
		g.detector.Store(math.Float64bits(score / n))
		g.usage.Store(&poolUsage{used: used / n, capacity: 1, base: math.MaxInt64})
	}
	if !recent {
		g.limit.Store(math.MinInt64)
		return
	}
	g.limit.Store(addSat(base, rooms) - ended)
}

// byName orders endpoints by name, for a binary search of g.order.
func byName(e *endpoint, name string) int { return strings.Compare(e.name, name) }

// addSat returns a+b for a, b ≥ 0, or math.MaxInt64 if that overflows.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
