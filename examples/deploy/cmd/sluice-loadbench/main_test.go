//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestMain makes the test binary the benchmark's child processes too, as
// main does: the benchmark starts itself again (os.Executable).
func TestMain(m *testing.M) {
	if js := os.Getenv(childEnv); js != "" {
		var cfg childConfig
		if err := json.Unmarshal([]byte(js), &cfg); err != nil {
			os.Exit(2)
		}
		os.Exit(runChild(cfg))
	}
	os.Exit(m.Run())
}

// TestRun runs the whole command briefly, end to end: it builds the
// gateway, starts the four targets, drives them, and prints both tables
// with a row for every target, every request answered 200. It shows the
// command works, not how fast anything is.
func TestRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"-rates", "50,100", "-duration", "200ms", "-rounds", "2", "-warmup", "100ms",
		"-sse-rate", "20", "-sse-delay", "20ms", "-sse-interval", "1ms", "-sse-events", "2"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	out := stdout.String()
	for _, rate := range []string{"50/s", "100/s", "20/s"} {
		for _, name := range []string{nameBackend, nameProxy, nameGateway, nameSaturation} {
			row := "| " + rate + " | " + name + " | "
			line := ""
			for l := range strings.Lines(out) {
				if strings.HasPrefix(l, row) {
					line = l
				}
			}
			if line == "" {
				t.Errorf("no row %q in\n%s", row, out)
				continue
			}
			// The non-200 column: every request answered 200.
			if cols := strings.Split(line, " | "); len(cols) < 11 || cols[10] != "0" {
				t.Errorf("row %q: non-200 not 0: %q", row, line)
			}
		}
	}
	if !strings.Contains(out, "TTFB p99") {
		t.Errorf("no streamed table in\n%s", out)
	}
}

// TestFlags checks that a bad flag is refused with exit 2, naming it.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rates", "500,x"}, "-rates"},
		{[]string{"-rates", "0"}, "-rates"},
		{[]string{"-duration", "0s"}, "-duration"},
		{[]string{"-rounds", "0"}, "-rounds"},
		{[]string{"-sse-events", "0"}, "-sse-events"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%q) = %d, stderr %q; want 2 and %q", tc.args, code, &stderr, tc.want)
		}
	}
}
