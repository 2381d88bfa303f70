package config

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// parseShared parses args with the shared flags alone.
func parseShared(args ...string) (Flags, map[string]bool, string, error) {
	var f Flags
	fs := flag.NewFlagSet("sluice-test", flag.ContinueOnError)
	SetUsage(fs, "Usage: sluice-test\n", "")
	f.Register(fs)
	var stdout, stderr bytes.Buffer
	given, err := f.Parse(fs, args, &stdout, &stderr)
	return f, given, stdout.String() + stderr.String(), err
}

func TestFlagsDefaults(t *testing.T) {
	f, given, out, err := parseShared()
	if err != nil || out != "" {
		t.Fatalf("no flags: %v, output %q", err, out)
	}
	if len(given) != 0 || f.GracePeriod != DefaultGracePeriod || f.GracePeriodSet || f.LogLevel != slog.LevelInfo || f.ConfigPath != "" || len(f.Backends) != 0 {
		t.Errorf("defaults %+v, given %v", f, given)
	}
}

// The grace period has one name, -grace-period; sluice-extproc's old
// -shutdown-timeout is gone, an unknown flag like any other.
func TestGracePeriod(t *testing.T) {
	f, given, _, err := parseShared("-grace-period", "7s")
	if err != nil {
		t.Fatalf("-grace-period 7s: %v", err)
	}
	if f.GracePeriod != 7*time.Second || !f.GracePeriodSet || !given["grace-period"] {
		t.Errorf("-grace-period 7s: grace %v, set %v, given %v", f.GracePeriod, f.GracePeriodSet, given)
	}
	if _, _, out, err := parseShared("-grace-period", "-1s"); err == nil || !strings.Contains(out, "-grace-period -1s: negative") {
		t.Errorf("-grace-period -1s: error %v, output %q: want one naming the flag", err, out)
	}
	if _, _, out, err := parseShared("-shutdown-timeout", "2s"); err == nil || !strings.Contains(out, "-shutdown-timeout") {
		t.Errorf("-shutdown-timeout 2s: error %v, output %q: want the unknown flag named", err, out)
	}
	_, _, out, err := parseShared("-h")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if !strings.Contains(out, "Usage: sluice-test") || !strings.Contains(out, "-grace-period duration") || strings.Contains(out, "shutdown-timeout") {
		t.Errorf("-h:\n%s", out)
	}
}

func TestFlagsErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-log-level", "loud"}, "-log-level"},
		{[]string{"-priority-header", "bad header"}, "-priority-header"},
		{[]string{"serve"}, "unexpected arguments"},
		{[]string{"-nope"}, "-nope"},
	} {
		_, _, out, err := parseShared(tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: error %v, output %q: want one containing %q", tc.args, err, out, tc.want)
		}
	}
	f, _, _, err := parseShared("-log-level", "debug", "-priority-header", "x-priority", "-objective", "chat=10", "-pool", "p", "-emit-provisional-headroom")
	if err != nil {
		t.Fatal(err)
	}
	if f.LogLevel != slog.LevelDebug || f.Classifier.PriorityHeader != "x-priority" || f.Classifier.Objectives["chat"] != 10 || f.Pool != "p" || !f.EmitProvisionalHeadroom {
		t.Errorf("parsed %+v", f)
	}
}

func TestDrainDelayFlag(t *testing.T) {
	f, _, _, err := parseShared()
	if err != nil || f.DrainDelay != DefaultDrainDelay || f.DrainDelaySet {
		t.Fatalf("default: %v, delay %v, set %v", err, f.DrainDelay, f.DrainDelaySet)
	}
	if f, _, _, err = parseShared("-drain-delay", "0"); err != nil || f.DrainDelay != 0 || !f.DrainDelaySet {
		t.Errorf("-drain-delay 0: %v, delay %v, set %v", err, f.DrainDelay, f.DrainDelaySet)
	}
	if _, _, out, err := parseShared("-drain-delay", "-1s"); err == nil || !strings.Contains(out, "-drain-delay -1s: negative") {
		t.Errorf("-drain-delay -1s: error %v, output %q", err, out)
	}
}

// -version prints one line to stdout and parses as -h does, so that the
// binary exits 0 without starting.
func TestVersionFlag(t *testing.T) {
	_, _, out, err := parseShared("-version")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-version: %v", err)
	}
	b := ReadBuildInfo()
	if want := "sluice-test version=" + b.Version + " revision=" + b.Revision + " goversion=" + b.GoVersion + " "; !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
		t.Errorf("-version printed %q, want one line starting %q", out, want)
	}
	if !strings.HasPrefix(b.GoVersion, "go1.") {
		t.Errorf("Go version %q", b.GoVersion)
	}
}

func TestInferencePathFlag(t *testing.T) {
	f, _, _, err := parseShared()
	if err != nil || f.InferenceRoutes.String() != DefaultInferenceRoutes().String() {
		t.Fatalf("default: %v, routes %q", err, f.InferenceRoutes)
	}
	f, _, _, err = parseShared("-inference-path", "POST /v1/rerank", "-inference-path", "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.InferenceRoutes.String(); got != "POST /v1/rerank, /v2/" {
		t.Errorf("routes %q: the first flag replaces the defaults, the next adds", got)
	}
	if _, _, out, err := parseShared("-inference-path", "v1/chat"); err == nil || !strings.Contains(out, "-inference-path") {
		t.Errorf("relative path: error %v, output %q", err, out)
	}
}
