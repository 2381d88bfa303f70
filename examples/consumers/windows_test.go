package main

import (
	"os"
	"testing"

	"github.com/sluicegate/sluice/examples/internal/long"
	"github.com/sluicegate/sluice/examples/internal/sim"
	"github.com/sluicegate/sluice/headroom/window"
)

// simulate runs variant v on sc for seed.
func simulate(t *testing.T, sc Scenario, v Variant, seed uint64) Run {
	t.Helper()
	r, err := Simulate(sc, v, seed)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The comparison Windows prints: AIMD with headroom is refused for capacity
// less often than AIMD without it, at no less than 95% of its goodput, on
// each of seeds 1–5, and the fixed window is refused most; at most half as
// often on seed 1 and over the five seeds together. By default seeds 1–2,
// each seed's comparison; the five seeds' totals with SLUICE_LONG.
//
// AIMD without headroom is refused 19–32 times on seeds 1–20: the real
// controller's Retry-After is short, so it probes into few refusals; the
// window that fills half the headroom is refused none of the time on
// seeds 1–5.
func TestHeadroomFewerRejections(t *testing.T) {
	last := uint64(2)
	if long.Enabled() {
		last = 5
	}
	var aimdTotal, hrTotal int
	for seed := uint64(1); seed <= last; seed++ {
		fixed, aimd, hr := simulate(t, WindowScenario, Windows[0], seed), simulate(t, WindowScenario, Windows[1], seed), simulate(t, WindowScenario, Windows[2], seed)
		t.Logf("seed %d: rejections fixed %d, AIMD %d, AIMD+headroom %d; goodput %.2f, %.2f, %.2f",
			seed, fixed.Saturated, aimd.Saturated, hr.Saturated, fixed.Goodput, aimd.Goodput, hr.Goodput)
		if hr.Saturated >= aimd.Saturated || hr.Goodput < 0.95*aimd.Goodput {
			t.Errorf("seed %d: rejections %d with headroom, %d without; goodput %.2f, %.2f",
				seed, hr.Saturated, aimd.Saturated, hr.Goodput, aimd.Goodput)
		}
		if fixed.Saturated <= aimd.Saturated {
			t.Errorf("seed %d: capacity rejections: fixed %d, AIMD %d: want the fixed window to probe worst", seed, fixed.Saturated, aimd.Saturated)
		}
		if seed == 1 && 2*hr.Saturated > aimd.Saturated {
			t.Errorf("seed 1: %d rejections with headroom, %d without: want at most half", hr.Saturated, aimd.Saturated)
		}
		aimdTotal += aimd.Saturated
		hrTotal += hr.Saturated
	}
	if last < 5 {
		return
	}
	if aimdTotal < 50 {
		t.Fatalf("AIMD without headroom was rejected %d times on seeds 1–5: the workload no longer exercises the signal", aimdTotal)
	}
	if 2*hrTotal > aimdTotal {
		t.Errorf("seeds 1–5: %d rejections with headroom, %d without: want at least 50%% fewer", hrTotal, aimdTotal)
	}
}

// alone is WindowScenario with the pool to the dispatcher.
func alone() Scenario {
	sc := WindowScenario
	sc.Alone = true
	return sc
}

// The band really refuses at capacity: alone on the band, a fixed window
// of exactly slots + queue capacity is never refused, one more is.
func TestBandRejectsExactlyAtCapacity(t *testing.T) {
	fixed := func(n int) Variant {
		return Variant{Window: window.Config{Initial: n, Min: n, Max: n}, NoHeadroom: true, NoRetryAfter: true}
	}
	full := slots + alone().BatchCapacity
	if got := simulate(t, alone(), fixed(full), 1).Saturated; got != 0 {
		t.Errorf("window %d = slots + queue: %d rejections, want 0", full, got)
	}
	if got := simulate(t, alone(), fixed(full+1), 1).Saturated; got == 0 {
		t.Errorf("window %d > slots + queue: no rejections", full+1)
	}
}

// Headroom is capacity minus queued at response time: alone on a band, the
// AIMD window with headroom fills the queue without overshooting it, so it
// is refused at most a few times (a response can count a request still on
// its way to the router), and keeps every slot busy.
func TestHeadroomAloneFillsTheBand(t *testing.T) {
	hr := simulate(t, alone(), Windows[2], 1)
	if hr.Saturated > 3 {
		t.Errorf("alone on the band with headroom: %d rejections", hr.Saturated)
	}
	serviceRate := float64(slots) / meanService.Seconds()
	if hr.Goodput < 0.95*serviceRate {
		t.Errorf("alone on the band with headroom: goodput %.2f, band serves %.2f", hr.Goodput, serviceRate)
	}
}

// The windows' table on seed 1: the figures of the dispatcher simulation
// that this comparison replaced.
func Example_windows() {
	c, err := Compare([]Scenario{WindowScenario}, Windows, sim.SeedRange(1, 1))
	if err != nil {
		panic(err)
	}
	c.PrintTables(os.Stdout)
	// Output:
	// a fixed window against AIMD (queue-delay target 2s), with and without headroom (one band)
	//              dispatcher     goodput req/s  band goodput req/s         saturated  expired  p95 latency s  interactive served %  interactive p95 s
	//         fixed window 64  21.6 [21.6–21.6]    40.1 [40.1–40.1]  3828 [3828–3828]  0 [0–0]  6.6 [6.6–6.6]      86.6 [86.6–86.6]   2.38 [2.38–2.38]
	//   AIMD without headroom  19.9 [19.9–19.9]    39.9 [39.9–39.9]        19 [19–19]  0 [0–0]  2.2 [2.2–2.2]      93.3 [93.3–93.3]   2.23 [2.23–2.23]
	//      AIMD with headroom  21.7 [21.7–21.7]    40.0 [40.0–40.0]           0 [0–0]  0 [0–0]  2.4 [2.4–2.4]      85.8 [85.8–85.8]   2.49 [2.49–2.49]
}
