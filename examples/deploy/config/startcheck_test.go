package config

import (
	"fmt"
	"strings"
	"testing"
)

// Issue 31, item 10: what a start fails on, or runs wrongly with, the
// file's check fails on too, naming the key and its line.

// A listen address whose port is out of range is refused at its line; a
// start would fail to listen.
func TestListenPortOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []wantErr
	}{
		{"gateway:\n  listen: 127.0.0.1:99999\n", []wantErr{{2, "gateway.listen", `"127.0.0.1:99999": port 99999 is out of range: a port is from 0 to 65535`}}},
		{"gateway:\n  listen: \"[::1]:65536\"\n", []wantErr{{2, "gateway.listen", "port 65536 is out of range"}}},
		{"gateway:\n  listen: 127.0.0.1:-1\n", []wantErr{{2, "gateway.listen", `port "-1" is neither a number from 0 to 65535 nor a known service name`}}},
		{"gateway:\n  listen: localhost\n", []wantErr{{2, "gateway.listen", "want host:port"}}},
	} {
		_, err := Parse([]byte(tc.yaml))
		checkErrs(t, tc.yaml, err, tc.want...)
	}
	for _, ok := range []string{"127.0.0.1:0", ":8080", "127.0.0.1:65535", "[::1]:9000", "localhost:http"} {
		if err := CheckListen(ok); err != nil {
			t.Errorf("CheckListen(%q) = %v, want nil", ok, err)
		}
		if _, err := Parse([]byte("gateway:\n  listen: \"" + ok + "\"\n")); err != nil {
			t.Errorf("gateway.listen %q: %v", ok, err)
		}
	}
}

// A backend URL is the model server's base: one that ends in /v1 (or
// goes below it) would have every scrape answered 404 and every request
// sent to /v1/v1/..., so it is refused at its line with the base to write.
func TestBackendURLIsTheServersBase(t *testing.T) {
	doc := "gateway:\n  backends:\n  - http://127.0.0.1:8000\n  - http://127.0.0.1:8001/v1\n"
	_, err := Parse([]byte(doc))
	checkErrs(t, doc, err, wantErr{4, "gateway.backends[1]",
		`"http://127.0.0.1:8001/v1": a backend URL is the model server's base, to which /metrics and each request's path (/v1/...) are appended; ` +
			`with /v1 in it, every scrape would be answered 404 and every request sent to http://127.0.0.1:8001/v1/v1/...: write "http://127.0.0.1:8001"`})

	for _, tc := range []struct{ raw, write string }{
		{"http://127.0.0.1:8001/v1/", `write "http://127.0.0.1:8001"`},
		{"https://models.example/vllm/v1/chat/completions", `write "https://models.example/vllm"`},
	} {
		if _, err := ParseBackend(tc.raw); err == nil || !strings.Contains(err.Error(), tc.write) {
			t.Errorf("ParseBackend(%q) = %v, want an error saying %s", tc.raw, err, tc.write)
		}
	}
	for _, ok := range []string{"http://127.0.0.1:8000", "http://127.0.0.1:8000/", "http://h/v10", "http://h/prefix/", "http://h/v1beta"} {
		if _, err := ParseBackend(ok); err != nil {
			t.Errorf("ParseBackend(%q) = %v, want nil", ok, err)
		}
	}
}

// A plugin type that neither Sluice nor llm-d-router has is an error at
// its line, as llm-d-router fails to start with it; an llm-d-router type
// Sluice does not read stays a warning.
func TestUnknownPluginTypeIsAnError(t *testing.T) {
	doc := "featureGates: [flowControl]\nplugins:\n- type: queue-scorer\n- name: newest\n  type: lifo-ordering-policy\n"
	_, err := Parse([]byte(doc))
	checkErrs(t, doc, err, wantErr{5, "plugins[1].type",
		`unknown plugin type "lifo-ordering-policy": neither Sluice nor llm-d-router has it, and llm-d-router refuses to start with it (did you mean "edf-ordering-policy"?)`})
	if !strings.Contains(err.Error(), "config: line 5, column 9: plugins[1].type: ") {
		t.Errorf("error %q does not name line 5, column 9", err)
	}

	doc = "featureGates: [flowControl]\nplugins:\n- type: some-new-thing\n"
	_, err = Parse([]byte(doc))
	checkErrs(t, doc, err, wantErr{3, "plugins[0].type", `unknown plugin type "some-new-thing"`})

	f, err := Parse([]byte("featureGates: [flowControl]\nplugins:\n- type: program-aware-fairness\n"))
	if err != nil || len(f.Warnings) != 1 || f.Warnings[0].Path != "plugins[0]" {
		t.Errorf("an llm-d-router type Sluice lacks: %v, warnings %q; want one warning at plugins[0]", err, f.Warnings)
	}
}

// A file in llm-d-router's form without its flowControl feature gate is
// queued by Sluice, and llm-d-router would not queue it at all: the file
// is told, once, at the place to change.
func TestNoFlowControlGateWarns(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		at   string // "LINE:COL PATH"
		says string
	}{
		// No flowControl section: the defaults queue every request.
		{"apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: queue-scorer\n", "2:1 featureGates",
			`llm-d-router runs flow control only with the "flowControl" feature gate, which this file does not enable: it would send every request to an endpoint at once, queueing none; Sluice queues every request`},
		{"schedulingProfiles: []\n", "1:1 featureGates", "queueing none"},
		// The gate turned off, or another gate on.
		{"featureGates:\n- flowControl=false\n", "2:3 featureGates", "queueing none"},
		{"featureGates: [dataLayer]\nplugins: []\n", "1:1 featureGates", "queueing none"},
		// A flowControl section that only names the saturation detector.
		{"flowControl:\n  saturationDetector: {pluginRef: utilization-detector}\n", "1:1 featureGates", "queueing none"},
		// A section with bands: it is what llm-d-router would not apply.
		{"kind: EndpointPickerConfig\nflowControl:\n  maxRequests: 5\n", "2:1 flowControl",
			`llm-d-router applies this section only with the "flowControl" feature gate, which this file does not enable: it would send every request to an endpoint at once, queueing none; Sluice applies it regardless`},
	} {
		f, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Errorf("Parse:\n%s\n%v", tc.yaml, err)
			continue
		}
		var gateWarnings []Warning
		for _, w := range f.Warnings {
			if strings.Contains(w.Msg, `"flowControl" feature gate`) {
				gateWarnings = append(gateWarnings, w)
			}
		}
		if len(gateWarnings) != 1 {
			t.Errorf("Parse:\n%s\nwarnings:\n%s\nwant one about the flowControl feature gate", tc.yaml, lines(f.Warnings))
			continue
		}
		w := gateWarnings[0]
		if at := fmt.Sprintf("%d:%d %s", w.Line, w.Column, w.Path); at != tc.at || !strings.Contains(w.Msg, tc.says) {
			t.Errorf("Parse:\n%s\nwarning %s %q, want at %s saying %q", tc.yaml, at, w.Msg, tc.at, tc.says)
		}
	}
	for _, y := range []string{"featureGates: [flowControl]\n", "featureGates: [\"flowControl=true\"]\nflowControl: {maxRequests: 5}\n", "gateway: {}\n", ""} {
		if f, err := Parse([]byte(y)); err != nil || len(f.Warnings) != 0 {
			t.Errorf("Parse:\n%s\nwarnings:\n%s\nerror %v; want none", y, lines(f.Warnings), err)
		}
	}
}
