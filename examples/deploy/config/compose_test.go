package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Issue 29, item 6: what a file asks for and could never do is an error
// at its key; what it asks for and is likely wrong is a warning there.

// In Sluice's form the bands the file lists are all the controller has, so
// eviction with no band to take victims from is an error when it is read,
// at sheddableBelow when the file writes it, else at eviction.
func TestEvictionWithoutVictimsIsAnError(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want wantErr
	}{
		{"controller:\n  eviction: true\n",
			wantErr{2, "controller.eviction", "in-flight eviction over one band (priority 0) never revokes"}},
		{"controller:\n  eviction: true\n  bands: [{priority: 10}, {priority: 0}]\n",
			wantErr{2, "controller.eviction", "takes victims only from bands below sheddableBelow 0, and no band is (bands: 10, 0), so nothing is ever revoked"}},
		{"controller:\n  eviction:\n    sheddableBelow: -5\n  bands: [{priority: 0}, {priority: -1}]\n",
			wantErr{3, "controller.eviction.sheddableBelow", "below sheddableBelow -5, and no band is (bands: 0, -1)"}},
	} {
		_, err := Parse([]byte(tc.yaml))
		checkErrs(t, tc.yaml, err, tc.want)
	}
	// A guarantee's revocations are paced by eviction whatever
	// sheddableBelow is; a band below it is what eviction needs.
	for _, ok := range []string{
		"controller:\n  eviction: {sheddableBelow: -100}\n  bands: [{priority: 10, guarantee: 0.5}, {priority: 0}]\n",
		"controller:\n  eviction: true\n  bands: [{priority: 10}, {priority: 0}, {priority: -1}]\n",
	} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("Parse:\n%s\n%v", ok, err)
		}
	}
}

// llm-d-router's form may have more bands than it lists — the binary
// provisions the template's band for each priority its classifier gives
// — so Check judges the bands the binary runs, and names the file's key.
func TestCheckEvictionOnTheBandsTheBinaryRuns(t *testing.T) {
	doc := "featureGates: [flowControl]\nflowControl:\n  enableEviction: true\n  defaultNegativePriorityBand: {maxRequests: 10}\n"
	f, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	run := Running{Flow: f.Flow, Gate: Gate{MaxInFlight: ptr(8)}}
	_, err = f.Check(run)
	var e *Error
	if !errors.As(err, &e) || e.Line != 3 || e.Path != "flowControl.enableEviction" || !strings.Contains(e.Msg, "over one band (priority 0) never revokes") {
		t.Fatalf("Check of band 0 alone: %v, want an error at line 3, flowControl.enableEviction", err)
	}
	// With the band a classifier's priority -1 brings, it can revoke.
	bc, _ := f.DynamicBand(-1)
	run.Flow.Bands = append(run.Flow.Bands, bc)
	if ws, err := f.Check(run); err != nil || len(ws) != 0 {
		t.Fatalf("Check with band -1 provisioned: %v, warnings %v; want neither", err, ws)
	}

	doc = "featureGates: [flowControl]\nflowControl:\n  enableEviction: true\n  eviction:\n    sheddableBelow: -1\n  priorityBands: [{priority: -1}]\n"
	if f, err = Parse([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	_, err = f.Check(Running{Flow: f.Flow, Gate: Gate{MaxInFlight: ptr(8)}})
	if !errors.As(err, &e) || e.Line != 5 || e.Path != "flowControl.eviction.sheddableBelow" || !strings.Contains(e.Msg, "below sheddableBelow -1, and no band is (bands: -1, 0)") {
		t.Fatalf("Check with sheddableBelow -1: %v, want an error at line 5, its key", err)
	}
}

// The combinations that are legal and likely wrong are warnings at the
// key that asks for them, and only where the gate the binary runs makes
// them so.
func TestCheckWarnings(t *testing.T) {
	const threeBands = "  bands: [{priority: 10}, {priority: 0}, {priority: -1}]\n"
	for _, tc := range []struct {
		name string
		yaml string
		gate func(Gate) Gate // the binary's change to the file's gate; nil for none
		want []wantErr       // the warnings, in order
	}{
		{"eviction behind the saturation gate alone", "controller:\n  eviction: true\n" + threeBands + "gate:\n  saturation: {}\n", nil,
			[]wantErr{{2, "controller.eviction", "in-flight eviction behind the saturation gate alone, which counts no slots, a revocation frees a place in a model server's waiting queue, not a running slot"}}},
		{"eviction behind the default gate", "controller:\n  eviction: true\n" + threeBands,
			func(Gate) Gate {
				return Gate{Saturation: &Saturation{QueueDepthThreshold: 5, KVCacheUtilThreshold: 0.8}}
			},
			[]wantErr{{2, "controller.eviction", "or run vLLM's priority scheduler with priority hand-off"}}},
		{"eviction behind the saturation gate with the hand-off on", "controller:\n  eviction: true\n" + threeBands + "gate:\n  saturation: {slotsPerEndpoint: 16}\ngateway:\n  priorityHandoff: true\n", nil,
			[]wantErr{{2, "controller.eviction", "in-flight eviction revokes nothing here: with priority hand-off the gate lets a higher band past"}}},
		{"eviction behind a slot gate with the hand-off on", "controller:\n  eviction: true\n" + threeBands + "gate:\n  maxInFlight: 64\ngateway:\n  priorityHandoff: true\n", nil,
			[]wantErr{{2, "controller.eviction", "the model servers preempt for it themselves"}}},
		{"eviction behind a token budget with the hand-off on", "controller:\n  eviction: true\n" + threeBands + "gate:\n  maxInFlight: 64\n  concurrency: {concurrencyMode: tokens, maxTokenConcurrency: 100000}\ngateway:\n  priorityHandoff: true\n", nil, nil},
		{"the hand-off behind the saturation gate without slots", "controller:\n" + threeBands + "gate:\n  saturation: {}\ngateway:\n  priorityHandoff: true\n", nil,
			[]wantErr{{4, "gate.saturation", "declare gate.saturation.slotsPerEndpoint"}}},
		{"the hand-off behind a slot gate", "controller:\n" + threeBands + "gate:\n  saturation: {}\n  maxInFlight: 64\ngateway:\n  priorityHandoff: true\n", nil, nil},
		{"eviction behind a slot gate", "controller:\n  eviction: true\n" + threeBands + "gate:\n  saturation: {}\n  maxInFlight: 64\n", nil, nil},
		{"eviction behind -max-inflight", "controller:\n  eviction: true\n" + threeBands + "gate:\n  saturation: {}\n",
			func(Gate) Gate { return Gate{MaxInFlight: ptr(64)} }, nil},
		{"a guarantee behind the saturation gate alone", "controller:\n  bands: [{priority: 10, guarantee: 0.5}, {priority: 0}]\ngate:\n  saturation: {slotsPerEndpoint: 16}\n", nil,
			[]wantErr{{2, "controller.bands[0].guarantee", "a band's guarantee is taken back by revocation, and behind the saturation gate alone"}}},
		{"llm-d's guarantee behind its default detector", "featureGates: [flowControl]\nflowControl:\n  priorityBands:\n  - priority: 10\n  - priority: 5\n    guarantee: 0.5\n", nil,
			[]wantErr{{6, "flowControl.priorityBands[1].guarantee", "a band's guarantee is taken back by revocation"}}},
		{"a static ceiling over three bands", "controller:\n" + threeBands + "gate:\n  maxInFlight: 8\n  usageLimit: {type: static-usage-limit-policy, threshold: 0.8}\n", nil,
			[]wantErr{{5, "gate.usageLimit", "static-usage-limit-policy gives the 3 bands (10, 0, -1) one ceiling, 0.8: it holds the highest back as much as the lowest"}}},
		{"a static ceiling over one band", "gate:\n  maxInFlight: 8\n  usageLimit: {type: static-usage-limit-policy, threshold: 0.8}\n", nil, nil},
		{"llm-d's static ceiling over two bands", "featureGates: [flowControl]\nplugins: [{type: static-usage-limit-policy, parameters: {threshold: 0.9}}, {type: concurrency-detector}]\n" +
			"flowControl:\n  saturationDetector: {pluginRef: concurrency-detector}\n  usageLimitPolicyPluginRef: static-usage-limit-policy\n  priorityBands: [{priority: 10}]\n", nil,
			[]wantErr{{5, "flowControl.usageLimitPolicyPluginRef", "one ceiling, 0.9"}}},
		{"ceilings on the KV cache", "controller:\n" + threeBands + "gate:\n  saturation: {}\n  usageLimit: {type: priority-holdback-policy, minCeiling: 0.5}\n", nil,
			[]wantErr{{5, "gate.usageLimit", "without gate.saturation.slotsPerEndpoint is the servers' KV-cache use"}}},
		{"ceilings on declared slots", "controller:\n" + threeBands + "gate:\n  saturation: {slotsPerEndpoint: 16}\n  usageLimit: {type: priority-holdback-policy, minCeiling: 0.5}\n", nil, nil},
	} {
		f, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Errorf("%s: Parse: %v", tc.name, err)
			continue
		}
		g := f.Gate
		if tc.gate != nil {
			g = tc.gate(g)
		}
		ws, err := f.Check(Running{Flow: f.Flow, Gate: g, PriorityHandoff: f.Gateway.PriorityHandoff})
		if err != nil {
			t.Errorf("%s: Check: %v", tc.name, err)
			continue
		}
		if len(ws) != len(tc.want) {
			t.Errorf("%s: warnings\n%swant %d", tc.name, lines(ws), len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if ws[i].Line != w.line || ws[i].Path != w.path || !strings.Contains(ws[i].Msg, w.msg) {
				t.Errorf("%s: warning %q, want line %d, %s: …%s…", tc.name, ws[i].String(), w.line, w.path, w.msg)
			}
		}
	}
}

// slotsPerEndpoint reaches the saturation gate: band ceilings read the
// share of the declared slots in use, and -check-config prints it.
func TestSlotsPerEndpointReachesTheGate(t *testing.T) {
	f, err := Parse([]byte("gate:\n  saturation: {slotsPerEndpoint: 8, metricsStalenessThreshold: 1h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Gate.Saturation.SlotsPerEndpoint; got != 8 {
		t.Fatalf("SlotsPerEndpoint %d, want 8", got)
	}
	gs, err := f.Gate.Build(BuildOptions{Endpoints: 1})
	if err != nil {
		t.Fatal(err)
	}
	gs.Saturation.Update("a", gate.Metrics{Running: 6})
	if s := gs.Saturation.Saturation(); s != 0.75 {
		t.Fatalf("Saturation() = %v with 6 of 8 slots running, want 0.75", s)
	}
	var b strings.Builder
	if err := (Effective{Binary: "t", Running: Running{Flow: f.Flow, Gate: f.Gate}}).Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "    slotsPerEndpoint: 8 # band ceilings, guarantees and eviction count the servers' slots\n") {
		t.Errorf("-check-config output lacks slotsPerEndpoint:\n%s", b.String())
	}
	for _, tc := range []struct{ yaml, path, msg string }{
		{"gate:\n  saturation: {slotsPerEndpoint: 0}\n", "gate.saturation.slotsPerEndpoint", "out of range"},
		{"plugins:\n- type: utilization-detector\n  parameters: {slotsPerEndpoint: 8}\n", "plugins[0].parameters.slotsPerEndpoint", "unknown key"},
	} {
		_, err := Parse([]byte(tc.yaml))
		var e *Error
		if !errors.As(err, &e) || e.Path != tc.path || !strings.Contains(e.Msg, tc.msg) {
			t.Errorf("Parse:\n%s\n%v; want an error at %s: …%s…", tc.yaml, err, tc.path, tc.msg)
		}
	}
}

// With the hand-off on, the binary builds the saturation gate to let a
// higher band past the lower bands' queued work, when the file declares
// the servers' slots; without them, as before.
func TestPrioritySchedulingReachesTheGate(t *testing.T) {
	for _, tc := range []struct {
		yaml       string
		handoff    bool
		wantJumped bool
	}{
		{"gate:\n  saturation: {slotsPerEndpoint: 4, metricsStalenessThreshold: 1h}\n", true, true},
		{"gate:\n  saturation: {slotsPerEndpoint: 4, metricsStalenessThreshold: 1h}\n", false, false},
		{"gate:\n  saturation: {metricsStalenessThreshold: 1h}\n", true, false},
	} {
		f, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		gs, err := f.Gate.Build(BuildOptions{Endpoints: 1, PriorityScheduling: tc.handoff})
		if err != nil {
			t.Fatal(err)
		}
		gs.Saturation.Update("a", gate.Metrics{Running: 4, Waiting: 4}) // room for one
		if !gs.Saturation.TryAcquire(-1) {
			t.Fatalf("%s: batch refused the one place", tc.yaml)
		}
		if got := gs.Saturation.TryAcquire(10); got != tc.wantJumped {
			t.Errorf("%s hand-off %v: chat past batch's queued work %v, want %v", tc.yaml, tc.handoff, got, tc.wantJumped)
		}
	}
}

// With the hand-off on, maxInFlight is the slot gate for servers that
// schedule by priority: the higher band passes the slots while the lower
// one runs.
func TestPrioritySchedulingMaxInFlight(t *testing.T) {
	f, err := Parse([]byte("gate:\n  maxInFlight: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, handoff := range []bool{false, true} {
		gs, err := f.Gate.Build(BuildOptions{PriorityScheduling: handoff})
		if err != nil {
			t.Fatal(err)
		}
		batch := 0
		for batch < 10 && gs.Gate.TryAcquire(-1) {
			batch++
		}
		if batch != 2 {
			t.Fatalf("hand-off %v: batch took %d slots, want the 2", handoff, batch)
		}
		if got := gs.Gate.TryAcquire(10); got != handoff {
			t.Errorf("hand-off %v: chat past the slots %v, want %v", handoff, got, handoff)
		}
		var b strings.Builder
		run := Running{Flow: f.Flow, Gate: f.Gate, PriorityHandoff: flowhttp.PriorityHandoff{Enabled: handoff}}
		if err := (Effective{Binary: "t", Running: run}).Write(&b); err != nil {
			t.Fatal(err)
		}
		if said := strings.Contains(b.String(), "  maxInFlight: 2 # the servers schedule by priority"); said != handoff {
			t.Errorf("hand-off %v: -check-config says the servers schedule by priority: %v\n%s", handoff, said, b.String())
		}
	}
}

// A file the binary runs with a guarantee and no gate cannot reach it —
// sluice-gateway always has one — but the controller refuses one all the
// same, naming the band.
func TestAGuaranteeWithoutAGateIsRefused(t *testing.T) {
	f, err := Parse([]byte("controller:\n  bands: [{priority: 10, guarantee: 0.5}, {priority: 0}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := f.Controller(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flowcontrol.New(cfg); err == nil || !strings.Contains(err.Error(), "Bands[0].Guarantee 0.5: no Gate") {
		t.Fatalf("flowcontrol.New: %v, want the guarantee refused for want of a gate", err)
	}
}
