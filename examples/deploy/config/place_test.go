package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// problems returns every *Error in err, failing on anything else but the
// count of problems not shown.
func problems(t testing.TB, err error) []*Error {
	t.Helper()
	var errs []error
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		errs = u.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []*Error
	for _, e := range errs {
		var ce *Error
		if !errors.As(e, &ce) {
			if strings.HasSuffix(e.Error(), "more problems not shown") {
				continue
			}
			t.Fatalf("problem %q is not an *Error", e)
		}
		out = append(out, ce)
	}
	return out
}

// checkPlaced fails unless every problem in err has a line and a column.
func checkPlaced(t testing.TB, doc []byte, err error) {
	t.Helper()
	for _, e := range problems(t, err) {
		if e.Line < 1 || e.Column < 1 {
			t.Fatalf("Parse(%q): problem %q has no place (line %d, column %d)", doc, e, e.Line, e.Column)
		}
	}
}

// Issue 21, defect 11: a NUL or BEL byte, or a scrape interval at or over
// the default staleness, named the file but not the line. Every problem
// names FILE:LINE:COL.
func TestEveryProblemNamesItsLine(t *testing.T) {
	for _, tc := range []struct {
		name       string
		yaml       string
		line, col  int
		path, says string
	}{
		{"NUL byte", "controller: {}\x00\n", 1, 15, "", "control character U+0000"},
		{"BEL byte", "controller:\n  bands:\n  - priority: 0\x07\n", 3, 16, "", "control character U+0007"},
		{"escape byte", "gateway:\n  listen: \"\x1b[31m\"\n", 2, 12, "", "control character U+001B"},
		{"DEL byte", "gateway:\n  listen: a\x7f\n", 2, 12, "", "control character U+007F"},
		{"C1 control", "gateway:\n  listen: \"\u00e9\u0080\"\n", 2, 13, "", "control character U+0080"},
		{"not UTF-8", "gateway:\n  listen: \"\xff\"\n", 2, 12, "", "not valid UTF-8"},
		{"cut UTF-8", "gateway:\n  listen: \"\xc3\"\n", 2, 12, "", "not valid UTF-8"},
		{"alias of no anchor", "controller:\n  bands: *nothing\n", 2, 10, "", "unknown anchor"},
		{"tab indentation", "controller:\n  bands:\n\t- priority: 0\n", 3, 2, "", "found character that cannot start any token"},
		{"unclosed flow list", "controller: [\n", 1, 1, "", "did not find expected node content"},
		{"scrape interval at the default staleness", "gateway:\n  scrapeInterval: 200ms\ngate:\n  saturation: {}\n",
			2, 3, "gateway.scrapeInterval", "200ms is not below the saturation gate's metricsStalenessThreshold 200ms"},
		{"scrape interval over the default staleness", "gate:\n  saturation: {queueDepthThreshold: 3}\ngateway: {scrapeInterval: 1s}\n",
			3, 11, "gateway.scrapeInterval", "1s is not below"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "f.yaml")
			if err := os.WriteFile(name, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(name)
			if err == nil {
				t.Fatalf("Load(%q) succeeded", tc.yaml)
			}
			ps := problems(t, err)
			if len(ps) != 1 {
				t.Fatalf("Load(%q): %d problems, want 1: %v", tc.yaml, len(ps), err)
			}
			e := ps[0]
			if e.File != name || e.Line != tc.line || e.Column != tc.col || e.Path != tc.path || !strings.Contains(e.Msg, tc.says) {
				t.Errorf("Load(%q) = %+v, want %s:%d:%d, path %q, saying %q", tc.yaml, e, name, tc.line, tc.col, tc.path, tc.says)
			}
			if prefix := fmt.Sprintf("config: %s:%d:%d: ", name, tc.line, tc.col); !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
		})
	}
}

// A binary's own checks, made once flags and defaults are applied, name
// the line too.
func TestErrorAtNamesTheLine(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f.yaml")
	if err := os.WriteFile(name, []byte("# the gateway\ngateway:\n  listen: 127.0.0.1:9000\n  scrapeInterval: 250ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want string
	}{
		{"gateway.scrapeInterval", name + ":4:3: gateway.scrapeInterval: too slow for 200ms"},
		{"gateway.scrapeTimeout", name + ":2:1: gateway.scrapeTimeout: too slow for 200ms"}, // unwritten: its section
		{"gate.saturation", name + ":1:1: gate.saturation: too slow for 200ms"},             // no section: the file
	} {
		if got := f.ErrorAt(tc.path, "too slow for %s", 200*time.Millisecond).Error(); got != "config: "+tc.want {
			t.Errorf("ErrorAt(%q) = %q, want %q", tc.path, got, "config: "+tc.want)
		}
	}
	parsed, err := Parse([]byte("gateway:\n  scrapeInterval: 250ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := parsed.ErrorAt("gateway.scrapeInterval", "x").Error(), "config: line 2, column 3: gateway.scrapeInterval: x"; got != want {
		t.Errorf("ErrorAt on a parsed file = %q, want %q", got, want)
	}
	if got, want := (&File{}).ErrorAt("gateway", "x").Error(), "config: line 1, column 1: gateway: x"; got != want {
		t.Errorf("ErrorAt on a File built by hand = %q, want %q", got, want)
	}
}

// Property: whatever forbidden byte is put wherever in a good file, the
// problem is reported at exactly that place; and every problem of every
// broken file has a place.
func TestForbiddenBytesAreReportedWhereTheyAre(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files: %v", err)
	}
	var bad []byte
	for b := range 0x20 {
		if b != '\t' && b != '\n' && b != '\r' {
			bad = append(bad, byte(b))
		}
	}
	bad = append(bad, 0x7f, 0xff, 0xc3)
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range bad {
			for off := i % 13; off < len(data); off += 37 {
				doc := append(append(append([]byte{}, data[:off]...), b), data[off:]...)
				_, err := Parse(doc)
				if err == nil {
					t.Fatalf("%s with byte 0x%02X at %d parsed", name, b, off)
				}
				checkPlaced(t, doc, err)
				line, col := position(doc, off)
				e := problems(t, err)[0]
				if e.Line != line || e.Column != col {
					t.Fatalf("%s with byte 0x%02X at %d: %v, want line %d, column %d", name, b, off, err, line, col)
				}
			}
		}
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		// Cut each file short everywhere, and garble each line's indent.
		for off := 0; off < len(data); off += 11 {
			if _, err := Parse(data[:off]); err != nil {
				checkPlaced(t, data[:off], err)
			}
			doc := append(append(append([]byte{}, data[:off]...), " : ["...), data[off:]...)
			if _, err := Parse(doc); err != nil {
				checkPlaced(t, doc, err)
			}
		}
	}
}
