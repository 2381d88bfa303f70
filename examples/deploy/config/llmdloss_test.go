package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
)

// warningPaths lists the paths of ws, in order.
func warningPaths(ws []Warning) []string {
	var paths []string
	for _, w := range ws {
		paths = append(paths, w.Path)
	}
	return paths
}

// wantWarning is one warning a file must give: its place, and words its
// message must hold.
type wantWarning struct {
	at    string // "LINE:COL PATH"
	words []string
}

// TestLLMDSamplesSayWhatIsLost loads llm-d-router's own sample files
// (testdata/llmd-*.yaml; each names its source) and the package's own
// llm-d file, and checks every warning: each section, plugin and key
// Sluice does not honour is named at its line with what is lost, and
// nothing else is.
func TestLLMDSamplesSayWhatIsLost(t *testing.T) {
	picks := "Sluice picks no endpoint"
	scorer := []string{"a scheduling scorer", picks}
	profiles := []string{"endpoint scheduling", "weights", picks}
	noGate := []string{`only with the "flowControl" feature gate`, "queueing none", "Sluice queues every request"}
	for _, tc := range []struct {
		file string
		want []wantWarning
	}{
		{"testdata/llmd-probabilistic-admitter.yaml", []wantWarning{
			{"8:1 featureGates", noGate},
			{"10:3 plugins[0]", []string{`"probabilistic-admitter"`, "sheds sheddable requests", "Sluice has no admitter",
				"queueDepthThreshold 999999999, kvCacheUtilThreshold 1", "effectively no admission control"}},
			{"11:3 plugins[1]", []string{`"random-picker"`, picks}},
			{"19:1 schedulingProfiles", profiles},
		}},
		{"testdata/llmd-epp-config.yaml", []wantWarning{
			{"6:1 featureGates", noGate},
			{"8:3 plugins[0]", append([]string{`"prefix-cache-scorer"`}, scorer...)},
			{"9:3 plugins[1]", []string{`"decode-filter"`, picks}},
			{"10:3 plugins[2]", []string{`"max-score-picker"`, picks}},
			{"11:3 plugins[3]", []string{`"single-profile-handler"`, picks}},
			{"12:1 schedulingProfiles", profiles},
		}},
		{"testdata/llmd-datalayer.yaml", []wantWarning{
			{"6:1 featureGates", noGate},
			{"8:5 plugins[0]", append([]string{`"queue-scorer"`}, scorer...)},
			{"9:5 plugins[1]", append([]string{`"kv-cache-utilization-scorer"`}, scorer...)},
			{"10:5 plugins[2]", append([]string{`"prefix-cache-scorer"`}, scorer...)},
			{"11:5 plugins[3]", append([]string{`"lora-affinity-scorer"`}, scorer...)},
			{"12:5 plugins[4]", []string{`"openai-parser"`, "request parser", "forwards it unchanged"}},
			{"13:5 plugins[5]", []string{`"metrics-data-source"`, "data layer", "scrapes each backend's /metrics"}},
			{"14:1 schedulingProfiles", profiles},
			{"21:1 requestHandler", []string{"request parsers are not read"}},
			{"24:1 dataLayer", []string{"data layer", "not read", "gateway.backends"}},
		}},
		{"testdata/llmd.yaml", []wantWarning{
			{"10:3 plugins[0]", append([]string{`"queue-scorer"`}, scorer...)},
			{"11:3 plugins[1]", append([]string{`"kv-cache-utilization-scorer"`}, scorer...)},
			{"12:3 plugins[2]", append([]string{`"prefix-cache-scorer"`}, scorer...)},
			{"25:1 schedulingProfiles", profiles},
		}},
		{"testdata/llmd-utilization.yaml", []wantWarning{
			{"5:1 featureGates", noGate},
			{"7:3 plugins[0]", []string{`"max-score-picker"`, picks}},
			{"14:1 schedulingProfiles", profiles},
		}},
	} {
		f, err := Load(tc.file)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if len(f.Warnings) != len(tc.want) {
			t.Errorf("%s: %d warnings, want %d:\n%s", tc.file, len(f.Warnings), len(tc.want), lines(f.Warnings))
			continue
		}
		for i, w := range f.Warnings {
			want := tc.want[i]
			if at := fmt.Sprintf("%d:%d %s", w.Line, w.Column, w.Path); at != want.at || w.File != tc.file {
				t.Errorf("%s: warning %d at %s:%s, want %s:%s: %s", tc.file, i, w.File, at, tc.file, want.at, w)
			}
			for _, word := range want.words {
				if !strings.Contains(w.Msg, word) {
					t.Errorf("%s: warning %d %q does not say %q", tc.file, i, w.Msg, word)
				}
			}
			if prefix := fmt.Sprintf("config: %s:%d:%d: %s: ", tc.file, w.Line, w.Column, w.Path); !strings.HasPrefix(w.String(), prefix) {
				t.Errorf("%s: warning %d reads %q, want it to start %q, as an Error does", tc.file, i, w, prefix)
			}
		}
	}
}

// llm-d-router's usage-limit samples load with their ceilings, and the
// gate built from them is the file's gate inside gate.Ceiling.
func TestLLMDUsageLimitSamplesLoad(t *testing.T) {
	for _, tc := range []struct {
		file string
		want UsageLimit
		gate string
	}{
		{"testdata/llmd-soft-reflective-ceiling.yaml", UsageLimit{Type: "soft-reflective-ceiling-policy", Threshold: 1, MaxCeiling: 1},
			"Ceiling(*gate.SaturationGate, soft-reflective-ceiling-policy)"},
		{"testdata/llmd-priority-holdback.yaml", UsageLimit{Type: "priority-holdback-policy", Threshold: 1, Shape: "linear", Domain: "rank", MinCeiling: 0.4, MaxCeiling: 0.9},
			"Ceiling(*gate.SaturationGate, priority-holdback-policy)"},
	} {
		f, err := Load(tc.file)
		if err != nil {
			t.Errorf("Load(%s): %v", tc.file, err)
			continue
		}
		if f.Gate.UsageLimit == nil || *f.Gate.UsageLimit != tc.want {
			t.Errorf("%s: usage limit %+v, want %+v", tc.file, f.Gate.UsageLimit, tc.want)
		}
		cfg, _, err := f.Controller(BuildOptions{Endpoints: 1})
		if err != nil {
			t.Errorf("%s: Controller: %v", tc.file, err)
			continue
		}
		if got := fmt.Sprint(cfg.Gate); got != tc.gate {
			t.Errorf("%s: gate %s, want %s", tc.file, got, tc.gate)
		}
		c, err := flowcontrol.New(cfg)
		if err != nil {
			t.Errorf("%s: flowcontrol.New: %v", tc.file, err)
			continue
		}
		c.Close()
	}
}

// Feature gates other than flowControl, and policies Sluice lacks that
// nothing refers to, are named; empty sections are not.
func TestLLMDUnreadSmallCases(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
	}{
		{"featureGates: [flowControl, dataLayer]\n", `config: line 1, column 29: featureGates: feature gate "dataLayer": ignored`},
		{"featureGates: [flowControl]\nplugins:\n- type: priority-then-time-eviction-order-policy\n",
			`config: line 3, column 3: plugins[0]: plugin "priority-then-time-eviction-order-policy" (type priority-then-time-eviction-order-policy): not read: a policy Sluice does not have`},
		{"featureGates: [flowControl]\nplugins:\n- name: x\n  type: agent-identity\n", `config: line 3, column 3: plugins[0]: plugin "x" (type agent-identity): not read: a plugin Sluice does not have`},
		{"featureGates: [flowControl]\nplugins:\n- type: latency-slo-admitter\n", `config: line 3, column 3: plugins[0]: plugin "latency-slo-admitter" (type latency-slo-admitter): not read: an admission plugin: Sluice has no admitter`},
	} {
		f, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Errorf("Parse:\n%s\n%v", tc.yaml, err)
			continue
		}
		if len(f.Warnings) != 1 || !strings.HasPrefix(f.Warnings[0].String(), tc.want) {
			t.Errorf("Parse:\n%s\nwarnings:\n%s\nwant one starting %q", tc.yaml, lines(f.Warnings), tc.want)
		}
	}
	for _, y := range []string{"featureGates: [flowControl]\nschedulingProfiles: []\n", "featureGates: [flowControl]\ndataLayer: {}\nplugins: []\n",
		"kind: EndpointPickerConfig\nfeatureGates: [flowControl]\nparser: null\n"} {
		if f, err := Parse([]byte(y)); err != nil || len(f.Warnings) != 0 {
			t.Errorf("Parse:\n%s\nwarnings:\n%s\nerror %v; want none", y, lines(f.Warnings), err)
		}
	}
}

func lines(ws []Warning) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString("\t" + w.String() + "\n")
	}
	return b.String()
}
