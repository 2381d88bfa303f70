package main

import (
	"os"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/internal/clitest"
)

// runCheck runs the program in a child process with args and returns its
// exit code, stdout and stderr.
func runCheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Exec(t, os.Args[0], []string{beMain + "=1"}, args...)
}

// -check-config prints what would run, the file's warnings and the
// adapter's own, exits 0, and starts nothing: both addresses it is given
// are taken, which a real start would fail on.
func TestBinaryCheckConfigPrintsWhatWouldRun(t *testing.T) {
	addrs := clitest.Taken(t, 2)
	args := []string{"-check-config", "-config", "../../../deploy/config/testdata/llmd.yaml",
		"-backend", "http://127.0.0.1:8001", "-listen", addrs[0], "-metrics-listen", addrs[1]}
	stdout := clitest.CheckPrints(t, runCheck, args...)
	clitest.Holds(t, "the output", stdout,
		"form: \"llm-d\"\n",
		"listen:\n  grpc: \""+addrs[0]+"\"\n  metrics: \""+addrs[1]+"\"\n",
		"backends:\n  - \"http://127.0.0.1:8001\"\n",
		"  maxRequests: 2000\n  maxBytes: 8589934592\n",
		"  defaultTTL: 45s\n  noEndpointsTTL: 20s\n",
		"  - priority: 100\n    maxRequests: 400\n    maxBytes: 1000000000\n    maxCost: unbounded\n    maxFlowRequests: unbounded\n    ttl: 45s\n    ordering: edf-ordering-policy\n    queue: heap\n    fairness: round-robin-fairness-policy\n",
		"gate:\n  concurrency:\n    concurrencyMode: tokens\n    maxConcurrency: 128\n",
		"llmd.yaml:10:3: plugins[0]: plugin \\\"queue-scorer\\\"",
		"llmd.yaml:25:1: schedulingProfiles",
		"ext_proc sees no request bodies", // the adapter's own warning
	)
}

// A bad file, or flags the adapter refuses, exit 2 with the reason on
// stderr and nothing on stdout.
func TestBinaryCheckConfigExits2OnAnError(t *testing.T) {
	clitest.CheckRefuses(t, runCheck, []clitest.Refusal{
		{Args: []string{"-config", "../../../deploy/config/testdata/bad-duration.yaml"}, Want: "bad-duration.yaml:4:15: controller.defaultTTL"},
		{Args: []string{"-config", "../../../deploy/config/testdata/llmd-probabilistic-admitter.yaml"}, Want: "no backend is known"},
		{Args: []string{"-band", "priority=1"}, Want: "FallbackPriority 0: no band"},
	})
}

// The hand-off in -check-config: the mapping and each band's value, with
// a warning when the filter's body mode (-request-body-mode) cannot carry
// it; a mode that is not Envoy's is refused.
func TestBinaryCheckConfigPrintsHandoff(t *testing.T) {
	addrs := clitest.Taken(t, 2)
	base := []string{"-check-config", "-listen", addrs[0], "-metrics-listen", addrs[1],
		"-band", "priority=10", "-band", "priority=0", "-band", "priority=-1", "-priority-handoff"}
	const warning = "the priority hand-off is on, but Envoy sends the request body in mode NONE"
	stdout := clitest.CheckPrints(t, runCheck, base...)
	clitest.Holds(t, "the output", stdout,
		"priorityHandoff: # the body's top-level priority",
		"  map: default # priority = -band",
		"  bands: # the priority each band's requests carry to the model server\n    10: -10\n    0: 0\n    -1: 1\n",
		warning)
	stdout = clitest.CheckPrints(t, runCheck, append(base, "-request-body-mode", "BUFFERED")...)
	if strings.Contains(stdout, warning) || !strings.Contains(stdout, "    10: -10\n") {
		t.Errorf("-request-body-mode BUFFERED: the output warns, or lacks the mapping:\n%s", stdout)
	}
	clitest.CheckRefuses(t, runCheck, []clitest.Refusal{
		{Args: []string{"-request-body-mode", "buffered"}, Want: `-request-body-mode "buffered": want NONE, STREAMED, BUFFERED, BUFFERED_PARTIAL or FULL_DUPLEX_STREAMED`},
	})
}
