package main

import (
	"testing"
	"time"
)

// The no-endpoints TTL is the file's, in either form, and the gateway's
// short default when the file sets none.
func TestNoEndpointsTTL(t *testing.T) {
	noFile, err := load(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := noFile.flow.NoEndpointsTTL; got != defaultNoEndpointsTTL {
		t.Errorf("without a file: %s, want the default %s", got, defaultNoEndpointsTTL)
	}
	for _, tc := range []struct {
		name, text string
		want       time.Duration
	}{
		{"sluice, unset", "controller:\n  defaultTTL: 30s\n", defaultNoEndpointsTTL},
		{"sluice, set", "controller:\n  noEndpointsTTL: 2s\n", 2 * time.Second},
		{"sluice, 0s: the TTL alone", "controller:\n  noEndpointsTTL: 0s\n", 0},
		{"llm-d, unset", "flowControl:\n  defaultRequestTTL: 45s\n", defaultNoEndpointsTTL},
		{"llm-d, set", "flowControl:\n  defaultRequestTTL: 45s\n  noEndpointRequestTTL: 20s\n", 20 * time.Second},
		// llm-d-router would wait longer than the TTL; Sluice waits the
		// TTL, and the loader warns.
		{"llm-d, longer than the TTL", "flowControl:\n  defaultRequestTTL: 45s\n  noEndpointRequestTTL: 5m\n", 0},
	} {
		if got := loadText(t, tc.text).flow.NoEndpointsTTL; got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
