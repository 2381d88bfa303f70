package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/examples/modelserver"
)

// handoffBackend answers every request and reports the priority field of
// the body it received, under the request's X-Test-Id, with the body's
// length and the Content-Length it was sent with.
func handoffBackend(t *testing.T) (*url.URL, <-chan [4]string) {
	t.Helper()
	seen := make(chan [4]string, 16)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			return // probes
		}
		body, _ := io.ReadAll(r.Body)
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(body, &fields)
		seen <- [4]string{r.Header.Get("X-Test-Id"), string(fields["priority"]), strconv.Itoa(len(body)), strconv.FormatInt(r.ContentLength, 10)}
		io.WriteString(w, `{"choices":[]}`)
	}))
	t.Cleanup(be.Close)
	u, err := url.Parse(be.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u, seen
}

// The hand-off through the gateway: the backend sees the priority of the
// band that admitted each request — the fallback band's for a priority
// without one — by the file's map, whatever the client wrote.
func TestPriorityHandoffReachesTheBackend(t *testing.T) {
	u, seen := handoffBackend(t)
	for _, tc := range []struct {
		name string
		file string
		flag *bool
		want map[string]string // X-Test-Id → priority the backend sees
	}{
		{"off", "", nil, map[string]string{"chat": `"-1000"`, "batch": `"-1000"`, "unbanded": `"-1000"`}},
		{"flag, default mapping", "", boolp(true), map[string]string{"chat": "-10", "batch": "1", "unbanded": "0"}},
		{"file map", "gateway:\n  priorityHandoff:\n    enabled: true\n    map: {10: 0, 0: 50, -1: 100}\n", nil,
			map[string]string{"chat": "0", "batch": "100", "unbanded": "50"}},
		{"flag off over the file", "gateway:\n  priorityHandoff: true\n", boolp(false),
			map[string]string{"chat": `"-1000"`, "batch": `"-1000"`, "unbanded": `"-1000"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions()
			opts.configPath = writeConfig(t, "", tc.file+"controller:\n  bands: [{priority: 10}, {priority: 0}, {priority: -1}]\n")
			opts.backends = []*url.URL{u}
			opts.maxInFlight = intp(8)
			opts.priorityHandoff = tc.flag
			opts.classifier.PriorityHeader = "x-priority"
			opts.classifier.Objectives = map[string]int{"chat": 10, "batch": -1}
			g := startGateway(t, opts)
			client := newClient(t)
			waitFor(t, "the backend to be up", func() bool { code, _ := get(t, client, g.url+"/readyz"); return code == http.StatusOK })
			body := `{"model":"m","priority":-1000,"messages":[{"role":"user","content":"hi"}],"priority":"-1000"}`
			for id, headers := range map[string][]string{
				"chat":     {"x-llm-d-inference-objective", "chat"},
				"batch":    {"x-llm-d-inference-objective", "batch"},
				"unbanded": {"x-priority", "5"},
			} {
				r := <-sendBody(client, g.url, id, body, headers...)
				if r.err != nil || r.status != http.StatusOK {
					t.Fatalf("%s: status %d, %v: %s", id, r.status, r.err, r.body)
				}
				got := <-seen
				if got[0] != id {
					t.Fatalf("the backend saw %q, want %q", got[0], id)
				}
				if want := tc.want[id]; got[1] != want {
					t.Errorf("%s: the backend saw priority %s, want %s", id, got[1], want)
				}
				if got[2] != got[3] {
					t.Errorf("%s: a body of %s bytes sent with Content-Length %s", id, got[2], got[3])
				}
			}
		})
	}
}

func boolp(b bool) *bool { return &b }

// A hand-off needs the body read.
func TestPriorityHandoffNeedsBodies(t *testing.T) {
	opts := testOptions()
	opts.maxBodyBytes = -1
	opts.priorityHandoff = boolp(true)
	_, err := newGateway(opts, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "-max-body-bytes -1 is negative, so bodies are not read, but the priority hand-off (-priority-handoff or gateway.priorityHandoff) rewrites them") {
		t.Errorf("newGateway: %v", err)
	}
}

// -check-config prints the mapping and what each band carries.
func TestBinaryCheckConfigPrintsHandoff(t *testing.T) {
	path := writeConfig(t, "", "gateway:\n  priorityHandoff: {map: {10: 0, -1: 9}, max: 9}\ncontroller:\n  bands: [{priority: 10}, {priority: 0}, {priority: -1}]\n")
	code, stdout, stderr := runCheck(t, "-check-config", "-config", path, "-backend", "http://127.0.0.1:8001", "-priority-handoff")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var out struct {
		PriorityHandoff struct {
			Min, Max int64
			Map      map[int]int64
			Bands    map[int]int64
		} `yaml:"priorityHandoff"`
	}
	if err := yaml.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, stdout)
	}
	h := out.PriorityHandoff
	if h.Min != 0 || h.Max != 9 || len(h.Map) != 2 || h.Map[10] != 0 || h.Map[-1] != 9 ||
		len(h.Bands) != 3 || h.Bands[10] != 0 || h.Bands[0] != 9 || h.Bands[-1] != 9 {
		t.Errorf("the output does not say what the hand-off runs: %+v\n%s", h, stdout)
	}
	// Without the flag, the file's enabled (absent: false) decides.
	_, stdout, _ = runCheck(t, "-check-config", "-config", path, "-backend", "http://127.0.0.1:8001")
	if !strings.Contains(stdout, "\npriorityHandoff: off #") {
		t.Errorf("without -priority-handoff the output does not say it is off:\n%s", stdout)
	}
	// A map that is not monotone is refused, at its line.
	bad := writeConfig(t, "", "gateway:\n  priorityHandoff:\n    map:\n      10: 5\n      0: 3\n")
	code, _, stderr = runCheck(t, "-check-config", "-config", bad)
	if code != 2 || !strings.Contains(stderr, ":4:7: gateway.priorityHandoff.map[10]: band 10 maps to 5, above band 0's 3") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// Against the fake vLLM, which refuses a priority other than 0 under
// first-come scheduling as vLLM does, and orders by it under priority
// scheduling: with the hand-off on, the field the server reads is the
// router's. Behind a first-come server a client's own priority is
// refused when it passes, replaced by band 0's value 0 with the hand-off,
// and band 10's -10 is refused (the server must run the priority
// policy); behind a priority server every band is served.
func TestPriorityHandoffAgainstTheFakeVLLM(t *testing.T) {
	const body = `{"model":"sim","priority":-1000,"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
	for _, tc := range []struct {
		name    string
		policy  string
		handoff bool
		want    map[string]int // objective → status
	}{
		{"fcfs, off", modelserver.PolicyFCFS, false, map[string]int{"standard": 400, "chat": 400}},
		{"fcfs, on", modelserver.PolicyFCFS, true, map[string]int{"standard": 200, "chat": 400}},
		{"priority, on", modelserver.PolicyPriority, true, map[string]int{"standard": 200, "chat": 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			urls, _ := modelServers(t, 1, modelserver.Config{Speed: 1000, SchedulingPolicy: tc.policy})
			opts := testOptions()
			opts.configPath = writeConfig(t, "", "controller:\n  bands: [{priority: 10}, {priority: 0}]\n")
			opts.backends, opts.maxInFlight, opts.priorityHandoff = urls, intp(4), boolp(tc.handoff)
			opts.classifier.Objectives = map[string]int{"chat": 10, "standard": 0}
			g := startGateway(t, opts)
			client := newClient(t)
			waitFor(t, "the backend to be up", func() bool { code, _ := get(t, client, g.url+"/readyz"); return code == http.StatusOK })
			for objective, want := range tc.want {
				r := <-sendBody(client, g.url, objective, body, "x-llm-d-inference-objective", objective)
				if r.err != nil || r.status != want {
					t.Errorf("%s: status %d (%v), want %d: %s", objective, r.status, r.err, want, r.body)
				}
				if want == 400 && !strings.Contains(r.body, "priority") {
					t.Errorf("%s: refused for another reason than its priority: %s", objective, r.body)
				}
			}
		})
	}
}
