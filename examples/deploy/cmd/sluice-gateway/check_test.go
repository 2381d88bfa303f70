package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/internal/clitest"
)

// runCheck runs the built binary with args and returns its exit code,
// stdout and stderr.
func runCheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Exec(t, buildGateway(t), nil, args...)
}

// -check-config prints what would run and the file's warnings, exits 0,
// and starts nothing: the address it is given is taken, which a real
// start would fail on.
func TestBinaryCheckConfigPrintsWhatWouldRun(t *testing.T) {
	taken := clitest.Taken(t, 1)
	args := []string{"-check-config", "-config", "../../config/testdata/llmd-probabilistic-admitter.yaml",
		"-backend", "http://127.0.0.1:8001", "-listen", taken[0], "-grace-period", "7s"}
	stdout := clitest.CheckPrints(t, runCheck, args...)
	var out struct {
		Config, Form string
		Listen       map[string]string
		Backends     []string
		GracePeriod  string `yaml:"gracePeriod"`
		Controller   struct {
			DefaultTTL string `yaml:"defaultTTL"`
			Bands      []struct {
				Priority    int
				MaxRequests string `yaml:"maxRequests"`
				TTL         string
				Ordering    string
			}
		}
		Gate struct {
			Saturation struct {
				QueueDepthThreshold int `yaml:"queueDepthThreshold"`
			}
		}
		Warnings []string
	}
	if err := yaml.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("the output is not YAML: %v\n%s", err, stdout)
	}
	if out.Form != "llm-d" || out.Listen["http"] != taken[0] || len(out.Backends) != 1 || out.GracePeriod != "7s" ||
		out.Controller.DefaultTTL != "1m0s" || len(out.Controller.Bands) != 1 || out.Controller.Bands[0].MaxRequests != "5000" ||
		out.Controller.Bands[0].TTL != "1m0s" || out.Gate.Saturation.QueueDepthThreshold != 999999999 {
		t.Errorf("the output does not say what runs: %+v\n%s", out, stdout)
	}
	if len(out.Warnings) != 4 || !strings.Contains(out.Warnings[0], "llmd-probabilistic-admitter.yaml:8:1: featureGates: llm-d-router runs flow control only with") ||
		!strings.Contains(out.Warnings[1], "llmd-probabilistic-admitter.yaml:10:3: plugins[0]") ||
		!strings.Contains(out.Warnings[1], "effectively no admission control") {
		t.Errorf("warnings %q, want the file's four, the feature gate's first, then the admitter's", out.Warnings)
	}

	// llm-d-router's soft-reflective-ceiling sample, refused before band
	// ceilings, runs with its ceiling.
	if code, stdout, stderr := runCheck(t, "-check-config", "-config", "../../config/testdata/llmd-soft-reflective-ceiling.yaml"); code != 0 ||
		!strings.Contains(stdout, "  usageLimit:\n    type: soft-reflective-ceiling-policy\n") {
		t.Errorf("-check-config of the soft-reflective sample: exit %d, stderr %q, stdout:\n%s\nwant 0 and its usage limit", code, stderr, stdout)
	}

	// Flags win over the file, and a run without a file prints the
	// defaults; without a backend, it says so.
	_, stdout, _ = runCheck(t, "-check-config", "-max-inflight", "7")
	clitest.Holds(t, "-check-config -max-inflight 7", stdout, "config: none\n", "gate:\n  maxInFlight: 7\n", "  - priority: 0\n    maxRequests: 5000\n", "warnings:\n  - \"sluice-gateway: no backend: ")
}

// A file that does not parse, or that the gateway refuses once the flags
// apply, exits 2 with the place on stderr and prints nothing on stdout.
func TestBinaryCheckConfigExits2OnAnError(t *testing.T) {
	clitest.CheckRefuses(t, runCheck, []clitest.Refusal{
		{Args: []string{"-config", "../../config/testdata/bad-duration.yaml"}, Want: "bad-duration.yaml:4:15: controller.defaultTTL"},
		{Args: []string{"-config", "../../config/testdata/bad-plugin-type.yaml"}, Want: "bad-plugin-type.yaml:12:24: flowControl.priorityBands[0].fairnessPolicyRef"},
		{Args: []string{"-max-tokens", "0"}, Want: "-max-tokens 0"},
	})
}

// Eviction the gateway would run behind its default saturation gate is
// a warning at the file's key, printed by -check-config; -max-inflight,
// a gate that counts slots, removes it. Eviction with no band to take
// victims from, over the bands the gateway provisions, is refused at the
// key.
func TestBinaryCheckConfigJudgesEvictionBehindItsGate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	evict := write("evict.yaml", "controller:\n  eviction: true\n  bands: [{priority: 10}, {priority: 0}, {priority: -1}]\n")
	stdout := clitest.CheckPrints(t, runCheck, "-check-config", "-config", evict, "-backend", "http://127.0.0.1:8001")
	clitest.Holds(t, "eviction behind the default gate", stdout,
		"evict.yaml:2:3: controller.eviction: in-flight eviction behind the saturation gate alone, which counts no slots")
	stdout = clitest.CheckPrints(t, runCheck, "-check-config", "-config", evict, "-backend", "http://127.0.0.1:8001", "-max-inflight", "64")
	if strings.Contains(stdout, "controller.eviction") {
		t.Errorf("behind -max-inflight 64 the eviction warning stays:\n%s", stdout)
	}

	llmd := write("llmd.yaml", "featureGates: [flowControl]\nflowControl:\n  enableEviction: true\n")
	clitest.CheckRefuses(t, runCheck, []clitest.Refusal{
		{Args: []string{"-config", llmd, "-max-inflight", "8"}, Want: "llmd.yaml:3:3: flowControl.enableEviction: in-flight eviction over one band (priority 0) never revokes"},
	})
	// A classifier that gives priority -1 makes the gateway provision its
	// band, from which eviction can take victims.
	clitest.CheckPrints(t, runCheck, "-check-config", "-config", llmd, "-max-inflight", "8", "-backend", "http://127.0.0.1:8001", "-default-priority", "-1")
}

// -check-config says which fleet the gateway is a replica of, the flags
// over the file, and that it runs alone without one; never a password.
func TestBinaryCheckConfigPrintsTheFleet(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "password")
	if err := os.WriteFile(secret, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, filepath.Join(dir, "fleet.yaml"), "gateway:\n  fleet:\n    redis: 127.0.0.1:6390\n    period: 250ms\n    replicas: 3\n    overdraft: 2\n")
	stdout := clitest.CheckPrints(t, runCheck, "-check-config", "-config", path, "-backend", "http://127.0.0.1:8001",
		"-max-inflight", "12", "-fleet-id", "gw-a", "-fleet-replicas", "2", "-fleet-redis-password-file", secret)
	var out struct {
		Fleet struct {
			Redis, ID, Prefix, Period, Lease string
			PasswordFile                     string `yaml:"passwordFile"`
			Replicas, Overdraft              int
		}
	}
	if err := yaml.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("the output is not YAML: %v\n%s", err, stdout)
	}
	f := out.Fleet
	if f.Redis != "127.0.0.1:6390" || f.ID != "gw-a" || f.Replicas != 2 || f.Period != "250ms" || f.Lease != "750ms" || f.Prefix == "" || f.PasswordFile != secret || f.Overdraft != 2 {
		t.Errorf("the output does not say which fleet runs: %+v\n%s", f, stdout)
	}
	if strings.Contains(stdout, "hunter2") {
		t.Errorf("the output holds the password:\n%s", stdout)
	}
	const passes = "a band also passes this replica's share"
	if strings.Contains(stdout, passes) {
		t.Errorf("without the hand-off the output says a band passes the share:\n%s", stdout)
	}
	stdout = clitest.CheckPrints(t, runCheck, "-check-config", "-config", path, "-backend", "http://127.0.0.1:8001",
		"-max-inflight", "12", "-fleet-id", "gw-a", "-priority-handoff")
	if !strings.Contains(stdout, passes) || !strings.Contains(stdout, "fleet.Config.PriorityScheduling") {
		t.Errorf("with the hand-off the output does not say a band passes the share:\n%s", stdout)
	}
	stdout = clitest.CheckPrints(t, runCheck, "-check-config", "-backend", "http://127.0.0.1:8001")
	if !strings.Contains(stdout, "\nfleet: none #") {
		t.Errorf("without a fleet the output does not say the gateway runs alone:\n%s", stdout)
	}
}
