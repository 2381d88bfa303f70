package gate_test

// The three usage-limit policies' ceilings, against the examples of
// llm-d-router's own tests and READMEs
// (pkg/epp/framework/plugins/flowcontrol/usagelimits/...).

import (
	"math"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol/gate"
	"pgregory.net/rapid"
)

// ceilings returns policy's ceiling for each band of priorities at
// saturation s, asked in rank order, as llm-d's ComputeLimit returns them.
func ceilings(p gate.UsageLimitPolicy, s float64, priorities []int) []float64 {
	out := make([]float64, len(priorities))
	for i := range priorities {
		out[i] = p.Ceiling(s, i, priorities)
	}
	return out
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-6 {
			return false
		}
	}
	return true
}

func TestStaticUsageLimitCeilings(t *testing.T) {
	for _, threshold := range []float64{math.SmallestNonzeroFloat64, 0.5, 0.8, 1} {
		p, err := gate.StaticUsageLimit(threshold)
		if err != nil {
			t.Fatal(err)
		}
		if p.TypeName() != "static-usage-limit-policy" {
			t.Fatalf("TypeName = %q", p.TypeName())
		}
		for _, s := range []float64{0, 0.5, 1} {
			got := ceilings(p, s, []int{100, 0, -50})
			if !near(got, []float64{threshold, threshold, threshold}) {
				t.Errorf("threshold %v at saturation %v: ceilings %v, want the threshold for every band", threshold, s, got)
			}
		}
	}
	for _, bad := range []float64{-0.1, 1.1, math.NaN(), math.Inf(1), 0} {
		if _, err := gate.StaticUsageLimit(bad); err == nil || !strings.Contains(err.Error(), "threshold") {
			t.Errorf("StaticUsageLimit(%v): error %v, want one naming threshold", bad, err)
		}
	}
	if _, err := gate.StaticUsageLimit(0); err == nil || !strings.Contains(err.Error(), "no request would ever start") {
		t.Errorf("StaticUsageLimit(0): error %v, want it to say no request would start", err)
	}
}

func TestPriorityHoldbackCeilings(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        gate.PriorityHoldbackConfig
		priorities []int
		want       []float64
	}{
		// llm-d's rank (stepwise-spread) examples.
		{"rank two", gate.PriorityHoldbackConfig{MinCeiling: 0.5}, []int{100, 10}, []float64{1, 0.5}},
		{"rank three", gate.PriorityHoldbackConfig{MinCeiling: 0.5}, []int{100, 50, 10}, []float64{1, 0.75, 0.5}},
		{"rank four", gate.PriorityHoldbackConfig{Domain: gate.DomainRank, MinCeiling: 0.5, MaxCeiling: 1}, []int{100, 75, 50, 10}, []float64{1, 0.8333333, 0.6666667, 0.5}},
		{"rank ignores values", gate.PriorityHoldbackConfig{MinCeiling: 0.5}, []int{1000, 2, 1}, []float64{1, 0.75, 0.5}},
		{"rank near the boundary", gate.PriorityHoldbackConfig{MinCeiling: 0.1}, []int{10, 5, 1}, []float64{1, 0.55, 0.1}},
		{"rank narrow", gate.PriorityHoldbackConfig{Shape: gate.ShapeLinear, MinCeiling: 0.8, MaxCeiling: 0.9}, []int{10, 5, 1}, []float64{0.9, 0.85, 0.8}},
		// llm-d's value (linear-proportional) examples.
		{"value two", gate.PriorityHoldbackConfig{Domain: gate.DomainValue, MinCeiling: 0.5}, []int{100, 10}, []float64{1, 0.5}},
		{"value even", gate.PriorityHoldbackConfig{Domain: gate.DomainValue, MinCeiling: 0.5}, []int{90, 50, 10}, []float64{1, 0.75, 0.5}},
		{"value skewed low", gate.PriorityHoldbackConfig{Domain: gate.DomainValue, MinCeiling: 0.5}, []int{100, 50, 10}, []float64{1, 0.7222222, 0.5}},
		{"value skewed", gate.PriorityHoldbackConfig{Domain: gate.DomainValue, MinCeiling: 0.5}, []int{100, 2, 1}, []float64{1, 0.5050505, 0.5}},
		{"value near the boundary", gate.PriorityHoldbackConfig{Domain: gate.DomainValue, MinCeiling: 0.1}, []int{10, 5, 1}, []float64{1, 0.1 + 4.0/9*0.9, 0.1}},
		{"value converges with rank", gate.PriorityHoldbackConfig{Domain: gate.DomainValue, MinCeiling: 0.5}, []int{100, 55, 10}, []float64{1, 0.75, 0.5}},
		// The godoc's example.
		{"doc rank", gate.PriorityHoldbackConfig{MinCeiling: 0.4}, []int{10, 0, -5}, []float64{1, 0.7, 0.4}},
		{"doc value", gate.PriorityHoldbackConfig{Domain: gate.DomainValue, MinCeiling: 0.4}, []int{10, 0, -5}, []float64{1, 0.6, 0.4}},
		// llm-d's single-priority bypass: a lone band gets MaxCeiling.
		{"lone rank", gate.PriorityHoldbackConfig{MinCeiling: 0.5, MaxCeiling: 0.9}, []int{10}, []float64{0.9}},
		{"lone value", gate.PriorityHoldbackConfig{Domain: gate.DomainValue, MinCeiling: 0.5}, []int{10}, []float64{1}},
		// Priorities as far apart as an int allows do not overflow.
		{"value extremes", gate.PriorityHoldbackConfig{Domain: gate.DomainValue, MinCeiling: 0.2}, []int{math.MaxInt, 0, math.MinInt}, []float64{1, 0.6, 0.2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := gate.PriorityHoldback(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []float64{0, 0.7, 1} { // the ceilings do not depend on it
				if got := ceilings(p, s, tc.priorities); !near(got, tc.want) {
					t.Errorf("at saturation %v: ceilings %v, want %v", s, got, tc.want)
				}
			}
		})
	}
}

func TestPriorityHoldbackRefusesBadParameters(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  gate.PriorityHoldbackConfig
		want string
	}{
		{"unsupported shape", gate.PriorityHoldbackConfig{Shape: "sigmoid", MinCeiling: 0.5}, "shape"},
		{"unsupported domain", gate.PriorityHoldbackConfig{Domain: "unknown", MinCeiling: 0.5}, "domain"},
		{"explicit domain", gate.PriorityHoldbackConfig{Domain: "explicit", MinCeiling: 0.5}, "domain"},
		{"zero value", gate.PriorityHoldbackConfig{}, "PriorityHoldbackConfig.MinCeiling (llm-d minCeiling) 0: unset or 0: the lowest band would be held back whatever the saturation"},
		{"minCeiling 0", gate.PriorityHoldbackConfig{MinCeiling: 0, MaxCeiling: 0.9}, "its requests would never start"},
		{"minCeiling negative", gate.PriorityHoldbackConfig{MinCeiling: -0.1}, "minCeiling"},
		{"minCeiling 1", gate.PriorityHoldbackConfig{MinCeiling: 1}, "minCeiling"},
		{"minCeiling NaN", gate.PriorityHoldbackConfig{MinCeiling: math.NaN()}, "minCeiling"},
		{"maxCeiling above 1", gate.PriorityHoldbackConfig{MinCeiling: 0.5, MaxCeiling: 1.1}, "maxCeiling"},
		{"maxCeiling negative", gate.PriorityHoldbackConfig{MinCeiling: 0.1, MaxCeiling: -0.5}, "maxCeiling"},
		{"maxCeiling NaN", gate.PriorityHoldbackConfig{MinCeiling: 0.5, MaxCeiling: math.NaN()}, "maxCeiling"},
		{"min equals max", gate.PriorityHoldbackConfig{MinCeiling: 0.5, MaxCeiling: 0.5}, "not below MaxCeiling"},
		{"min above max", gate.PriorityHoldbackConfig{MinCeiling: 0.8, MaxCeiling: 0.5}, "not below MaxCeiling"},
	} {
		if _, err := gate.PriorityHoldback(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestSoftReflectiveCeilings(t *testing.T) {
	three := []int{100, 0, -50}
	for _, tc := range []struct {
		name       string
		s          float64
		priorities []int
		want       []float64
	}{
		{"lone band", 0.99, []int{100}, []float64{1}},
		{"lone band full", 1, []int{100}, []float64{1}},
		// Reflective ceilings 1, 0.85, 0.70: all open.
		{"below every ceiling", 0.3, three, []float64{1, 1, 1}},
		{"full", 1, three, []float64{1, 0, 0}},
		// N = 4, s = 0.7: ceilings 1, 0.767, 0.533, 0.3; band 1 open.
		// Bands 2 and 3 alternate with period round(0.7/0.3) = 2; their
		// first tick is closed.
		{"reflective formula", 0.7, []int{100, 50, 0, -50}, []float64{1, 1, 0, 0}},
	} {
		got := ceilings(gate.SoftReflectiveCeiling(), tc.s, tc.priorities)
		if !near(got, tc.want) {
			t.Errorf("%s: ceilings %v, want %v", tc.name, got, tc.want)
		}
	}

	// llm-d's alternation examples: two bands, the low one past its
	// reflective ceiling 1 − s.
	for _, tc := range []struct {
		s    float64
		want string // the low band's ceiling at successive offers: 0 or 1
	}{
		{0.7, "010101"},    // period 2
		{0.75, "001001"},   // period 3
		{0.9, "000000001"}, // period 9
		{0.55, "111111"},   // period round(1.22) = 1: past its ceiling, and open
		{0.4, "111111"},    // below its ceiling 0.6
	} {
		p := gate.SoftReflectiveCeiling()
		var got strings.Builder
		for range tc.want {
			if p.Ceiling(tc.s, 0, []int{100, -50}) != 1 {
				t.Fatalf("s=%v: the highest band is held back", tc.s)
			}
			got.WriteByte("01"[int(p.Ceiling(tc.s, 1, []int{100, -50}))])
		}
		if got.String() != tc.want {
			t.Errorf("s=%v: the low band's ceilings %s, want %s", tc.s, got.String(), tc.want)
		}
	}

	// The counts grow with the bands, and the top band stays open.
	p := gate.SoftReflectiveCeiling()
	p.Ceiling(0.7, 1, []int{100, -50})
	if got := ceilings(p, 0.7, []int{100, 50, 0, -50}); got[0] != 1 {
		t.Errorf("after the bands grew: ceilings %v, want the highest band open", got)
	}
}

// Every policy's ceilings are fractions, and none grows as the priority
// falls (the soft-reflective policy's alternation aside: at a given
// saturation its reflective ceilings fall with the rank, and it opens a
// band past its ceiling only one offer in period). A holdback ceiling lies
// within [MinCeiling, MaxCeiling], with MaxCeiling at the top and
// MinCeiling at the bottom.
func TestUsageLimitCeilingsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "bands")
		set := rapid.SliceOfNDistinct(rapid.IntRange(-1000, 1000), n, n, rapid.ID[int]).Draw(t, "priorities")
		priorities := append([]int(nil), set...)
		for i := range priorities { // highest first
			for j := i + 1; j < len(priorities); j++ {
				if priorities[j] > priorities[i] {
					priorities[i], priorities[j] = priorities[j], priorities[i]
				}
			}
		}
		s := rapid.Float64Range(0, 1).Draw(t, "saturation")
		lo := rapid.Float64Range(math.SmallestNonzeroFloat64, 0.99).Draw(t, "minCeiling") // 0 is refused
		hi := rapid.Float64Range(lo+0.005, 1).Draw(t, "maxCeiling")
		domain := rapid.SampledFrom([]string{gate.DomainRank, gate.DomainValue}).Draw(t, "domain")

		holdback, err := gate.PriorityHoldback(gate.PriorityHoldbackConfig{Domain: domain, MinCeiling: lo, MaxCeiling: hi})
		if err != nil {
			t.Fatal(err)
		}
		static, err := gate.StaticUsageLimit(lo)
		if err != nil {
			t.Fatal(err)
		}
		const eps = 1e-12
		hb := ceilings(holdback, s, priorities)
		for i, c := range hb {
			if c < lo-eps || c > hi+eps {
				t.Fatalf("holdback ceiling[%d] = %v outside [%v, %v]", i, c, lo, hi)
			}
			if i > 0 && c > hb[i-1]+eps {
				t.Fatalf("holdback ceilings %v grow as the priority falls", hb)
			}
		}
		if hb[0] != hi {
			t.Fatalf("holdback's highest band: %v, want MaxCeiling %v", hb[0], hi)
		}
		if n > 1 && hb[n-1] != lo {
			t.Fatalf("holdback's lowest band: %v, want MinCeiling %v", hb[n-1], lo)
		}
		for _, c := range ceilings(static, s, priorities) {
			if c != lo {
				t.Fatalf("static ceiling %v, want the threshold %v", c, lo)
			}
		}
		soft := gate.SoftReflectiveCeiling()
		for i, c := range ceilings(soft, s, priorities) {
			if c != 0 && c != 1 {
				t.Fatalf("soft-reflective ceiling[%d] = %v, want 0 or 1", i, c)
			}
			if i == 0 && c != 1 {
				t.Fatalf("soft-reflective holds back the highest band")
			}
			// Open whenever s is below the band's reflective ceiling,
			// which falls with the rank.
			if n > 1 && s < 1-float64(i)*s/float64(n-1) && c != 1 {
				t.Fatalf("soft-reflective ceiling[%d] = 0 below its reflective ceiling at s=%v", i, s)
			}
			if i > 0 && s >= 1 && c != 0 {
				t.Fatalf("soft-reflective ceiling[%d] open at saturation 1", i)
			}
		}
	})
}
