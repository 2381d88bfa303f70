package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/internal/clitest"
)

// Issue 31, item 10: -check-config refuses what a start would fail on or
// run wrongly with, naming the flag or the file's key and line; it warns
// of a gateway without backends; and it prints the drain delay, the
// inference routes and how requests are classified.
func TestBinaryCheckConfigHitsWhatAStartHits(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	port := write("port.yaml", "gateway:\n  listen: 127.0.0.1:99999\n  backends: [http://127.0.0.1:8001]\n")
	v1 := write("v1.yaml", "gateway:\n  backends:\n    - http://127.0.0.1:8001/v1\n")
	lifo := write("lifo.yaml", "featureGates: [flowControl]\nplugins:\n- type: lifo-ordering-policy\n")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-config", port}, []string{"port.yaml:2:11: gateway.listen:", "port 99999 is out of range"}},
		{[]string{"-listen", "127.0.0.1:99999", "-backend", "http://127.0.0.1:8001"}, []string{"-listen", "port 99999 is out of range"}},
		{[]string{"-config", v1}, []string{"v1.yaml:3:7: gateway.backends[0]:", "every scrape would be answered 404", `write "http://127.0.0.1:8001"`}},
		{[]string{"-backend", "http://127.0.0.1:8001/v1/"}, []string{"-backend", "every scrape would be answered 404", `write "http://127.0.0.1:8001"`}},
		{[]string{"-config", lifo}, []string{"lifo.yaml:3:9: plugins[0].type:", `unknown plugin type "lifo-ordering-policy"`, "llm-d-router refuses to start with it"}},
	} {
		code, stdout, stderr := runCheck(t, append([]string{"-check-config"}, tc.args...)...)
		if code != 2 || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", tc.args, code, stdout)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, stderr, w)
			}
		}
	}

	// No backend: valid, and said.
	empty := write("empty.yaml", "gateway:\n  listen: 127.0.0.1:9000\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "sluice-gateway: no backend: /readyz answers 503"},
		{[]string{"-config", empty}, "empty.yaml:1:1: gateway.backends: no backend: /readyz answers 503"},
	} {
		code, stdout, stderr := runCheck(t, append([]string{"-check-config"}, tc.args...)...)
		var out struct{ Warnings []string }
		if err := yaml.Unmarshal([]byte(stdout), &out); err != nil || code != 0 || stderr != "" {
			t.Fatalf("%v: exit %d, stderr %q, %v:\n%s", tc.args, code, stderr, err, stdout)
		}
		if len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], tc.want) {
			t.Errorf("%v: warnings %q, want one saying %q", tc.args, out.Warnings, tc.want)
		}
	}

	// What runs: the drain delay, the inference routes, the classification.
	code, stdout, stderr := runCheck(t, "-check-config", "-backend", "http://127.0.0.1:8001", "-drain-delay", "3s",
		"-inference-path", "POST /v1/chat/completions", "-inference-path", "/v1/rerank",
		"-priority-header", "x-priority", "-objective", "chat=10", "-objective", "batch=-10", "-default-priority", "-1", "-max-tokens", "4096")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var out struct {
		DrainDelay     string   `yaml:"drainDelay"`
		Inference      []string `yaml:"inference"`
		Classification struct {
			FlowHeader      string         `yaml:"flowHeader"`
			PriorityHeader  string         `yaml:"priorityHeader"`
			ObjectiveHeader string         `yaml:"objectiveHeader"`
			Objectives      map[string]int `yaml:"objectives"`
			DefaultPriority int            `yaml:"defaultPriority"`
			TTLHeader       string         `yaml:"ttlHeader"`
			Cost            string         `yaml:"cost"`
		}
		Warnings []string
	}
	if err := yaml.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, stdout)
	}
	c := out.Classification
	if out.DrainDelay != "3s" || strings.Join(out.Inference, ", ") != "POST /v1/chat/completions, /v1/rerank" ||
		c.FlowHeader != "x-llm-d-inference-fairness-id" || c.PriorityHeader != "x-priority" || c.ObjectiveHeader != "x-llm-d-inference-objective" ||
		len(c.Objectives) != 2 || c.Objectives["chat"] != 10 || c.Objectives["batch"] != -10 || c.DefaultPriority != -1 ||
		c.TTLHeader != "x-llm-d-inference-ttl" || !strings.Contains(c.Cost, "at most 4096 (-max-tokens)") || len(out.Warnings) != 0 {
		t.Errorf("the output does not say what runs: %+v\n%s", out, stdout)
	}
	// Without the flags: the defaults.
	_, stdout, _ = runCheck(t, "-check-config", "-backend", "http://127.0.0.1:8001")
	clitest.Holds(t, "-check-config", stdout, "drainDelay: 5s\n", "inference: # admitted through flow control", "  - \"POST /v1/completions\"\n", "  - \"POST /v1/responses\"\n",
		"  priorityHeader: none\n", "  objectives: {}\n", "  defaultPriority: 0\n")
}
