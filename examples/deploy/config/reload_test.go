package config

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestReload(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	called := false
	var recorded []error
	record := func(err error) { recorded = append(recorded, err) }
	apply := func(changes, warnings []string, err error) func() ([]string, []string, error) {
		return func() ([]string, []string, error) {
			called = true
			return changes, warnings, err
		}
	}

	if err := Reload(log, "", apply(nil, nil, nil), record); !errors.Is(err, ErrNoConfigFile) || called {
		t.Errorf("without a file: %v, apply called %t; want ErrNoConfigFile, not called", err, called)
	}

	bad := errors.New("line 3: unknown key")
	if err := Reload(log, "f.yaml", apply(nil, nil, bad), record); err != bad {
		t.Errorf("refused: %v, want %v", err, bad)
	}
	if !strings.Contains(logs.String(), `level=ERROR msg="configuration reload refused; the running configuration stays" file=f.yaml error="line 3: unknown key"`) {
		t.Errorf("the refusal is not logged:\n%s", logs.String())
	}

	logs.Reset()
	if err := Reload(log, "f.yaml", apply([]string{"band 0 ttl 0s → 1s", "backends"}, []string{"deprecated key"}, nil), record); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`level=INFO msg="configuration reloaded" file=f.yaml changes="band 0 ttl 0s → 1s; backends"`,
		`level=WARN msg=configuration warning="deprecated key"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}

	logs.Reset()
	if err := Reload(log, "f.yaml", apply(nil, nil, nil), nil); err != nil || !strings.Contains(logs.String(), `changes=none`) {
		t.Errorf("no change: %v, log:\n%s", err, logs.String())
	}
	if len(recorded) != 2 || recorded[0] != bad || recorded[1] != nil {
		t.Errorf("recorded %v, want [%v <nil>]: the refusal and the success, not the missing file", recorded, bad)
	}
}
