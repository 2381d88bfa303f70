package config

import (
	"flag"
	"io"
	"net/url"
	"strings"
	"testing"
)

func TestBackendsAndObjectivesFlags(t *testing.T) {
	var backends []*url.URL
	var objectives map[string]int
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(BackendsFlag{URLs: &backends}, "backend", "")
	fs.Var(ObjectivesFlag{Objectives: &objectives}, "objective", "")
	if err := fs.Parse([]string{"-backend", "http://127.0.0.1:8001", "-backend", "https://h:8002/v", "-objective", "chat=10", "-objective", "batch=-10"}); err != nil {
		t.Fatal(err)
	}
	if got := (BackendsFlag{URLs: &backends}).String(); got != "http://127.0.0.1:8001 https://h:8002/v" {
		t.Errorf("backends %q", got)
	}
	if len(objectives) != 2 || objectives["chat"] != 10 || objectives["batch"] != -10 {
		t.Errorf("objectives %v", objectives)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "ftp://h"}, "want an http or https URL"},
		{[]string{"-backend", "http://"}, "want an http or https URL"},
		{[]string{"-backend", "http://127.0.0.1:8001"}, "given twice"},
		{[]string{"-objective", "chat"}, "want name=priority"},
		{[]string{"-objective", "x=high"}, "not an integer"},
		{[]string{"-objective", "chat=1"}, "given twice"},
	} {
		if err := fs.Parse(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
