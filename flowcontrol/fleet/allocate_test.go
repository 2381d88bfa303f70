package fleet

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// drawFleet draws 1 to 6 replicas over bands 10, 0 and -1, each with
// waiting and in-flight counts and an arrival rate.
func drawFleet(t *rapid.T) []Replica {
	n := rapid.IntRange(1, 6).Draw(t, "replicas")
	fleet := make([]Replica, n)
	for i := range fleet {
		fleet[i] = Replica{ID: fmt.Sprint("r", i), At: time.Unix(1, 0)}
		for _, p := range []int{10, 0, -1} {
			if rapid.Bool().Draw(t, fmt.Sprintf("r%d has %d", i, p)) {
				fleet[i].Bands = append(fleet[i].Bands, Band{
					Priority: p,
					Waiting:  rapid.Int64Range(0, 40).Draw(t, fmt.Sprintf("r%d waiting %d", i, p)),
					InFlight: rapid.Int64Range(0, 40).Draw(t, fmt.Sprintf("r%d in flight %d", i, p)),
					Demand:   float64(rapid.IntRange(0, 100).Draw(t, fmt.Sprintf("r%d rate %d", i, p))),
				})
			}
		}
	}
	return fleet
}

// from returns fleet with replica i first, as replica i allocates.
func from(fleet []Replica, i int) []Replica {
	out := append([]Replica{fleet[i]}, fleet[:i]...)
	return append(out, fleet[i+1:]...)
}

// Every replica reading the same states computes shares that sum to the
// budget, unless a replica holds more than its share (then the others'
// caps take it off): Σ_r S_r ≤ C always, = C when nothing is in flight.
func TestSharesSumToTheBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fleet := drawFleet(t)
		budget := rapid.Int64Range(0, 200).Draw(t, "budget")
		idle := rapid.Bool().Draw(t, "nothing in flight")
		if idle {
			for i := range fleet {
				for k := range fleet[i].Bands {
					fleet[i].Bands[k].InFlight = 0
				}
			}
		}
		var sum int64
		for i := range fleet {
			a := allocate(budget, 100*time.Millisecond, nil, from(fleet, i))
			if a.share < 0 || a.share > budget {
				t.Fatalf("replica %d: share %d outside [0, %d]", i, a.share, budget)
			}
			sum += a.share
		}
		if sum > budget || (idle && sum != budget) {
			t.Fatalf("Σ shares = %d, budget %d (nothing in flight: %v)", sum, budget, idle)
		}
	})
}

// Within a saturated band, each replica's part follows its demand: the
// band's parts are in proportion to d_r = waiting + in flight + λ·P, so a
// replica's share of one saturated band is within one slot (rounding) of
// C·d_r/D. This is the fleet-wide fairness bound's replica term: a tenant
// spread over replicas gets, fleet-wide, what the replicas' fairness
// policies give it of these parts.
func TestBandPartsFollowDemand(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "replicas")
		budget := rapid.Int64Range(1, 100).Draw(t, "budget")
		fleet := make([]Replica, n)
		var demand float64
		for i := range fleet {
			// Waiting alone exceeds the budget: the band is saturated.
			b := Band{Priority: 0, Waiting: rapid.Int64Range(budget, 3*budget).Draw(t, fmt.Sprint("waiting ", i)),
				Demand: float64(rapid.IntRange(0, 50).Draw(t, fmt.Sprint("rate ", i)))}
			fleet[i] = Replica{ID: fmt.Sprint("r", i), At: time.Unix(1, 0), Bands: []Band{b}}
			demand += float64(b.Waiting) + b.Demand*0.1
		}
		for i := range fleet {
			a := allocate(budget, 100*time.Millisecond, nil, from(fleet, i))
			b := fleet[i].Bands[0]
			want := float64(budget) * (float64(b.Waiting) + b.Demand*0.1) / demand
			if math.Abs(float64(a.share)-want) >= 1 {
				t.Fatalf("replica %d: share %d, want within one of %.3f", i, a.share, want)
			}
		}
	})
}

// Strict priority fleet-wide: a band is granted nothing while the bands
// above it claim the whole budget, wherever they wait.
func TestHigherBandsFirstFleetWide(t *testing.T) {
	fleet := []Replica{
		{ID: "batch-only", At: time.Unix(1, 0), Bands: []Band{{Priority: -1, Waiting: 50}}},
		{ID: "chat", At: time.Unix(1, 0), Bands: []Band{{Priority: 10, Waiting: 20}, {Priority: -1, Waiting: 50}}},
	}
	batch := allocate(16, time.Second, nil, fleet)
	chat := allocate(16, time.Second, nil, from(fleet, 1))
	if batch.share != 0 || chat.share != 16 {
		t.Errorf("shares: batch-only %d, chat %d; want 0 and 16", batch.share, chat.share)
	}
	if !slices.EqualFunc(chat.bands, []BandShare{{Priority: 10, Granted: 16}, {Priority: -1, Granted: 0}},
		func(a, b BandShare) bool { return a.Priority == b.Priority && a.Granted == b.Granted }) {
		t.Errorf("bands: %+v, want chat granted all 16", chat.bands)
	}
}
