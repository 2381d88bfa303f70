package config

import (
	"strings"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// admits counts how many slots g grants in a row, up to limit.
func admits(g gate.Gate, limit int) int {
	n := 0
	for n < limit && g.TryAcquire(0) {
		n++
	}
	return n
}

func TestGateBuild(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  string
		opts  BuildOptions
		admit int // slots granted in a row, of 100 asked; -1: no gate
	}{
		{"no gate", "controller: {}", BuildOptions{}, -1},
		{"max in flight", "gate: {maxInFlight: 3}", BuildOptions{}, 3},
		{"max in flight 0", "gate: {maxInFlight: 0}", BuildOptions{}, 0},
		{"concurrency, whole budget", "gate: {concurrency: {maxConcurrency: 4}}", BuildOptions{Endpoints: 5}, 4},
		{"concurrency per endpoint", "gate: {concurrency: {maxConcurrency: 4, perEndpoint: true}}", BuildOptions{Endpoints: 5}, 20},
		{"llm-d concurrency per endpoint", "plugins: [{type: concurrency-detector, parameters: {maxConcurrency: 2}}]\nflowControl: {saturationDetector: {pluginRef: concurrency-detector}}",
			BuildOptions{Endpoints: 3}, 6},
		{"tokens mode leaves requests unbounded", "gate: {concurrency: {concurrencyMode: tokens, maxConcurrency: 1}}", BuildOptions{}, 100},
		{"composed: the smallest wins", "gate: {maxInFlight: 7, concurrency: {maxConcurrency: 2}}", BuildOptions{}, 2},
		{"composed the other way", "gate: {maxInFlight: 2, concurrency: {maxConcurrency: 7}}", BuildOptions{}, 2},
		{"saturation without metrics admits nothing", "gate: {saturation: {}}", BuildOptions{}, 0},
		{"composed with saturation", "gate: {maxInFlight: 5, saturation: {}}", BuildOptions{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			gs, err := f.Gate.Build(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.admit < 0 {
				if gs.Gate != nil {
					t.Fatalf("Gate = %T, want nil", gs.Gate)
				}
				return
			}
			if got := admits(gs.Gate, 100); got != tc.admit {
				t.Errorf("the built gate admits %d in a row, want %d", got, tc.admit)
			}
			if (f.Gate.Saturation != nil) != (gs.Saturation != nil) || (f.Gate.Concurrency != nil) != (gs.Concurrency != nil) {
				t.Errorf("Gates %+v do not match the settings %+v", gs, f.Gate)
			}
		})
	}
}

func TestGateBuildIsFresh(t *testing.T) {
	f, err := Parse([]byte("gate: {maxInFlight: 1}"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := f.Gate.Build(BuildOptions{})
	b, _ := f.Gate.Build(BuildOptions{})
	if !a.Gate.TryAcquire(0) || !b.Gate.TryAcquire(0) {
		t.Fatal("a second Build shares the first one's slot")
	}
}

func TestGateBuildErrors(t *testing.T) {
	f, err := Parse([]byte("flowControl: {saturationDetector: {pluginRef: concurrency-detector}}"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Gate.Build(BuildOptions{}); err == nil || !strings.Contains(err.Error(), "per endpoint") {
		t.Errorf("Build with no endpoints: %v, want an error about per-endpoint budgets", err)
	}
	if _, _, err := f.Controller(BuildOptions{}); err == nil {
		t.Error("Controller with no backends and a per-endpoint budget succeeded")
	}
	huge := Gate{Concurrency: &Concurrency{Mode: gate.ModeHybrid, MaxConcurrency: 1 << 62, MaxTokenConcurrency: 1 << 62, PerEndpoint: true}}
	gs, err := huge.Build(BuildOptions{Endpoints: 8})
	if err != nil {
		t.Fatalf("a budget that overflows when multiplied: %v, want it capped", err)
	}
	if admits(gs.Gate, 10) != 10 {
		t.Error("a capped budget refused")
	}
}

// TestControllerRuns builds a controller from each good file and sees a
// request through it.
func TestControllerRuns(t *testing.T) {
	for _, name := range []string{"testdata/sluice.yaml", "testdata/llmd.yaml", "testdata/llmd-utilization.yaml"} {
		t.Run(name, func(t *testing.T) {
			f, err := Load(name)
			if err != nil {
				t.Fatal(err)
			}
			cfg, gs, err := f.Controller(BuildOptions{Endpoints: 2})
			if err != nil {
				t.Fatal(err)
			}
			c, err := flowcontrol.New(cfg)
			if err != nil {
				t.Fatalf("flowcontrol.New: %v", err)
			}
			defer c.Close()
			if gs.Saturation != nil {
				if !gs.Saturation.NoEndpoints() {
					t.Error("a new saturation gate knows endpoints")
				}
				if gs.Saturation.Saturation() < 1 {
					t.Errorf("a saturation gate with no metrics reads saturation %v, want ≥ 1", gs.Saturation.Saturation())
				}
			}
			// llm-d-router's form: a priority the file does not list gets
			// its template band, which ProvisionBand accepts.
			if bc, ok := f.DynamicBand(-7); ok {
				if err := c.ProvisionBand(bc); err != nil {
					t.Fatalf("ProvisionBand(DynamicBand(-7)): %v", err)
				}
				snap, err := c.CapacitySnapshot(-7)
				if err != nil || snap.RequestCapacity != bc.RequestCapacity {
					t.Errorf("band -7 after ProvisionBand: %v, %v; want request capacity %v", snap, err, bc.RequestCapacity)
				}
			} else if f.Form == FormLLMD {
				t.Error("DynamicBand reports no template in the llm-d form")
			}
			// The controller's bands are the file's, by priority.
			for _, bc := range f.Flow.Bands {
				snap, err := c.CapacitySnapshot(bc.Priority)
				if err != nil {
					t.Fatalf("band %d: %v", bc.Priority, err)
				}
				if snap.RequestCapacity != bc.RequestCapacity || snap.ByteCapacity != bc.ByteCapacity {
					t.Errorf("band %d: snapshot %v, want capacities %v/%v", bc.Priority, snap, bc.RequestCapacity, bc.ByteCapacity)
				}
			}
		})
	}
}
