// Package clitest holds the command-line checks that the tests of Sluice's
// binaries (sluice-gateway, sluice-extproc) share: -h, -version, flags
// that must be refused, and running the built program. Only tests import
// it.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Main is a program's whole run, as its main calls it: the arguments
// after the program name, the standard output and error, and the exit
// code it returns.
type Main func(args []string, stdout, stderr io.Writer) int

// Usage checks that -h exits 0, prints nothing on stderr and a usage on
// stdout that holds each of want.
func Usage(t *testing.T, run Main, want ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	Holds(t, "usage", stdout.String(), want...)
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q, want nothing", stderr.String())
	}
}

// Holds fails the test for each of want that out, what a program printed
// (named by what), does not hold.
func Holds(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// Version checks that -version exits 0 and prints exactly want, and
// nothing on stderr.
func Version(t *testing.T, run Main, want string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-version"}, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
		t.Fatalf("-version: exit %d, stderr %q", code, stderr.String())
	}
	if stdout.String() != want {
		t.Errorf("-version printed %q, want %q", stdout.String(), want)
	}
}

// BadArgs checks, in a subtest named for each case, that the arguments of
// the case exit 2 with a message on stderr.
func BadArgs(t *testing.T, run Main, cases map[string][]string) {
	t.Helper()
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != 2 {
				t.Errorf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if stderr.Len() == 0 {
				t.Error("no message on stderr")
			}
		})
	}
}

// Exec runs the program at path with args, and env added to this
// process's environment, within a minute; it returns the exit code and
// what the program printed. A program that cannot be started fails the
// test.
func Exec(t *testing.T, path string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	if env != nil {
		cmd.Env = append(cmd.Environ(), env...)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// Refusal is arguments a program refuses, and what its message must hold.
type Refusal struct {
	Args []string
	Want string
}

// CheckRefuses checks that exec, run with -check-config and the
// arguments of each refusal, exits 2, prints nothing on stdout and names
// the reason on stderr.
func CheckRefuses(t *testing.T, exec func(t *testing.T, args ...string) (int, string, string), refusals []Refusal) {
	t.Helper()
	for _, r := range refusals {
		code, stdout, stderr := exec(t, append([]string{"-check-config"}, r.Args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, r.Want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, nothing, and %q", r.Args, code, stdout, stderr, r.Want)
		}
	}
}

// CheckPrints runs exec with args, a -check-config run that must succeed,
// and returns what it printed on stdout. It fails the test at once unless
// the run exits 0 with nothing on stderr, and fails it if a second run
// prints other bytes.
func CheckPrints(t *testing.T, exec func(t *testing.T, args ...string) (int, string, string), args ...string) string {
	t.Helper()
	code, stdout, stderr := exec(t, args...)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	if _, again, _ := exec(t, args...); again != stdout {
		t.Errorf("a second run printed other bytes:\n%s\nthen:\n%s", stdout, again)
	}
	return stdout
}

// Taken returns n loopback addresses that are taken, listened on until the
// test ends, for a run that must not start serving: a real start on any of
// them would fail.
func Taken(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}
