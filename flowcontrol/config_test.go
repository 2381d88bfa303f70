package flowcontrol_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// TestNewRejectsBadConfiguration: every bad configuration fails with an
// error that names the field and the value.
func TestNewRejectsBadConfiguration(t *testing.T) {
	band0 := flowcontrol.BandConfig{Priority: 0}
	cases := []struct {
		name string
		cfg  flowcontrol.Config
		want []string // substrings of the error
		is   error    // a sentinel the error wraps, if any
	}{
		{"no-bands", flowcontrol.Config{}, []string{"Bands", "no bands"}, nil},
		{"duplicate-priorities", flowcontrol.Config{Bands: []flowcontrol.BandConfig{band0, {Priority: 3}, {Priority: 3}}},
			[]string{"Bands[2].Priority 3", "duplicates Bands[1].Priority"}, nil},
		{"negative-cost-capacity", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, CostCapacity: capacity.Bounded(-1)}}},
			[]string{"Bands[0].CostCapacity -1"}, nil},
		{"negative-flow-request-capacity", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, FlowRequestCapacity: capacity.Bounded(-2)}}},
			[]string{"Bands[0].FlowRequestCapacity -2"}, nil},
		{"negative-global-cost-capacity", flowcontrol.Config{Bands: []flowcontrol.BandConfig{band0}, CostCapacity: capacity.Bounded(-3)},
			[]string{"CostCapacity -3"}, nil},
		{"edf-on-fifo-queue", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, Policy: ordering.EDF(), Queue: ordering.QueueFIFO}}},
			[]string{"Bands[0].Queue", `"fifo"`, "edf-ordering-policy"}, ordering.ErrIncompatibleQueue},
		{"slo-deadline-on-fifo-queue", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, Policy: ordering.SLODeadline(), Queue: ordering.QueueFIFO}}},
			[]string{"Bands[0].Queue", `"fifo"`, "slo-deadline-ordering-policy"}, ordering.ErrIncompatibleQueue},
		{"unknown-queue-kind", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, Queue: "list"}}},
			[]string{"Bands[0].Queue", `"list"`}, nil},
		{"negative-band-request-capacity", flowcontrol.Config{Bands: []flowcontrol.BandConfig{band0, {Priority: 1, RequestCapacity: capacity.Bounded(-1)}}},
			[]string{"Bands[1].RequestCapacity -1", "negative"}, nil},
		{"negative-band-byte-capacity", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, ByteCapacity: capacity.Bounded(-5)}}},
			[]string{"Bands[0].ByteCapacity -5", "negative"}, nil},
		{"negative-band-ttl", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: -time.Second}}},
			[]string{"Bands[0].TTL -1s", "negative"}, nil},
		{"negative-global-request-capacity", flowcontrol.Config{Bands: []flowcontrol.BandConfig{band0}, RequestCapacity: capacity.Bounded(-2)},
			[]string{"RequestCapacity -2", "negative"}, nil},
		{"negative-global-byte-capacity", flowcontrol.Config{Bands: []flowcontrol.BandConfig{band0}, ByteCapacity: capacity.Bounded(-3)},
			[]string{"ByteCapacity -3", "negative"}, nil},
		{"negative-default-ttl", flowcontrol.Config{Bands: []flowcontrol.BandConfig{band0}, DefaultTTL: -time.Millisecond},
			[]string{"DefaultTTL -1ms", "negative"}, nil},
		{"default-fallback-band-not-configured", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 1}}},
			[]string{"FallbackPriority 0", "no band"}, nil},
		{"fallback-band-not-configured", flowcontrol.Config{Bands: []flowcontrol.BandConfig{band0}, FallbackPriority: 7},
			[]string{"FallbackPriority 7", "no band"}, nil},
		{"fallback-with-never-promote", flowcontrol.Config{Bands: []flowcontrol.BandConfig{band0, {Priority: 7}}, FallbackPriority: 7, NeverPromote: true},
			[]string{"FallbackPriority 7", "NeverPromote"}, nil},
		{"guarantee-above-1", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, Guarantee: 1.5}}},
			[]string{"Bands[0].Guarantee 1.5", "fraction"}, nil},
		{"guarantee-negative", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, Guarantee: -0.1}}},
			[]string{"Bands[0].Guarantee -0.1", "fraction"}, nil},
		{"guarantee-nan", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, Guarantee: math.NaN()}}},
			[]string{"Bands[0].Guarantee NaN", "fraction"}, nil},
		{"guarantees-past-1", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, Guarantee: 0.6}, {Priority: -1, Guarantee: 0.5}}},
			[]string{"Bands[1].Guarantee 0.5", "past 1"}, nil},
		{"negative-max-per-decision", flowcontrol.Config{Bands: []flowcontrol.BandConfig{band0}, Eviction: &flowcontrol.Eviction{MaxPerDecision: -1}},
			[]string{"Eviction.MaxPerDecision -1", "negative"}, nil},
		{"negative-revocation-timeout", flowcontrol.Config{Bands: []flowcontrol.BandConfig{band0}, Eviction: &flowcontrol.Eviction{Timeout: -time.Second}},
			[]string{"Eviction.Timeout -1s", "negative"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc, err := flowcontrol.New(tc.cfg)
			if err == nil {
				fc.Close()
				t.Fatal("New accepted a bad configuration")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "flowcontrol: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %v", err, tc.is)
			}
		})
	}
}

func TestNeverPromoteNeedsNoBandZero(t *testing.T) {
	fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: -5}}, NeverPromote: true})
	if err != nil {
		t.Fatal(err)
	}
	fc.Close()
}

func TestMaxInFlightGateServesOneController(t *testing.T) {
	gt := gate.MaxInFlight(4)
	cfg := flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gt}
	fc := mustNew(t, cfg)
	_, err := flowcontrol.New(cfg)
	if err == nil || !strings.Contains(err.Error(), "Gate MaxInFlight(4)") {
		t.Fatalf("second controller on one MaxInFlight gate: %v", err)
	}
	_ = fc
	// A configuration that fails for another reason does not claim the gate.
	fresh := gate.MaxInFlight(2)
	if _, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 1}}, Gate: fresh}); err == nil {
		t.Fatal("want a fallback error")
	}
	mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: fresh})
}

// TestNegativeMaxInFlightIsAConfigError: a bad limit is an error from New
// naming the gate, never a panic.
func TestNegativeMaxInFlightIsAConfigError(t *testing.T) {
	g := gate.MaxInFlight(-1)
	_, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	if err == nil || !strings.Contains(err.Error(), "Gate MaxInFlight(-1): negative limit") {
		t.Fatalf("New with MaxInFlight(-1): %v", err)
	}
}

func TestProvisionBandRejectsBadConfiguration(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 5, Policy: ordering.EDF()}}})
	cases := []struct {
		name string
		bc   flowcontrol.BandConfig
		want []string
		is   error
	}{
		{"negative-request-capacity", flowcontrol.BandConfig{Priority: 3, RequestCapacity: capacity.Bounded(-1)}, []string{"BandConfig.RequestCapacity -1"}, nil},
		{"negative-byte-capacity", flowcontrol.BandConfig{Priority: 0, ByteCapacity: capacity.Bounded(-9)}, []string{"BandConfig.ByteCapacity -9"}, nil},
		{"negative-ttl", flowcontrol.BandConfig{Priority: 3, TTL: -time.Minute}, []string{"BandConfig.TTL -1m0s"}, nil},
		{"fairness-change", flowcontrol.BandConfig{Priority: 0, Fairness: flowcontrol.RoundRobin()}, []string{"BandConfig.Fairness round-robin-fairness-policy", "global-strict-fairness-policy"}, nil},
		{"incompatible-queue", flowcontrol.BandConfig{Priority: 3, Policy: ordering.SLODeadline(), Queue: ordering.QueueFIFO}, []string{"BandConfig.Queue", `"fifo"`}, ordering.ErrIncompatibleQueue},
		{"policy-change", flowcontrol.BandConfig{Priority: 5, Policy: ordering.FCFS()}, []string{"BandConfig.Policy fcfs-ordering-policy", "edf-ordering-policy"}, nil},
		{"queue-change", flowcontrol.BandConfig{Priority: 0, Queue: ordering.QueueHeap}, []string{"BandConfig.Queue heap", "fifo"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := fc.ProvisionBand(tc.bc)
			if err == nil {
				t.Fatal("ProvisionBand accepted a bad configuration")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %v", err, tc.is)
			}
		})
	}
	if _, err := fc.CapacitySnapshot(3); err == nil {
		t.Fatal("a rejected ProvisionBand created band 3")
	}
}

// A guarantee can be provisioned only on a controller that tracks them,
// and all of them together stay within 1.
func TestProvisionBandChecksGuarantees(t *testing.T) {
	plain := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}})
	if err := plain.ProvisionBand(flowcontrol.BandConfig{Priority: 3, Guarantee: 0.2}); err == nil || !strings.Contains(err.Error(), "BandConfig.Guarantee 0.2") {
		t.Errorf("a guarantee on a controller created with none: %v", err)
	}
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, Guarantee: 0.5}, {Priority: -1}}, Gate: gate.MaxInFlight(4)})
	if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: 3, Guarantee: 0.6}); err == nil || !strings.Contains(err.Error(), "past 1") {
		t.Errorf("guarantees past 1: %v", err)
	}
	if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: 0, Guarantee: 0.9}); err != nil {
		t.Errorf("changing band 0's own guarantee to 0.9: %v", err)
	}
	if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: 3, Guarantee: 0.2}); err == nil {
		t.Error("0.9 and 0.2 accepted")
	}
	if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: 3, Guarantee: 0.1}); err != nil {
		t.Errorf("0.9 and 0.1: %v", err)
	}
}

// TestProvisionBandKeepsTheGuarantee: re-provisioning a band to change its
// TTL leaves its guarantee, as it leaves its policy: band 0 still holds
// its 0.5, so 0.6 more elsewhere goes past 1.
func TestProvisionBandKeepsTheGuarantee(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, Guarantee: 0.5}, {Priority: -1}}, Gate: gate.MaxInFlight(4)})
	if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: 0, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: -1, Guarantee: 0.6}); err == nil || !strings.Contains(err.Error(), "past 1") {
		t.Fatalf("0.6 beside band 0's kept 0.5: %v", err)
	}
	if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: -1, Guarantee: 0.5}); err != nil {
		t.Fatalf("0.5 beside band 0's kept 0.5: %v", err)
	}
}

// Eviction and guarantees that could never act are refused at New, naming
// the field: both act only when the gate refuses, so with no gate they
// never would, and eviction needs a band below Eviction.Below with a band
// above it to revoke for — unless a guarantee's revocations are what it
// paces.
func TestReclaimThatCannotActIsRefused(t *testing.T) {
	two := []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}}
	for _, tc := range []struct {
		name string
		cfg  flowcontrol.Config
		want string
	}{
		{"eviction, no gate", flowcontrol.Config{Bands: two, Eviction: &flowcontrol.Eviction{}},
			"flowcontrol: Eviction set: no Gate: nothing is refused without one, so nothing is ever revoked"},
		{"guarantee, no gate", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1, Guarantee: 0.3}}},
			"flowcontrol: Bands[1].Guarantee 0.3: no Gate: nothing is refused without one, so a guarantee is never short"},
		{"eviction, one band", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: -1}}, FallbackPriority: -1, Gate: gate.MaxInFlight(4), Eviction: &flowcontrol.Eviction{}},
			"flowcontrol: Eviction set: one band (priority -1): eviction revokes a band's admissions only for a higher band"},
		{"eviction, no band below Below", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}}, Gate: gate.MaxInFlight(4), Eviction: &flowcontrol.Eviction{}},
			"flowcontrol: Eviction.Below 0: no band is below it (the lowest is 0), so no admission is ever revoked"},
		{"eviction, Below under every band", flowcontrol.Config{Bands: two, FallbackPriority: 10, Gate: gate.MaxInFlight(4), Eviction: &flowcontrol.Eviction{Below: -5}},
			"flowcontrol: Eviction.Below -5: no band is below it (the lowest is -1)"},
	} {
		fc, err := flowcontrol.New(tc.cfg)
		if err == nil {
			fc.Close()
			t.Errorf("%s: New accepted it", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: %v\nwant it to say %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		cfg  flowcontrol.Config
	}{
		{"eviction of a sheddable band", flowcontrol.Config{Bands: two, FallbackPriority: 10, Gate: gate.MaxInFlight(4), Eviction: &flowcontrol.Eviction{}}},
		{"eviction pacing a guarantee alone", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 10, Guarantee: 0.5}, {Priority: 0}},
			Gate: gate.MaxInFlight(4), Eviction: &flowcontrol.Eviction{Below: -100}}},
		{"a guarantee behind a gate", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 10, Guarantee: 0.5}, {Priority: 0}}, Gate: gate.MaxInFlight(4)}},
	} {
		fc, err := flowcontrol.New(tc.cfg)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		fc.Close()
	}
}
