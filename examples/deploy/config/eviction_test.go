package config

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicegate/sluice/flowcontrol"
)

// parseEviction parses yaml and reports an error unless its in-flight
// eviction is want. It returns the file, or nil after reporting that yaml
// does not parse.
func parseEviction(t *testing.T, yaml string, want *flowcontrol.Eviction) *File {
	t.Helper()
	f, err := Parse([]byte(yaml))
	if err != nil {
		t.Errorf("Parse:\n%s\n%v", yaml, err)
		return nil
	}
	if diff := cmp.Diff(want, f.Flow.Eviction); diff != "" {
		t.Errorf("Parse:\n%s\nEviction (-want +got):\n%s", yaml, diff)
	}
	return f
}

// llm-d-router's enableEviction: true is the zero Eviction, its defaults,
// without a warning; false, or left out, is none.
func TestEnableEvictionIsLLMDsDefaults(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want *flowcontrol.Eviction
	}{
		{"featureGates: [flowControl]\nflowControl:\n  enableEviction: true\n  priorityBands: [{priority: -1}]\n", &flowcontrol.Eviction{}},
		{"featureGates: [flowControl]\nflowControl:\n  enableEviction: false\n", nil},
		{"featureGates: [flowControl]\nflowControl:\n  maxRequests: 10\n", nil},
		{"featureGates: [flowControl]\nflowControl:\n  enableEviction: true\n  priorityBands: [{priority: -1}]\n  eviction:\n    maxRevocationsPerDecision: 1\n    confirmationGrace: 0s\n",
			&flowcontrol.Eviction{MaxPerDecision: 1, Grace: -1}},
	} {
		f := parseEviction(t, tc.yaml, tc.want)
		if f == nil {
			continue
		}
		if len(f.Warnings) != 0 {
			t.Errorf("Parse:\n%s\nwarnings:\n%s\nwant none", tc.yaml, lines(f.Warnings))
		}
		mustNew(t, f)
	}
}

// Sluice's eviction knobs and guarantees, in both forms.
func TestEvictionKnobsAndGuarantees(t *testing.T) {
	for _, tc := range []struct {
		yaml       string
		want       *flowcontrol.Eviction
		guarantees map[int]float64
	}{
		{"controller:\n  eviction: true\n  bands: [{priority: 0}, {priority: -1}]\n", &flowcontrol.Eviction{}, nil},
		{"controller:\n  eviction: false\n", nil, nil},
		{"controller:\n  eviction: {}\n  bands: [{priority: 0}, {priority: -1}]\n", &flowcontrol.Eviction{}, nil},
		{"controller:\n  eviction:\n    sheddableBelow: 5\n    maxRevocationsPerDecision: 3\n    confirmationGrace: 250ms\n    confirmationTimeout: 2s\n  bands: [{priority: 0}, {priority: -1}]\n",
			&flowcontrol.Eviction{Below: 5, MaxPerDecision: 3, Grace: 250 * time.Millisecond, Timeout: 2 * time.Second}, nil},
		{"controller:\n  eviction: {confirmationGrace: 0}\n  bands: [{priority: 0}, {priority: -1}]\n", &flowcontrol.Eviction{Grace: -1}, nil},
		{"controller:\n  bands:\n  - {priority: 10, guarantee: 0.7}\n  - {priority: 0, guarantee: 0.2}\n  - {priority: -1, guarantee: 0.1}\n",
			nil, map[int]float64{10: 0.7, 0: 0.2, -1: 0.1}},
		{"flowControl:\n  enableEviction: true\n  priorityBands:\n  - {priority: 10, guarantee: 0.5}\n  - {priority: -1}\n",
			&flowcontrol.Eviction{}, map[int]float64{10: 0.5, -1: 0, 0: 0}},
	} {
		f := parseEviction(t, tc.yaml, tc.want)
		if f == nil {
			continue
		}
		if tc.guarantees != nil {
			got := map[int]float64{}
			for _, b := range f.Flow.Bands {
				got[b.Priority] = b.Guarantee
			}
			if diff := cmp.Diff(tc.guarantees, got); diff != "" {
				t.Errorf("Parse:\n%s\nguarantees (-want +got):\n%s", tc.yaml, diff)
			}
		}
		mustNew(t, f)
	}
}

// Every wrong eviction or guarantee value is an error at its line and
// path, as the loader's other errors are.
func TestEvictionErrors(t *testing.T) {
	for i, tc := range []struct {
		yaml string
		want wantErr
	}{
		{"controller:\n  eviction:\n    maxRevocationsPerDecision: 0\n", wantErr{3, "controller.eviction.maxRevocationsPerDecision", "must be at least 1, got 0"}},
		{"controller:\n  eviction:\n    confirmationGrace: -1s\n", wantErr{3, "controller.eviction.confirmationGrace", "negative duration"}},
		{"controller:\n  eviction:\n    confirmationTimeout: 0s\n", wantErr{3, "controller.eviction.confirmationTimeout", "must be above zero"}},
		{"controller:\n  eviction:\n    confirmationTimeout: 5\n", wantErr{3, "controller.eviction.confirmationTimeout", "with a unit"}},
		{"controller:\n  eviction:\n    sheddableBelow: low\n", wantErr{3, "controller.eviction.sheddableBelow", "want an integer"}},
		{"controller:\n  eviction:\n    maxRevocations: 3\n", wantErr{3, "controller.eviction.maxRevocations", `did you mean "maxRevocationsPerDecision"?`}},
		{"controller:\n  eviction: yes\n", wantErr{2, "controller.eviction", "want true, false or a mapping"}},
		{"controller:\n  eviction: [true]\n", wantErr{2, "controller.eviction", "want true or false"}},
		{"controller:\n  bands:\n  - priority: 0\n    guarantee: -0.1\n", wantErr{4, "controller.bands[0].guarantee", "out of range: want a fraction"}},
		{"controller:\n  bands:\n  - priority: 0\n    guarantee: 1.5\n", wantErr{4, "controller.bands[0].guarantee", "out of range: want a fraction"}},
		{"controller:\n  bands:\n  - priority: 0\n    guarantee: .nan\n", wantErr{4, "controller.bands[0].guarantee", "want a finite number"}},
		{"controller:\n  bands:\n  - priority: 0\n    guarantee: half\n", wantErr{4, "controller.bands[0].guarantee", "want a number"}},
		{"controller:\n  bands:\n  - priority: 10\n    guarantee: 0.6\n  - priority: 0\n    guarantee: 0.5\n",
			wantErr{6, "controller.bands[1].guarantee", "0.5 takes the bands' guarantees to 1.1, past 1"}},
		{"flowControl:\n  eviction:\n    maxRevocationsPerDecision: 3\n", wantErr{2, "flowControl.eviction", "set enableEviction: true"}},
		{"flowControl:\n  enableEviction: false\n  eviction: {}\n", wantErr{3, "flowControl.eviction", "set enableEviction: true"}},
		{"flowControl:\n  enableEviction: true\n  eviction:\n    confirmationTimout: 1s\n", wantErr{4, "flowControl.eviction.confirmationTimout", `did you mean "confirmationTimeout"?`}},
		{"flowControl:\n  priorityBands:\n  - priority: 1\n    guarantee: 0.75\n  - priority: 2\n    guarantee: 0.5\n",
			wantErr{6, "flowControl.priorityBands[1].guarantee", "takes the bands' guarantees to 1.25"}},
		{"flowControl:\n  defaultPriorityBand:\n    guarantee: 0.1\n", wantErr{3, "flowControl.defaultPriorityBand.guarantee", "belongs to a band of priorityBands"}},
		{"flowControl:\n  defaultNegativePriorityBand: {guarantee: 0.1}\n", wantErr{2, "flowControl.defaultNegativePriorityBand.guarantee", "belongs to a band of priorityBands"}},
	} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			checkErrs(t, tc.yaml, err, tc.want)
		})
	}
}

// llm-d-router's usage-limit keys, usageLimitPolicyPluginRef and the
// three policy plugins, load without a warning, beside enableEviction;
// a file of nothing but flow control has nothing Sluice reads past.
func TestUsageLimitAndEvictionKeysLoadWithoutWarnings(t *testing.T) {
	for _, ref := range []string{"static", "holdback", "soft"} {
		doc := `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates:
- flowControl
plugins:
- name: static
  type: static-usage-limit-policy
  parameters: {threshold: 0.9}
- name: holdback
  type: priority-holdback-policy
  parameters: {shape: linear, domain: rank, minCeiling: 0.5, maxCeiling: 1}
- name: soft
  type: soft-reflective-ceiling-policy
- type: concurrency-detector
  parameters: {maxConcurrency: 8}
flowControl:
  enableEviction: true
  saturationDetector: {pluginRef: concurrency-detector}
  usageLimitPolicyPluginRef: ` + ref + `
  priorityBands:
  - priority: 10
  - priority: -1
`
		f, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("usageLimitPolicyPluginRef %s: %v", ref, err)
			continue
		}
		if len(f.Warnings) != 0 {
			t.Errorf("usageLimitPolicyPluginRef %s: warnings\n%s", ref, lines(f.Warnings))
		}
		if f.Gate.UsageLimit == nil || f.Flow.Eviction == nil {
			t.Errorf("usageLimitPolicyPluginRef %s: usage limit %v, eviction %v; want both", ref, f.Gate.UsageLimit, f.Flow.Eviction)
		}
		cfg, _, err := f.Controller(BuildOptions{Endpoints: 1})
		if err != nil {
			t.Fatal(err)
		}
		c, err := flowcontrol.New(cfg)
		if err != nil {
			t.Fatalf("usageLimitPolicyPluginRef %s: flowcontrol.New: %v", ref, err)
		}
		c.Close()
	}
}

// A file with eviction on and band 10 guaranteed runs as it says: with
// the one slot held by a batch request, a waiting interactive one revokes
// it.
func TestEvictionFileRevokes(t *testing.T) {
	f, err := Parse([]byte("controller:\n  eviction: true\n  bands:\n  - {priority: 10, guarantee: 0.5}\n  - {priority: 0}\n  - {priority: -1}\ngate:\n  maxInFlight: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := f.Controller(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	batch, err := c.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{Priority: -1}})
	if err != nil {
		t.Fatal(err)
	}
	var chat *flowcontrol.Admission
	c.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{Priority: 10}}, func(a *flowcontrol.Admission, _ error) { chat = a })
	select {
	case <-batch.Revoked():
	default:
		t.Fatal("the batch admission was not revoked")
	}
	batch.Done()
	if chat == nil {
		t.Fatal("the interactive request did not start once the batch one confirmed")
	}
	chat.Done()
}

// A reload may not change eviction or a guarantee: the controller is
// built with them. A new band may bring a guarantee only to a controller
// that already tracks some.
func TestDiffEvictionAndGuarantees(t *testing.T) {
	run := func(yaml string) Running {
		t.Helper()
		f, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return Running{Flow: f.Flow, Gate: f.Gate}
	}
	base := run("controller:\n  bands:\n  - {priority: 10, guarantee: 0.5}\n  - {priority: 0}\n")
	for _, tc := range []struct {
		next    string
		restart string // a word of the one restart reason; "" for none
	}{
		{"controller:\n  eviction: true\n  bands:\n  - {priority: 10, guarantee: 0.5}\n  - {priority: 0}\n", "eviction none → sheddableBelow 0, maxRevocationsPerDecision 2, confirmationGrace gate, confirmationTimeout 10s"},
		{"controller:\n  bands:\n  - {priority: 10, guarantee: 0.4}\n  - {priority: 0}\n", "band 10 guarantee 0.5 → 0.4"},
		{"controller:\n  bands:\n  - {priority: 10, guarantee: 0.5}\n  - {priority: 0}\n  - {priority: 5, guarantee: 0.25}\n", ""},
		{"controller:\n  bands:\n  - {priority: 10, guarantee: 0.5, maxRequests: 5}\n  - {priority: 0}\n", ""},
	} {
		c := Diff(base, run(tc.next))
		switch {
		case tc.restart == "" && len(c.Restart) != 0:
			t.Errorf("%s: restart %q, want none", tc.next, c.Restart)
		case tc.restart != "" && (len(c.Restart) != 1 || !strings.Contains(c.Restart[0], tc.restart)):
			t.Errorf("%s: restart %q, want one saying %q", tc.next, c.Restart, tc.restart)
		}
	}
	none := run("controller:\n  bands:\n  - {priority: 0}\n")
	c := Diff(none, run("controller:\n  bands:\n  - {priority: 0}\n  - {priority: 5, guarantee: 0.25}\n"))
	if len(c.Restart) != 1 || !strings.Contains(c.Restart[0], "band 5 added with guarantee 0.25") || len(c.Provision) != 0 {
		t.Errorf("a guarantee for a controller that tracks none: restart %q, provision %v; want a restart", c.Restart, c.Provision)
	}
}

// -check-config prints eviction with its defaults applied, and each
// band's guarantee.
func TestEffectiveWritesEviction(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"controller:\n  bands:\n  - {priority: 0, guarantee: 0.25}\n", []string{
			"  eviction: none # a running request keeps its slot until it ends\n", "    guarantee: 0.25\n"}},
		{"controller:\n  eviction: true\n  bands: [{priority: 0}, {priority: -1}]\n", []string{
			"  eviction:\n    sheddableBelow: 0\n    maxRevocationsPerDecision: 2\n    confirmationGrace: gate # the gate's own lag",
			"    confirmationTimeout: 10s\n", "    guarantee: 0\n"}},
		{"controller:\n  eviction: {sheddableBelow: 1, confirmationGrace: 0, confirmationTimeout: 3s}\n  bands: [{priority: 0}, {priority: -1}]\n", []string{
			"    sheddableBelow: 1\n    maxRevocationsPerDecision: 2\n    confirmationGrace: none\n    confirmationTimeout: 3s\n"}},
	} {
		f, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := (Effective{Binary: "t", Running: Running{Flow: f.Flow, Gate: f.Gate}}).Write(&b); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: the output lacks %q:\n%s", tc.yaml, w, b.String())
			}
		}
	}
}
