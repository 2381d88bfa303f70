package config

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// -priority-handoff turns the file's hand-off on or off, keeping its map;
// without the flag the file decides; what is off runs as the zero value.
func TestHandoffFlag(t *testing.T) {
	table := flowhttp.PriorityHandoff{Map: map[int]int64{10: 0, 0: 1}, Max: 5}
	for _, tc := range []struct {
		args []string
		file flowhttp.PriorityHandoff
		want flowhttp.PriorityHandoff
	}{
		{nil, flowhttp.PriorityHandoff{}, flowhttp.PriorityHandoff{}},
		{nil, table, flowhttp.PriorityHandoff{}},
		{[]string{"-priority-handoff"}, flowhttp.PriorityHandoff{}, flowhttp.PriorityHandoff{Enabled: true}},
		{[]string{"-priority-handoff"}, table, flowhttp.PriorityHandoff{Enabled: true, Map: table.Map, Max: 5}},
		{nil, flowhttp.PriorityHandoff{Enabled: true, Map: table.Map}, flowhttp.PriorityHandoff{Enabled: true, Map: table.Map}},
		{[]string{"-priority-handoff=false"}, flowhttp.PriorityHandoff{Enabled: true, Map: table.Map}, flowhttp.PriorityHandoff{}},
	} {
		f, _, out, err := parseShared(tc.args...)
		if err != nil {
			t.Fatalf("%v: %v %s", tc.args, err, out)
		}
		got := f.Handoff(tc.file)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%v over %v: (-want +got)\n%s", tc.args, tc.file, diff)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%v over %v: runs an invalid hand-off: %v", tc.args, tc.file, err)
		}
	}
}

// -check-config prints the hand-off: off, or its bounds, its map and the
// value each configured band's requests carry.
func TestEffectiveWritesHandoff(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"controller:\n  bands: [{priority: 0}]\n", []string{"priorityHandoff: off # "}},
		{"gateway: {priorityHandoff: true}\ncontroller:\n  bands: [{priority: 10}, {priority: 0}, {priority: -1}]\n", []string{
			"priorityHandoff: # the body's top-level priority (vLLM's: run it with --scheduling-policy priority, or it refuses a priority other than 0)",
			"  min: -2147483648\n  max: 2147483647\n  map: default # priority = -band",
			"  bands: # the priority each band's requests carry to the model server\n    10: -10\n    0: 0\n    -1: 1\n"}},
		{"gateway:\n  priorityHandoff: {enabled: true, map: {10: 0, -1: 7}, min: 0, max: 7}\ncontroller:\n  bands: [{priority: 10}, {priority: 0}, {priority: -1}]\n", []string{
			"  min: 0\n  max: 7\n  map: # an unlisted band takes the nearest listed band's below it, else the lowest's\n    10: 0\n    -1: 7\n",
			"  bands: # the priority each band's requests carry to the model server\n    10: 0\n    0: 7\n    -1: 7\n"}},
	} {
		f, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		run := Running{Flow: f.Flow, Gate: f.Gate, PriorityHandoff: (&Flags{}).Handoff(f.Gateway.PriorityHandoff)}
		if err := (Effective{Binary: "t", Running: run}).Write(&b); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: the output lacks %q:\n%s", tc.yaml, w, b.String())
			}
		}
	}
}

// A reload cannot change the hand-off: the handler is built with it.
func TestDiffHandoffTakesARestart(t *testing.T) {
	on := flowhttp.PriorityHandoff{Enabled: true}
	for _, tc := range []struct {
		old, next flowhttp.PriorityHandoff
		restart   string
	}{
		{flowhttp.PriorityHandoff{}, flowhttp.PriorityHandoff{}, ""},
		{on, on, ""},
		{flowhttp.PriorityHandoff{}, on, "gateway.priorityHandoff off → priority = -band"},
		{on, flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{0: 1}}, "gateway.priorityHandoff priority = -band, clamped to [-2147483648, 2147483647] → band 0 → 1"},
	} {
		c := Diff(Running{PriorityHandoff: tc.old}, Running{PriorityHandoff: tc.next})
		got := strings.Join(c.Restart, "; ")
		if (tc.restart == "") != (got == "") || !strings.Contains(got, tc.restart) {
			t.Errorf("%v → %v: restart %q, want %q", tc.old, tc.next, got, tc.restart)
		}
	}
}

// The README's hand-off file parses, and maps as its comments say.
func TestREADMEHandoffExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var example string
	for _, block := range strings.Split(string(readme), "```yaml\n")[1:] {
		if body, _, _ := strings.Cut(block, "```"); strings.Contains(body, "priorityHandoff:") {
			example = body
		}
	}
	if example == "" {
		t.Fatal("examples/deploy/README.md shows no priorityHandoff in a yaml block")
	}
	f, err := Parse([]byte(example))
	if err != nil {
		t.Fatalf("the README's hand-off file: %v", err)
	}
	want := flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: -10, 0: 0, -1: 1}, Min: -100, Max: 100}
	if diff := cmp.Diff(want, f.Gateway.PriorityHandoff); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
