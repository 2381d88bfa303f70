package fleet

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Config configures a [View]. Store, ID, Replicas, Budget and Period are
// required; the zero value of every other field is its default.
type Config struct {
	// Store is the medium the fleet shares.
	Store Store
	// ID names this replica in the fleet: unique, 1 to [MaxIDLength]
	// bytes of printable UTF-8 (a pod name, say).
	ID string
	// Replicas is the fleet's expected size R, at least 1: in fallback
	// each replica takes the static share ⌊Budget/R⌋, and a store that
	// holds the state of more than [MaxReplicas] replicas is an error.
	Replicas int
	// Budget is the fleet-wide in-flight budget C: the requests the whole
	// fleet may have in flight at once, what one controller's
	// gate.MaxInFlight(C) would allow. At least 0, at most [MaxCount].
	Budget int64
	// Period is how often [View.Run] publishes this replica's state and
	// reads the fleet's: one Store round trip (a Publish and a Read) per
	// period, never one per admission. At least 1 ms.
	Period time.Duration
	// Lease is how long the store keeps this replica's state after a
	// publish, and the others count it after it was taken (with MaxSkew),
	// so that a replica that stops publishing gives its share back within
	// Lease + MaxSkew + Period (see [View.Gate]). At least Period; 0 means 3 × Period.
	Lease time.Duration
	// Stale is the age of the last successful read past which the view
	// falls back to the static share: a store that errors, or answers too
	// slowly, moves the replica to ⌊Budget/R⌋ within Stale + Period. At
	// least Period; 0 means 2 × Period.
	Stale time.Duration
	// MaxSkew is the clock skew tolerated between replicas: an entry whose
	// At is more than MaxSkew ahead of this replica's clock, or older than
	// Lease + MaxSkew, is ignored (counted in [Status.Ignored]). At least
	// 0 and at most Lease; 0 means Period. A negative value is an error.
	MaxSkew time.Duration
	// Timeout bounds each Store call that [View.Run] makes, in real time;
	// 0 means Period.
	Timeout time.Duration
	// Overdraft, B, is how many requests of a band this replica may start
	// beyond its share while a band below it holds one of its slots and
	// the view is synced. Without it, a request that finds the share full
	// waits for this replica's own slots or, with flowcontrol's Eviction,
	// revokes one of its lower-band requests for itself alone, where one
	// controller would have given it the next slot freed anywhere in the
	// fleet. With it, the request starts at once; the next rounds count it
	// in its band's demand and take its slot from the lower bands' parts,
	// fleet-wide. It adds B to the over-admission bound (see [View.Gate]);
	// examples/fleet measures 1 to 3 with 2 and 4 replicas. A request
	// started on the overdraft waits for its slot outside the
	// controller's sight: with Eviction.ByDeadline, which sizes
	// revocations by the deadlines of the requests the controller holds
	// waiting, measure before using both. 0, the default, means none. At
	// least 0, at most [MaxCount].
	Overdraft int64
	// PriorityScheduling declares that the model servers serve the band
	// each request hands them and preempt a lower band for a higher one
	// (vLLM's --scheduling-policy priority, behind
	// flowhttp.PriorityHandoff): a band may then pass the share while a
	// lower band holds a slot here and the fleet holds fewer than Budget
	// requests of its own and higher bands. See "Model servers that
	// schedule by priority" in [View.Gate]. Off by default.
	PriorityScheduling bool
	// Capacities holds the fleet-wide request capacity of each band that
	// has one, by priority: how many requests the whole fleet may queue
	// in it, what one controller's BandConfig.RequestCapacity would say.
	// [View.Capacity] returns this replica's part, and [View.Reader]
	// reports the fleet's room against it. Each at least 0 and at most
	// [MaxCount]; at most [MaxBands] entries.
	Capacities map[int]int64
	// OnRound, if set, is called after each round with the view's new
	// status, on the goroutine that ran the round and with no lock of
	// the view held: where a router applies [View.Capacity] to its
	// controller's bands (flowcontrol's ProvisionBand), or exports
	// metrics.
	OnRound func(Status)
	// Clock times the periods, the ages and each state's At: the
	// controller's clock, so that a simulation runs the view on its
	// virtual time. Nil means the real clock.
	Clock gate.Clock
}

// Defaults of [Config].
const (
	// DefaultLeasePeriods is Config.Lease's default, in periods.
	DefaultLeasePeriods = 3
	// DefaultStalePeriods is Config.Stale's default, in periods.
	DefaultStalePeriods = 2
	// MinPeriod is the shortest Config.Period.
	MinPeriod = time.Millisecond
	// demandHalfLife is the half-life of the smoothed arrival rate, in
	// periods.
	demandHalfLife = 4
)

// withDefaults checks cfg and fills in its defaults; the error names the
// field.
func (cfg Config) withDefaults() (Config, error) {
	bad := func(field, format string, args ...any) (Config, error) {
		return cfg, fmt.Errorf("fleet: Config.%s: %s", field, fmt.Sprintf(format, args...))
	}
	if cfg.Store == nil {
		return bad("Store", "nil")
	}
	if err := (Replica{ID: cfg.ID, At: time.Unix(1, 0)}).Check(); err != nil {
		return bad("ID", "%q: want 1 to %d bytes of printable UTF-8", cfg.ID, MaxIDLength)
	}
	switch {
	case cfg.Replicas < 1 || cfg.Replicas > MaxReplicas:
		return bad("Replicas", "%d, want 1 to %d", cfg.Replicas, MaxReplicas)
	case cfg.Budget < 0 || cfg.Budget > MaxCount:
		return bad("Budget", "%d, want 0 to %d", cfg.Budget, MaxCount)
	case cfg.Overdraft < 0 || cfg.Overdraft > MaxCount:
		return bad("Overdraft", "%d, want 0 to %d", cfg.Overdraft, MaxCount)
	case cfg.Period < MinPeriod:
		return bad("Period", "%v, want at least %v", cfg.Period, MinPeriod)
	case cfg.Period > math.MaxInt64/16:
		return bad("Period", "%v is too long", cfg.Period)
	}
	if len(cfg.Capacities) > MaxBands {
		return bad("Capacities", "%d bands, want at most %d", len(cfg.Capacities), MaxBands)
	}
	for p, n := range cfg.Capacities {
		if n < 0 || n > MaxCount {
			return bad(fmt.Sprintf("Capacities[%d]", p), "%d, want 0 to %d", n, MaxCount)
		}
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLeasePeriods * cfg.Period
	}
	if cfg.Stale == 0 {
		cfg.Stale = DefaultStalePeriods * cfg.Period
	}
	if cfg.MaxSkew == 0 {
		cfg.MaxSkew = cfg.Period
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = cfg.Period
	}
	switch {
	case cfg.Lease < cfg.Period || cfg.Lease > math.MaxInt64/4:
		return bad("Lease", "%v, want Period (%v) or more, and less than %v", cfg.Lease, cfg.Period, time.Duration(math.MaxInt64/4))
	case cfg.Stale < cfg.Period || cfg.Stale > math.MaxInt64/4:
		return bad("Stale", "%v, want Period (%v) or more, and less than %v", cfg.Stale, cfg.Period, time.Duration(math.MaxInt64/4))
	case cfg.MaxSkew < 0 || cfg.MaxSkew > cfg.Lease:
		return bad("MaxSkew", "%v, want 0 to Lease (%v)", cfg.MaxSkew, cfg.Lease)
	case cfg.Timeout < 0:
		return bad("Timeout", "%v is negative", cfg.Timeout)
	}
	if cfg.Clock == nil {
		cfg.Clock = gate.RealClock{}
	}
	return cfg, nil
}

// View is one replica's view of the fleet: it publishes the replica's
// state to the [Store] and reads back every replica's, once a [Config]
// Period, and from what it read divides the fleet's budget among the
// replicas (see [View.Gate] for the rule and the promise). Create one with
// [New], use its [View.Gate] as (or inside) the controller's gate, and run
// [View.Run]; a router that stamps headroom reads it through
// [View.Reader]. A View serves one controller. Its methods are safe for
// concurrent use.
type View struct {
	cfg    Config
	static int64 // ⌊Budget/Replicas⌋, the fallback share

	gate viewGate

	// share is this replica's in-flight budget, read by the gate's
	// TryAcquire; set by each round.
	share atomic.Int64
	// below holds the per-band limits of the last synced round; nil in
	// fallback.
	below atomic.Pointer[bandLimits]

	mu sync.Mutex // serializes rounds; guards the fields below
	// known is every replica's latest accepted state, kept until its
	// lease (from its own At) runs out, even when the store forgets it.
	known      map[string]Replica
	lastRead   time.Time // when a round last read the store, on cfg.Clock
	successes  int       // rounds in a row that published and read
	lastErr    error
	ignored    int
	prevWait   map[int]int64  // waiting per band at the last round
	prevAdmits map[int]uint32 // admissions per band at the last round, mod 2³²
	demand     map[int]float64
	lastRound  time.Time
	alloc      allocation // of the last synced round
	fallback   Fallback
	status     atomic.Pointer[Status]
}

// New returns a View of cfg, in fallback until its first rounds (see
// [Status.Fallback]). The error names the Config field at fault.
func New(cfg Config) (*View, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	v := &View{
		cfg:        cfg,
		static:     cfg.Budget / int64(cfg.Replicas),
		known:      make(map[string]Replica),
		prevWait:   make(map[int]int64),
		prevAdmits: make(map[int]uint32),
		demand:     make(map[int]float64),
		fallback:   FallbackNotRead,
	}
	v.gate.v = v
	v.lastRound = cfg.Clock.Now() // arrivals are counted from here
	v.share.Store(v.static)
	v.status.Store(&Status{Fallback: FallbackNotRead, Share: v.static, Budget: cfg.Budget})
	return v, nil
}

// Status returns the view's status as of its last round, with Age as of
// then. It takes no lock.
func (v *View) Status() Status { return *v.status.Load() }

// Share returns this replica's in-flight budget now, as its gate reads it:
// one atomic load.
func (v *View) Share() int64 { return v.share.Load() }

// Run publishes and reads once a Period, starting at once, until ctx is
// done, and returns ctx's error. Each Store call is bounded by
// Config.Timeout. A round that fails is retried at the next period; the
// view falls back as Config.Stale says.
func (v *View) Run(ctx context.Context) error {
	tick := make(chan struct{}, 1)
	for {
		rctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
		_ = v.Sync(rctx) // the error is in Status
		cancel()
		t := v.cfg.Clock.AfterFunc(v.cfg.Period, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-tick:
		}
	}
}

// Sync runs one round now: it publishes this replica's state, reads the
// fleet's, and sets the share its gate enforces. It returns the Store's
// error, if any (the share then stays as it was until the view is older
// than Config.Stale, and is the static one from then). [View.Run] calls it
// once a Period; a simulation or a test calls it itself.
func (v *View) Sync(ctx context.Context) error {
	v.mu.Lock()
	now := v.cfg.Clock.Now()
	self := v.local(now)
	err := v.cfg.Store.Publish(ctx, self, v.cfg.Lease)
	var read []Replica
	if err == nil {
		read, err = v.cfg.Store.Read(ctx)
	}
	if err == nil && len(read) > MaxReplicas {
		err = fmt.Errorf("fleet: store returned %d replicas, more than %d", len(read), MaxReplicas)
	}
	grown := v.round(now, self, read, err)
	v.mu.Unlock()
	if v.cfg.OnRound != nil {
		v.cfg.OnRound(v.Status())
	}
	if grown {
		v.gate.nudge()
	}
	if err != nil {
		return fmt.Errorf("fleet: replica %s: %w", v.cfg.ID, err)
	}
	return nil
}

// local returns this replica's state at now: waiting per band from the
// bound controller, in flight per band from the gate, and demand as the
// smoothed arrival rate (admitted + the growth of the queue, per second).
// v.mu is held.
func (v *View) local(now time.Time) Replica {
	r := Replica{ID: v.cfg.ID, At: now}
	prios := v.gate.priorities()
	reader := v.gate.reader()
	dt := now.Sub(v.lastRound).Seconds()
	first := dt <= 0
	alpha := 1 - math.Exp2(-dt/(demandHalfLife*v.cfg.Period.Seconds()))
	var published, extraWaiting int64
	for i, p := range prios {
		var waiting int64
		if reader != nil {
			if s, err := reader.CapacitySnapshot(p); err == nil {
				waiting = clampCount(s.QueuedRequests)
			}
		}
		if i >= MaxBands {
			extraWaiting += waiting // counted in the lowest band published, below
			continue
		}
		inFlight, admits := v.gate.counts(p)
		published += inFlight
		d := v.demand[p]
		if !first {
			arrived := float64(admits-v.prevAdmits[p]) + float64(max(0, waiting-v.prevWait[p])) // admits wraps: the difference does not
			d += alpha * (max(0, arrived)/dt - d)
		}
		d = min(max(d, 0), MaxDemand)
		v.demand[p], v.prevWait[p], v.prevAdmits[p] = d, waiting, admits
		r.Bands = append(r.Bands, Band{Priority: p, Waiting: waiting, InFlight: clampCount(inFlight), Demand: d})
	}
	// What the state cannot carry band by band — the bands past
	// MaxBands, which the gate counts together — is published in the
	// lowest band: the others must count every slot this replica holds.
	if extra := v.gate.held() - published; extra > 0 || extraWaiting > 0 {
		if len(r.Bands) == 0 {
			r.Bands = append(r.Bands, Band{Priority: math.MinInt})
		}
		last := &r.Bands[len(r.Bands)-1]
		last.InFlight = clampCount(last.InFlight + max(extra, 0))
		last.Waiting = clampCount(last.Waiting + extraWaiting)
	}
	v.lastRound = now
	return r
}

// round takes in the result of one round at now: self as published, what
// was read, and the round's error. It sets the share and the status, and
// reports whether the share grew. v.mu is held.
func (v *View) round(now time.Time, self Replica, read []Replica, err error) (grown bool) {
	v.lastErr = err
	if err == nil {
		v.lastRead = now
		v.successes++
		v.ignored = 0
		for _, r := range read {
			if r.ID == v.cfg.ID || r.Check() != nil || !v.fresh(now, r.At) {
				if r.ID != v.cfg.ID {
					v.ignored++
				}
				continue
			}
			if old, ok := v.known[r.ID]; !ok || !r.At.Before(old.At) {
				v.known[r.ID] = r
			}
		}
	} else {
		v.successes = 0
	}
	for id, r := range v.known {
		if !v.fresh(now, r.At) {
			delete(v.known, id)
		}
	}
	age := time.Duration(0)
	if !v.lastRead.IsZero() {
		age = now.Sub(v.lastRead)
	}
	switch {
	case v.lastRead.IsZero():
		v.fallback = FallbackNotRead
	case age > v.cfg.Stale:
		v.fallback = FallbackStale
	case v.fallback == Synced:
		// A failed round keeps the last allocation while it is fresh.
	case v.successes >= 2:
		v.fallback = Synced
	default:
		// Back after an outage, or new: the others may not have
		// published since; one more round first.
		v.fallback = FallbackNotRead
	}
	st := &Status{At: now, Age: age, Fallback: v.fallback, Err: err, Ignored: v.ignored, Budget: v.cfg.Budget}
	share := v.static
	if v.fallback == Synced {
		if err == nil {
			fleet := make([]Replica, 0, len(v.known)+1)
			fleet = append(fleet, self)
			for _, r := range v.known {
				fleet = append(fleet, r)
			}
			v.alloc = allocate(v.cfg.Budget, v.cfg.Period, v.cfg.Capacities, fleet)
		}
		share = v.alloc.share
		st.Live, st.Bands = v.alloc.live, v.alloc.bands
		// Bands ≤ p may hold the share less what is granted to the
		// bands above p.
		l := &bandLimits{prios: make([]int, len(st.Bands)), below: make([]int64, len(st.Bands))}
		if v.cfg.PriorityScheduling {
			l.othersAbove = make([]int64, len(st.Bands))
		}
		var above float64
		var othersAbove int64
		for k, b := range st.Bands {
			l.prios[k], l.below[k] = b.Priority, max(0, share-int64(math.Round(above)))
			above += b.Share
			if l.othersAbove != nil {
				othersAbove += b.OtherInFlight
				l.othersAbove[k] = othersAbove
			}
		}
		grown = loosened(v.below.Swap(l), l)
	} else {
		grown = v.below.Swap(nil) != nil // no band limit any more
		if !v.lastRead.IsZero() {
			st.Live = len(v.known) + 1
		}
	}
	st.Share = share
	old := v.share.Swap(share)
	v.status.Store(st)
	return grown || share > old
}

// loosened reports whether the limits to lets some band start more than
// from did: a band's limit grew, or a band has a limit only in from.
func loosened(from, to *bandLimits) bool {
	if from == nil {
		return false // to limits more than no limit
	}
	for k, p := range from.prios {
		j, ok := find(to.prios, p)
		if !ok || to.below[j] > from.below[k] {
			return true
		}
	}
	return false
}

// fresh reports whether a state taken at at is within the skew bounds at
// now: no more than MaxSkew ahead, no older than Lease + MaxSkew.
func (v *View) fresh(now, at time.Time) bool {
	d := now.Sub(at)
	return d >= -v.cfg.MaxSkew && d <= v.cfg.Lease+v.cfg.MaxSkew
}

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a == (b >= 0) {
		return s
	}
	if b > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}

func clampCount(n int64) int64 { return min(max(n, 0), MaxCount) }
