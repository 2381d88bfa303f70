package config

import (
	"fmt"
	"strings"
	"testing"
)

// Build puts the gate inside band ceilings when a usage limit is set, and
// refuses one with no gate for the ceilings to read.
func TestBuildWrapsTheGateInCeilings(t *testing.T) {
	four := 4
	for _, tc := range []struct {
		gate Gate
		want string
	}{
		{Gate{MaxInFlight: &four, UsageLimit: &UsageLimit{Type: "static-usage-limit-policy", Threshold: 0.5}}, "Ceiling(MaxInFlight(4), static-usage-limit-policy)"},
		{Gate{MaxInFlight: &four, Concurrency: &Concurrency{Mode: "requests", MaxConcurrency: 8, MaxTokenConcurrency: 8},
			UsageLimit: &UsageLimit{Type: "soft-reflective-ceiling-policy"}}, "Ceiling(*gate.allGate, soft-reflective-ceiling-policy)"},
		{Gate{MaxInFlight: &four}, "MaxInFlight(4)"},
	} {
		gs, err := tc.gate.Build(BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(gs.Gate); got != tc.want {
			t.Errorf("Build(%s): gate %s, want %s", tc.gate, got, tc.want)
		}
	}
	_, err := Gate{UsageLimit: &UsageLimit{Type: "soft-reflective-ceiling-policy"}}.Build(BuildOptions{})
	if err == nil || !strings.Contains(err.Error(), "no gate") {
		t.Errorf("Build of a usage limit alone: %v, want an error", err)
	}
	_, err = Gate{MaxInFlight: &four, UsageLimit: &UsageLimit{Type: "priority-holdback-policy", MinCeiling: 0.7, MaxCeiling: 0.5}}.Build(BuildOptions{})
	if err == nil || !strings.Contains(err.Error(), "MinCeiling") {
		t.Errorf("Build of a bad holdback: %v, want an error naming MinCeiling", err)
	}
}
