package sim

import (
	"testing"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
)

// Config.Cost is each request's cost in the controller: with a cost
// capacity of 250 and requests of cost 100, at most two wait, and the
// queued cost is always a multiple of 100.
func TestCostReachesController(t *testing.T) {
	var most int64
	cfg := Config{
		Seed:     1,
		Duration: 10 * time.Second,
		Controller: flowcontrol.Config{
			Bands:          []flowcontrol.BandConfig{{Priority: 0, CostCapacity: capacity.Bounded(250)}},
			NoDisplacement: true,
		},
		Pool: PoolConfig{Servers: 1, Slots: 1, PerOutputToken: 10 * time.Millisecond},
		Tenants: []Tenant{{Name: "a", PromptTokens: Tokens{Mean: 100}, OutputTokens: Tokens{Mean: 20},
			Phases: []Phase{{Rate: 10}}}},
		Cost: func(r *Record) int64 { return int64(r.PromptTokens) },
		Submitted: func(s *Sim, _ *Record) {
			snap, err := s.Controller().CapacitySnapshot(0)
			if err != nil {
				t.Fatal(err)
			}
			if snap.QueuedCost%100 != 0 || snap.QueuedCost != 100*snap.QueuedRequests {
				t.Fatalf("queued cost %d for %d requests, want 100 each", snap.QueuedCost, snap.QueuedRequests)
			}
			most = max(most, snap.QueuedCost)
		},
	}
	recs, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(recs, nil)
	if most != 200 || s.CapacityRejections() == 0 {
		t.Errorf("most queued cost %d with %d rejections; want 200, and rejections at 2x overload", most, s.CapacityRejections())
	}
}
