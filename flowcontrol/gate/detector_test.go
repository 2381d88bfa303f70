package gate_test

import (
	"math"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Each gate's saturation, as a ceiling reads it.
func TestGatesReportTheirSaturation(t *testing.T) {
	// MaxInFlight: in flight ÷ limit.
	mif := gate.MaxInFlight(4)
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: mif})

	calls := submitN(fc, "a", 0, 3)
	if s := mif.(gate.SaturationDetector).Saturation(); s != 0.75 {
		t.Errorf("MaxInFlight(4) with 3 in flight: saturation %v, want 0.75", s)
	}
	doneAll(calls)
	if s := gate.MaxInFlight(0).(gate.SaturationDetector).Saturation(); s != 1 {
		t.Errorf("MaxInFlight(0): saturation %v, want 1", s)
	}

	// Concurrency: requests, cost, or the larger, at most 1.
	for _, tc := range []struct {
		mode  string
		costs []int64
		want  float64
	}{
		{gate.ModeRequests, []int64{500, 500}, 0.5},
		{gate.ModeTokens, []int64{500, 500}, 0.25},
		{gate.ModeHybrid, []int64{500, 500}, 0.5},
		{gate.ModeHybrid, []int64{2000, 1500}, 0.875},
		{gate.ModeTokens, []int64{3900, math.MaxInt64}, 1},
	} {
		g := must(t, gate.Concurrency, gate.ConcurrencyConfig{Mode: tc.mode, MaxConcurrency: 4, MaxTokenConcurrency: 4000})
		for _, c := range tc.costs {
			if g.TryAcquire(0) {
				g.Took(gate.Slot{Cost: c})
			}
		}
		if s := g.Saturation(); s != tc.want {
			t.Errorf("Concurrency %s after costs %v: saturation %v, want %v", tc.mode, tc.costs, s, tc.want)
		}
	}

	// Adaptive: in flight ÷ learned limit, at most 1.
	ad, err := gate.Adaptive(gate.AdaptiveConfig{TargetFirstToken: time.Second, InitialLimit: 4, MinLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ad.TryAcquire(0)
	ad.TryAcquire(0)
	if s := ad.Saturation(); s != 0.5 {
		t.Errorf("Adaptive limit 4 with 2 in flight: saturation %v, want 0.5", s)
	}
	ad.TryAcquire(0)
	ad.TryAcquire(0)
	ad.FirstToken(gate.Slot{}, 2*time.Second) // late: the limit falls to 3
	if s := ad.Saturation(); ad.Limit() != 3 || s != 1 {
		t.Errorf("Adaptive limit %d with 4 in flight: saturation %v, want limit 3, saturation 1", ad.Limit(), s)
	}

	// Endpoints: none. All: the largest of its gates that report one.
	if s := gate.Endpoints(1).Saturation(); s != 0 {
		t.Errorf("Endpoints: saturation %v, want 0", s)
	}
	conc := must(t, gate.Concurrency, gate.ConcurrencyConfig{MaxConcurrency: 10})
	conc.TryAcquire(0)
	conc.TryAcquire(0)
	all := gate.All(gate.Endpoints(1), conc, fixedGate{saturation: 0.1}, plainGate{}).(gate.SaturationDetector)
	if s := all.Saturation(); s != 0.2 {
		t.Errorf("All: saturation %v, want the concurrency gate's 0.2", s)
	}
	if s := gate.All(plainGate{}).(gate.SaturationDetector).Saturation(); s != 0 {
		t.Errorf("All of a gate with no saturation: %v, want 0", s)
	}
	if s := gate.All(fixedGate{saturation: math.NaN()}).(gate.SaturationDetector).Saturation(); s != 1 {
		t.Errorf("All of a gate reporting NaN: %v, want 1 (fail closed)", s)
	}
}

// fixedGate admits everything and reports a fixed saturation.
type fixedGate struct{ saturation float64 }

func (fixedGate) TryAcquire(int) bool   { return true }
func (fixedGate) Release(int)           {}
func (g fixedGate) Saturation() float64 { return g.saturation }

// plainGate admits everything and reports nothing.
type plainGate struct{}

func (plainGate) TryAcquire(int) bool { return true }
func (plainGate) Release(int)         {}
