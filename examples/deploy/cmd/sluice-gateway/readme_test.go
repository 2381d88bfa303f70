package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
)

// readmeEviction returns the README's eviction file and the arguments of
// the command that runs it, the file's name replaced by path.
func readmeEviction(t *testing.T, path string) (file string, args []string) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Interactive traffic beside a batch dispatcher\n")
	if !ok {
		t.Fatal("README.md has no section on a batch dispatcher")
	}
	_, rest, _ := strings.Cut(section, "```yaml\n")
	file, rest, _ = strings.Cut(rest, "```")
	_, rest, _ = strings.Cut(rest, "```sh\n")
	cmd, _, _ := strings.Cut(rest, "```")
	if !strings.Contains(file, "enableEviction: true") || cmd == "" {
		t.Fatalf("the section's yaml and sh blocks were not found:\n%s", section)
	}
	fields := strings.Fields(strings.ReplaceAll(cmd, "\\\n", " "))
	if len(fields) < 3 || strings.Join(fields[:3], " ") != "go run ./cmd/sluice-gateway" {
		t.Fatalf("the section's command %q does not run the gateway", cmd)
	}
	for _, a := range fields[3:] {
		if a == "eviction.yaml" {
			a = path
		}
		args = append(args, a)
	}
	return file, args
}

// The README's eviction file and command run as the README says: llm-d's
// enableEviction with its defaults, objectives classified into bands 10
// and -1, a waiting interactive request revoking the batch request that
// holds the slot, and the revocation counted on /metrics.
func TestREADMEEvictionExample(t *testing.T) {
	path := filepath.Join(t.TempDir(), "eviction.yaml")
	file, args := readmeEviction(t, path)
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	// As written, the command gates on the servers' slots, so eviction
	// frees running slots and the gateway has nothing to warn of; without
	// -max-inflight, behind the default saturation gate, it warns.
	written, err := parseFlags(args, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := load(written)
	if err != nil {
		t.Fatal(err)
	}
	if ws.gate.MaxInFlight == nil || *ws.gate.MaxInFlight != 16 || ws.gate.Saturation != nil {
		t.Errorf("the README's command runs the gate %s, want maxInFlight 16: the two servers' 8 slots each", ws.gate)
	}
	for _, w := range ws.warnings {
		if strings.Contains(w, "eviction") {
			t.Errorf("the README's command warns %q", w)
		}
	}
	var bare []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-max-inflight" {
			i++
			continue
		}
		bare = append(bare, args[i])
	}
	if written, err = parseFlags(bare, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if ws, err = load(written); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ws.warnings, func(w string) bool {
		return strings.Contains(w, "flowControl.enableEviction: in-flight eviction behind the saturation gate alone")
	}) {
		t.Errorf("without -max-inflight: warnings %q, want the one on eviction behind the saturation gate", ws.warnings)
	}

	// One slot, so that the batch request fills the pool without model
	// servers to saturate: the file's eviction is what is tested.
	opts, err := parseFlags(append(args, "-max-inflight", "1"), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := load(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.file.Warnings) != 0 {
		t.Errorf("warnings %q, want none", s.file.Warnings)
	}
	if s.flow.Eviction == nil || *s.flow.Eviction != (flowcontrol.Eviction{}) {
		t.Fatalf("eviction %+v, want llm-d's defaults, flowcontrol.Eviction{}", s.flow.Eviction)
	}
	for objective, want := range map[string]int{"interactive": 10, "batch": -1} {
		h := http.Header{"X-Llm-D-Inference-Objective": {objective}}
		if got := opts.classifier.FlowKey(h).Priority; got != want || !hasBand(s.flow.Bands, want) {
			t.Errorf("objective %s: priority %d (bands %s), want band %d", objective, got, describeBands(s.flow), want)
		}
	}

	g, err := newGateway(opts, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer g.fc.Close()
	g.pool.reach(g.pool.list()[0]) // the backend is up, as a first connection would make it

	ctx := context.Background()
	batch, err := g.fc.EnqueueAndWait(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "dispatcher", Priority: -1}})
	if err != nil {
		t.Fatal(err)
	}
	var chat *flowcontrol.Admission
	g.fc.Submit(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "user", Priority: 10}}, func(a *flowcontrol.Admission, _ error) { chat = a })
	select {
	case <-batch.Revoked():
	default:
		t.Fatal("the batch request holding the slot was not revoked for the interactive one")
	}
	if err := batch.Err(); !errors.Is(err, flowcontrol.ErrEvictedPriority) {
		t.Errorf("the revoked admission's error %v, want evicted-priority", err)
	}
	if got := gathered(t, g, "flow_control_revocations_issued_total", "priority", "10"); got != 1 {
		t.Errorf("revocations_issued_total{priority=10} = %v, want 1", got)
	}
	batch.Done() // the holder stops the request
	if chat == nil {
		t.Fatal("the interactive request did not start once the batch one stopped")
	}
	chat.Done()
	if got := gathered(t, g, "flow_control_revocations_total", "outcome", "confirmed"); got != 1 {
		t.Errorf("revocations_total{outcome=confirmed} = %v, want 1", got)
	}
}

// gathered returns the value of the counter family name (without the
// prefix) of g's registry whose label has value; -1 when there is none.
func gathered(t *testing.T, g *gateway, name, label, value string) float64 {
	t.Helper()
	families, err := g.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metrics.Prefix+name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// The README's file for servers that preempt (preempt.yaml) loads with
// nothing to warn of beside -priority-handoff, and runs as it says:
// behind the saturation gate batch starts as llm-d's rule lets it, and,
// with the hand-off, interactive requests pass the work batch queued
// while fewer of them than the two servers' 16 declared slots are in
// flight.
func TestREADMEPreemptExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## Interactive traffic beside a batch dispatcher\n")
	_, rest, ok := strings.Cut(section, "```yaml\n# preempt.yaml")
	if !ok {
		t.Fatal("the section has no preempt.yaml")
	}
	file, _, _ := strings.Cut(rest, "```")
	f, err := config.Parse([]byte("# preempt.yaml" + file))
	if err != nil {
		t.Fatalf("preempt.yaml: %v", err)
	}
	handoff := flowhttp.PriorityHandoff{Enabled: true}
	if ws, err := f.Check(config.Running{Flow: f.Flow, Gate: f.Gate, PriorityHandoff: handoff}); err != nil || len(ws) != 0 || len(f.Warnings) != 0 {
		t.Fatalf("preempt.yaml: %v, warnings %q %q; want none", err, f.Warnings, config.WarningStrings(ws))
	}
	clock := clocktest.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg, gs, err := f.Controller(config.BuildOptions{Endpoints: 2, Clock: clock, PriorityScheduling: handoff.Enabled})
	if err != nil {
		t.Fatal(err)
	}
	fc, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	gs.Saturation.Update("a", gate.Metrics{Running: 8, Waiting: 5}) // full by llm-d's rule
	gs.Saturation.Update("b", gate.Metrics{Running: 8, Waiting: 3}) // room for 2
	var admissions []*flowcontrol.Admission
	submit := func(priority, n int) {
		for range n {
			fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{Priority: priority}},
				func(a *flowcontrol.Admission, err error) {
					if err == nil {
						admissions = append(admissions, a)
					}
				})
		}
	}
	submit(-1, 5)
	if got := fc.InFlight(); got != 2 {
		t.Errorf("batch: %d started, want the 2 places left in the queues", got)
	}
	submit(10, 20)
	if got := fc.InFlight(); got != 2+16 {
		t.Errorf("interactive: %d in flight, want 16 (the declared slots) started beside batch's 2", got)
	}
	for _, a := range admissions {
		a.Done()
	}
}
