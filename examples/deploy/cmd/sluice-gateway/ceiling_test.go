package main

import (
	"context"
	"testing"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// The gateway's gate keeps the file's band ceilings: with maxInFlight 10
// and a holdback that gives band 0 the ceiling 0.5, band 0 alone starts 5
// requests and band 10 fills the rest.
func TestBuildGateKeepsTheBandCeilings(t *testing.T) {
	ten := 10
	s := &settings{gate: config.Gate{
		MaxInFlight: &ten,
		UsageLimit:  &config.UsageLimit{Type: gate.PriorityHoldbackPolicyName, MinCeiling: 0.5, MaxCeiling: 1},
	}}
	gs, limit, err := buildGate(s, gate.Endpoints(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if limit == nil {
		t.Fatal("flow_control_gate_limit: none, want 10")
	}
	if got := limit(); got != 10 {
		t.Fatalf("flow_control_gate_limit: %v, want 10", got)
	}
	fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}}, Gate: gs.Gate})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	var admissions []*flowcontrol.Admission
	send := func(priority, n int) {
		for range n {
			fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "x", Priority: priority}},
				func(a *flowcontrol.Admission, err error) {
					if err == nil {
						admissions = append(admissions, a)
					}
				})
		}
	}
	send(0, 8)
	if got := fc.InFlight(); got != 5 {
		t.Errorf("band 0 alone: %d in flight, want 5", got)
	}
	send(10, 8)
	if got := fc.InFlight(); got != 10 {
		t.Errorf("with band 10: %d in flight, want 10", got)
	}
	for _, a := range admissions {
		a.Done()
	}
}
