package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/deploy/redisfleet"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
)

// Defaults of the fleet flags.
const (
	// DefaultFleetPeriod is -fleet-period: how often a replica publishes
	// its state to Redis and reads the fleet's. One round trip each per
	// period, whatever the traffic.
	DefaultFleetPeriod = 200 * time.Millisecond
	// fleetPasswordEnv is the environment variable a Redis password is
	// read from when -fleet-redis-password-file is not given.
	fleetPasswordEnv = "SLUICE_FLEET_REDIS_PASSWORD"
	// maxPasswordBytes bounds a password file.
	maxPasswordBytes = 4096
)

// fleetOptions are the -fleet-* flags; redis is empty when the gateway
// runs alone.
type fleetOptions struct {
	redis        string
	passwordFile string
	prefix       string
	id           string
	replicas     int
	period       time.Duration
	lease        time.Duration
	overdraft    int
}

// defaultReplicaID names a replica that -fleet-id does not: the host's
// name and the process id, unique on a host and, in a pod, across pods.
func defaultReplicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "sluice-gateway"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// check refuses flags that cannot run, naming the flag.
func (f fleetOptions) check() error {
	if f.redis == "" {
		return nil
	}
	if !strings.Contains(f.redis, ":") || strings.ContainsAny(f.redis, "/ ") {
		return fmt.Errorf("-fleet-redis %q: want host:port", f.redis)
	}
	if err := (fleet.Replica{ID: f.id, At: time.Unix(1, 0)}).Check(); err != nil {
		return fmt.Errorf("-fleet-id %q: want 1 to %d bytes of printable UTF-8", f.id, fleet.MaxIDLength)
	}
	if f.replicas < 1 || f.replicas > fleet.MaxReplicas {
		return fmt.Errorf("-fleet-replicas %d: want 1 to %d (the replicas the fleet runs, for the static share in fallback)", f.replicas, fleet.MaxReplicas)
	}
	if f.period < fleet.MinPeriod {
		return fmt.Errorf("-fleet-period %v: want at least %v", f.period, fleet.MinPeriod)
	}
	if f.lease != 0 && f.lease < f.period {
		return fmt.Errorf("-fleet-lease %v: want at least -fleet-period (%v)", f.lease, f.period)
	}
	if f.overdraft < 0 || f.overdraft > 1<<20 {
		return fmt.Errorf("-fleet-overdraft %d: want 0 to %d", f.overdraft, 1<<20)
	}
	if f.prefix == "" || len(f.prefix) > redisfleet.MaxPrefixLength || strings.ContainsAny(f.prefix, " \t\r\n") {
		return fmt.Errorf("-fleet-prefix %q: want 1 to %d bytes, no white space", f.prefix, redisfleet.MaxPrefixLength)
	}
	return nil
}

// over returns f, the flags, over file (gateway.fleet; nil for none): a
// flag named in given wins, else the file's value when it sets one, else
// the flag's default.
func (f fleetOptions) over(file *config.Fleet, given map[string]bool) fleetOptions {
	if file == nil {
		return f
	}
	str := func(flag string, dst *string, v string) {
		if !given[flag] && v != "" {
			*dst = v
		}
	}
	str("fleet-redis", &f.redis, file.Redis)
	str("fleet-redis-password-file", &f.passwordFile, file.PasswordFile)
	str("fleet-prefix", &f.prefix, file.Prefix)
	str("fleet-id", &f.id, file.ID)
	if !given["fleet-replicas"] && file.Replicas != 0 {
		f.replicas = file.Replicas
	}
	if !given["fleet-period"] && file.Period != 0 {
		f.period = file.Period
	}
	if !given["fleet-lease"] && file.Lease != 0 {
		f.lease = file.Lease
	}
	if !given["fleet-overdraft"] && file.Overdraft != 0 {
		f.overdraft = file.Overdraft
	}
	return f
}

// config returns f as the configuration file spells it, with the flags
// and defaults applied, for -check-config and reloads; nil when the
// gateway runs alone.
func (f fleetOptions) config() *config.Fleet {
	if f.redis == "" {
		return nil
	}
	lease := f.lease
	if lease == 0 {
		lease = fleet.DefaultLeasePeriods * f.period // what fleet.New makes of 0
	}
	return &config.Fleet{Redis: f.redis, PasswordFile: f.passwordFile, Prefix: f.prefix, ID: f.id,
		Replicas: f.replicas, Period: f.period, Lease: lease, Overdraft: f.overdraft}
}

// password returns the Redis password: the file's first line, else the
// environment variable's value, else none.
func (f fleetOptions) password() (string, error) {
	if f.passwordFile == "" {
		return os.Getenv(fleetPasswordEnv), nil
	}
	file, err := os.Open(f.passwordFile)
	if err != nil {
		return "", fmt.Errorf("-fleet-redis-password-file: %w", err)
	}
	defer file.Close()
	buf := make([]byte, maxPasswordBytes+1)
	n, err := file.Read(buf)
	if err != nil && n == 0 {
		return "", fmt.Errorf("-fleet-redis-password-file %s: %w", f.passwordFile, err)
	}
	if n > maxPasswordBytes {
		return "", fmt.Errorf("-fleet-redis-password-file %s: longer than %d bytes", f.passwordFile, maxPasswordBytes)
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	return strings.TrimSuffix(line, "\r"), nil
}

// redisLog routes go-redis's own messages (a failed dial in its pool, and
// the like) to the gateway's log at DEBUG: what matters of them reaches
// the view's status, /readyz and the WARN line of a fallback.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.Log(ctx, slog.LevelDebug, "redis: "+fmt.Sprintf(format, v...))
}

// redisLogOnce sets go-redis's logger once per process: it is a global
// its connection pools read without a lock.
var redisLogOnce sync.Once

// fleetMember is a gateway's membership of a fleet: the view, the Redis
// store under it, and what it last applied to the controller's bands.
type fleetMember struct {
	view   *fleet.View
	store  *redisfleet.Store
	client *redis.Client
	id     string

	// afterRound, once set, runs after each of the view's rounds.
	afterRound atomic.Pointer[func(fleet.Status)]

	mu       sync.Mutex
	applied  map[int]int64 // band capacity last provisioned, by priority
	fallback fleet.Fallback
}

// newFleetMember builds the view for s and o: the fleet-wide budget is
// s's maxInFlight (required), and the fleet-wide capacity of each band is
// its maxRequests. It does not contact Redis.
func newFleetMember(o fleetOptions, s *settings) (*fleetMember, error) {
	if s.gate.MaxInFlight == nil {
		return nil, errors.New("-fleet-redis: the fleet shares an in-flight budget: give -max-inflight or gate.maxInFlight, the whole fleet's")
	}
	password, err := o.password()
	if err != nil {
		return nil, err
	}
	timeout := min(o.period, redisfleet.DefaultTimeout)
	client := redisfleet.NewClient(o.redis, password, timeout)
	store, err := redisfleet.New(client, redisfleet.Options{Prefix: o.prefix, Timeout: timeout})
	if err != nil {
		client.Close()
		return nil, err
	}
	caps := make(map[int]int64)
	for _, b := range s.flow.Bands {
		if n, ok := b.RequestCapacity.Value(); ok {
			caps[b.Priority] = n
		}
	}
	m := &fleetMember{store: store, client: client, id: o.id, applied: make(map[int]int64), fallback: fleet.FallbackNotRead}
	m.view, err = fleet.New(fleet.Config{
		Store:     store,
		ID:        o.id,
		Replicas:  o.replicas,
		Budget:    int64(*s.gate.MaxInFlight),
		Period:    o.period,
		Lease:     o.lease,
		Overdraft: int64(o.overdraft),
		// With the hand-off the servers preempt a lower band for a
		// higher one: a higher band may pass the share while a lower one
		// runs here, as gate.PriorityMaxInFlight lets it past its limit.
		PriorityScheduling: s.handoff.Enabled,
		Timeout:            timeout,
		Capacities:         caps,
		OnRound: func(st fleet.Status) {
			if f := m.afterRound.Load(); f != nil {
				(*f)(st)
			}
		},
	})
	if err != nil {
		client.Close()
		return nil, err
	}
	return m, nil
}

// apply gives each band with a fleet-wide capacity this replica's part of
// it, as the view computed it this round; a band whose part did not change
// is left alone. bands are the running configuration's.
func (m *fleetMember) apply(fc *flowcontrol.FlowController, bands []flowcontrol.BandConfig) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, b := range bands {
		if _, ok := b.RequestCapacity.Value(); !ok {
			continue
		}
		n, ok := m.view.Capacity(b.Priority).Value()
		if !ok {
			continue
		}
		if prev, done := m.applied[b.Priority]; done && prev == n {
			continue // a part of 0 is applied too: only what was provisioned is skipped
		}
		bc := b
		bc.RequestCapacity = capacity.Bounded(n)
		if err := fc.ProvisionBand(bc); err != nil {
			errs = append(errs, fmt.Errorf("band %d: %w", b.Priority, err))
			continue
		}
		m.applied[b.Priority] = n
	}
	return errors.Join(errs...)
}

// forget makes the next apply provision every band again: a reload has
// just set the file's capacities.
func (m *fleetMember) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.applied)
}

// changed reports whether st's fallback differs from the last round's.
func (m *fleetMember) changed(st fleet.Status) (was fleet.Fallback, changed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	was, m.fallback = m.fallback, st.Fallback
	return was, was != st.Fallback
}

// degraded says how the replica's view stands, for /readyz: "" when it
// is synced. A replica in fallback stays ready (see gateway.readiness).
func (m *fleetMember) degraded() string {
	st := m.view.Status()
	if st.Fallback == fleet.Synced {
		return ""
	}
	msg := fmt.Sprintf("fleet fallback (%s): static share %d of %d in flight", st.Fallback, st.Share, st.Budget)
	if st.Err != nil {
		msg += ": " + st.Err.Error()
	}
	return msg
}

// run runs the view's rounds until ctx ends.
func (m *fleetMember) run(ctx context.Context) { _ = m.view.Run(ctx) }

func (m *fleetMember) close() { m.client.Close() }

// fleetCollector exports the view's status: one series each (the share's
// replica label is this replica's ID, so the fleet's replicas each export
// theirs).
type fleetCollector struct{ m *fleetMember }

var (
	fleetAgeDesc = prometheus.NewDesc("sluice_gateway_fleet_view_age_seconds",
		"How old the fleet's state was at the view's last round: the time since its last successful read of the store.", nil, nil)
	fleetFallbackDesc = prometheus.NewDesc("sluice_gateway_fleet_fallback",
		"1 while this replica uses the static share (the store is stale or not yet read), with the reason; 0 for the other reasons.", []string{"reason"}, nil)
	fleetShareDesc = prometheus.NewDesc("sluice_gateway_fleet_share",
		"This replica's in-flight budget now: its share of the fleet's.", []string{"replica"}, nil)
	fleetBudgetDesc = prometheus.NewDesc("sluice_gateway_fleet_budget",
		"The fleet-wide in-flight budget.", nil, nil)
	fleetLiveDesc = prometheus.NewDesc("sluice_gateway_fleet_replicas_live",
		"Replicas in this replica's view of the fleet, itself included.", nil, nil)
	fleetDroppedDesc = prometheus.NewDesc("sluice_gateway_fleet_store_dropped_total",
		"Entries read from the store and dropped as unusable (too long, not a state, out of bounds).", nil, nil)
)

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{fleetAgeDesc, fleetFallbackDesc, fleetShareDesc, fleetBudgetDesc, fleetLiveDesc, fleetDroppedDesc} {
		ch <- d
	}
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.m.view.Status()
	ch <- prometheus.MustNewConstMetric(fleetAgeDesc, prometheus.GaugeValue, st.Age.Seconds())
	for _, f := range []fleet.Fallback{fleet.FallbackNotRead, fleet.FallbackStale} {
		v := 0.0
		if st.Fallback == f {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(fleetFallbackDesc, prometheus.GaugeValue, v, f.String())
	}
	ch <- prometheus.MustNewConstMetric(fleetShareDesc, prometheus.GaugeValue, float64(st.Share), c.m.id)
	ch <- prometheus.MustNewConstMetric(fleetBudgetDesc, prometheus.GaugeValue, float64(st.Budget))
	ch <- prometheus.MustNewConstMetric(fleetLiveDesc, prometheus.GaugeValue, float64(st.Live))
	n, _ := c.m.store.Dropped()
	ch <- prometheus.MustNewConstMetric(fleetDroppedDesc, prometheus.CounterValue, float64(n))
}
