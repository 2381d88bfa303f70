package fleet_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/fleet"
)

func valid() fleet.Replica {
	return fleet.Replica{
		ID: "router-0",
		At: time.Unix(1000, 0),
		Bands: []fleet.Band{
			{Priority: 10, Waiting: 3, InFlight: 5, Demand: 2.5},
			{Priority: -1, Waiting: 100, InFlight: 27, Demand: 40},
		},
	}
}

func TestCheckRefusesWhatAReaderCannotTrust(t *testing.T) {
	if err := valid().Check(); err != nil {
		t.Fatalf("a valid state: %v", err)
	}
	cases := []struct {
		field string
		edit  func(*fleet.Replica)
	}{
		{"ID", func(r *fleet.Replica) { r.ID = "" }},
		{"ID", func(r *fleet.Replica) { r.ID = strings.Repeat("x", fleet.MaxIDLength+1) }},
		{"ID", func(r *fleet.Replica) { r.ID = "a\nb" }},
		{"ID", func(r *fleet.Replica) { r.ID = "\xff" }},
		{"At", func(r *fleet.Replica) { r.At = time.Time{} }},
		{"Bands", func(r *fleet.Replica) { r.Bands = make([]fleet.Band, fleet.MaxBands+1) }},
		{"Bands[1].Priority", func(r *fleet.Replica) { r.Bands[1].Priority = 10 }},
		{"Bands[1].Priority", func(r *fleet.Replica) { r.Bands[1].Priority = 11 }},
		{"Bands[0].Waiting", func(r *fleet.Replica) { r.Bands[0].Waiting = -1 }},
		{"Bands[0].Waiting", func(r *fleet.Replica) { r.Bands[0].Waiting = fleet.MaxCount + 1 }},
		{"Bands[1].InFlight", func(r *fleet.Replica) { r.Bands[1].InFlight = math.MaxInt64 }},
		{"Bands[0].Demand", func(r *fleet.Replica) { r.Bands[0].Demand = math.NaN() }},
		{"Bands[0].Demand", func(r *fleet.Replica) { r.Bands[0].Demand = math.Inf(1) }},
		{"Bands[0].Demand", func(r *fleet.Replica) { r.Bands[0].Demand = -0.5 }},
	}
	for _, c := range cases {
		r := valid()
		r.Bands = append([]fleet.Band(nil), r.Bands...)
		c.edit(&r)
		err := r.Check()
		if !errors.Is(err, fleet.ErrInvalid) || !strings.Contains(err.Error(), c.field+":") {
			t.Errorf("%s: Check() = %v, want ErrInvalid naming %s", c.field, err, c.field)
		}
	}
}

func TestMemoryLeases(t *testing.T) {
	now := time.Unix(1000, 0)
	m := fleet.NewMemory(func() time.Time { return now })
	ctx := context.Background()
	a, b := valid(), valid()
	b.ID = "router-1"
	if err := m.Publish(ctx, b, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Publish(ctx, a, time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := m.Read(ctx)
	if err != nil || len(got) != 2 || got[0].ID != "router-0" || got[1].ID != "router-1" {
		t.Fatalf("Read = %v, %v; want both, sorted by ID", got, err)
	}
	got[0].Bands[0].Waiting = 999 // the store keeps its own copy
	now = now.Add(time.Second)
	got, _ = m.Read(ctx)
	if len(got) != 1 || got[0].ID != "router-1" || got[0].Bands[0].Waiting != 3 {
		t.Fatalf("after router-0's lease: Read = %+v, want router-1 alone, unchanged", got)
	}
	if err := m.Publish(ctx, a, 0); err == nil {
		t.Error("Publish with a zero lease: want an error")
	}
	bad := valid()
	bad.At = time.Time{}
	if err := m.Publish(ctx, bad, time.Second); !errors.Is(err, fleet.ErrInvalid) {
		t.Errorf("Publish of an invalid state = %v, want ErrInvalid", err)
	}
	m.Forget()
	if got, _ := m.Read(ctx); len(got) != 0 {
		t.Errorf("after Forget: Read = %v, want nothing", got)
	}
}
