package config

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Effective.Write prints YAML whatever a warning or a path holds: quotes,
// newlines, bytes that are not UTF-8 come back as they went in.
func TestEffectiveWriteIsYAML(t *testing.T) {
	f, err := Load("testdata/sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	odd := "a \"quoted\" key: x\nnext line \xff é 🙂"
	e := Effective{
		Binary: "sluice-test", ConfigPath: "dir/with: colon.yaml", Form: f.Form,
		Listen:   [][2]string{{"http", "127.0.0.1:8080"}},
		Running:  Running{Flow: f.Flow, Gate: f.Gate, Backends: []string{"http://127.0.0.1:8000"}},
		Warnings: []string{odd},
	}
	var b strings.Builder
	if err := e.Write(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Config   string
		Warnings []string
		Gate     map[string]any
	}
	if err := yaml.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, b.String())
	}
	// YAML reads \xff as the code point U+00FF: what is kept is that
	// nothing is lost or runs into the next key.
	if got.Config != e.ConfigPath || len(got.Warnings) != 1 || !strings.HasPrefix(got.Warnings[0], "a \"quoted\" key: x\nnext line ") || !strings.HasSuffix(got.Warnings[0], " é 🙂") {
		t.Errorf("read back config %q, warnings %q", got.Config, got.Warnings)
	}
	if len(got.Gate) != 4 {
		t.Errorf("gate %v, want its four parts (testdata/sluice.yaml sets each)", got.Gate)
	}
	if !strings.HasPrefix(b.String(), "# sluice-test -check-config: the configuration is valid") {
		t.Errorf("first line:\n%s", b.String())
	}
}
