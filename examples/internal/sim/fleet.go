package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Fleet makes a run's replicas (Config.Replicas) share one view of the
// fleet, as routers sharing a store do: each replica's gate is its own
// [fleet.View]'s, every view publishes to and reads from one
// [fleet.Memory] whose writes become visible Delay after they are made,
// and each replica runs a round every Period, replica i first at
// i × Period / Replicas, on the virtual clock. Everything runs on the
// simulation's one goroutine, so a seed gives the same bytes.
//
// Use it in three steps: [Fleet.Configure] on the Config, [New], then
// [Fleet.Start] on the Sim before [Sim.Run].
type Fleet struct {
	// Budget is the fleet's in-flight budget (fleet.Config.Budget).
	Budget int64
	// Capacities are the bands' fleet-wide request capacities
	// (fleet.Config.Capacities); after each round each replica's band
	// gets its part ([fleet.View.Capacity]) through ProvisionBand.
	Capacities map[int]int64
	// Period is each replica's round; Delay how long a publish takes to
	// be seen by reads (the store's latency).
	Period, Delay time.Duration
	// Overdraft is each view's fleet.Config.Overdraft: how many requests
	// a replica may start beyond its share for a band while a lower band
	// holds one of its slots. 0 means DefaultOverdraft, the setting
	// examples/fleet measured best; a negative value means none (the
	// library's default).
	Overdraft int64
	// PriorityScheduling is each view's fleet.Config.PriorityScheduling,
	// for servers that schedule by the band handed to them
	// (PoolConfig.Scheduler Priority).
	PriorityScheduling bool
	// Gate, if set, makes each replica's gate around its view's (inside
	// gate.All beside a saturation gate, say); nil: the view's alone.
	Gate func(p *Pool, replica int, view gate.Gate) gate.Gate

	views []*fleet.View
	store *fleet.Memory
	bands []flowcontrol.BandConfig
	err   error
}

// Configure sets cfg.ReplicaGate to make each replica's view and gate.
func (f *Fleet) Configure(cfg *Config) {
	f.bands = cfg.Controller.Bands
	replicas := max(cfg.Replicas, 1)
	cfg.ReplicaGate = func(p *Pool, replica int) gate.Gate {
		if f.store == nil {
			f.store = fleet.NewMemory(p.Clock().Now)
		}
		v, err := fleet.New(fleet.Config{
			Store:              &delayedStore{m: f.store, clock: p.Clock(), delay: f.Delay},
			ID:                 fmt.Sprint("replica-", replica),
			Replicas:           replicas,
			Budget:             f.Budget,
			Capacities:         f.Capacities,
			Period:             f.Period,
			Overdraft:          f.overdraft(),
			PriorityScheduling: f.PriorityScheduling,
			Clock:              p.Clock(),
		})
		if err != nil {
			f.err = err
			return gate.MaxInFlight(0) // New fails below, with f.err
		}
		f.views = append(f.views, v)
		if f.Gate != nil {
			return f.Gate(p, replica, v.Gate())
		}
		return v.Gate()
	}
}

// DefaultOverdraft is Fleet.Overdraft's default: with 2 and 4 replicas
// beside in-flight eviction, 1 leaves batch goodput further from one
// controller's and 3 the chat SLO (examples/fleet's README).
const DefaultOverdraft = 2

func (f *Fleet) overdraft() int64 {
	switch {
	case f.Overdraft == 0:
		return DefaultOverdraft
	case f.Overdraft < 0:
		return 0
	}
	return f.Overdraft
}

// Views returns the replicas' views, by replica.
func (f *Fleet) Views() []*fleet.View { return f.views }

// Start schedules every replica's rounds on s's clock, from time 0 until
// the arrivals have stopped and every request has ended, and applies the
// capacities' parts before the first. It returns the error of a View's
// configuration.
func (f *Fleet) Start(s *Sim) error {
	if f.err != nil {
		return f.err
	}
	if len(f.views) != len(s.fcs) {
		return fmt.Errorf("sim: Fleet has %d views for %d replicas; was Configure called?", len(f.views), len(s.fcs))
	}
	clock := s.Clock()
	for i, v := range f.views {
		fc := s.fcs[i]
		f.provision(fc, v)
		var round func()
		round = func() {
			_ = v.Sync(context.Background()) // the Memory store fails only on a bad state
			f.provision(fc, v)
			if clock.Elapsed() < s.cfg.Duration || !s.ended() {
				clock.After(f.Period, round)
			}
		}
		clock.At(time.Duration(int64(f.Period)*int64(i)/int64(len(f.views))), round)
	}
	return nil
}

// provision gives fc's bands their part of the fleet's capacities.
func (f *Fleet) provision(fc *flowcontrol.FlowController, v *fleet.View) {
	for _, bc := range f.bands {
		if _, ok := f.Capacities[bc.Priority]; !ok {
			continue
		}
		lim := v.Capacity(bc.Priority)
		if snap, err := fc.CapacitySnapshot(bc.Priority); err == nil && snap.RequestCapacity == lim {
			continue
		}
		bc.RequestCapacity = lim
		if err := fc.ProvisionBand(bc); err != nil {
			panic(fmt.Sprintf("sim: Fleet: %v", err)) // the band was provisioned with these settings
		}
	}
}

// ended reports whether every request so far has ended.
func (s *Sim) ended() bool {
	for i := len(s.records) - 1; i >= 0; i-- {
		if !s.records[i].Done {
			return false
		}
	}
	return true
}

// delayedStore is a Memory whose publishes are seen delay after they are
// made: a store's latency on the virtual clock.
type delayedStore struct {
	m     *fleet.Memory
	clock *Clock
	delay time.Duration
}

func (d *delayedStore) Publish(ctx context.Context, r fleet.Replica, lease time.Duration) error {
	if err := r.Check(); err != nil {
		return err
	}
	if d.delay <= 0 {
		return d.m.Publish(ctx, r, lease)
	}
	d.clock.After(d.delay, func() { _ = d.m.Publish(context.Background(), r, lease) })
	return nil
}

func (d *delayedStore) Read(ctx context.Context) ([]fleet.Replica, error) { return d.m.Read(ctx) }

// Unsynced is the gate of replicas that share nothing: each takes the
// static share of the budget, MaxInFlight(budget / replicas).
func Unsynced(budget int64, replicas int) func(*Pool, int) gate.Gate {
	return func(*Pool, int) gate.Gate { return gate.MaxInFlight(int(budget / int64(max(replicas, 1)))) }
}

// StaticCapacity is a band's capacity divided among replicas that share
// nothing.
func StaticCapacity(c int64, replicas int) capacity.Limit {
	return capacity.Bounded(c / int64(max(replicas, 1)))
}

// Queued returns the number of admitted requests waiting in the pool's
// own queue for a slot (without ServerQueues): what a fleet admitted
// beyond the pool.
func (p *Pool) Queued() int { return len(p.waiting) }

// Busy returns the number of slots running a request, whatever the gate.
func (p *Pool) Busy() int {
	n := 0
	for i := range p.servers {
		n += len(p.servers[i].running)
	}
	return n
}
