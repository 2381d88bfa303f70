package config

import (
	"math"
	"testing"
)

func TestParseQuantity(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"100", 100, true},
		{"+3", 3, true},
		{"-0", 0, true},
		{"1k", 1000, true},
		{"1.5k", 1500, true},
		{"1Ki", 1024, true},
		{"4Mi", 4 << 20, true},
		{"1Gi", 1 << 30, true},
		{"1G", 1_000_000_000, true},
		{"2T", 2_000_000_000_000, true},
		{"1Ei", 1 << 60, true},
		{"7Ei", 7 << 60, true},
		{"8Ei", 0, false}, // 2^63 is past int64
		{"9223372036854775807", math.MaxInt64, true},
		{"9223372036854775808", 0, false},
		{".5", 1, true}, // rounds up, as Quantity.Value does
		{"5.", 5, true},
		{"1500m", 2, true},
		{"1u", 1, true},
		{"1n", 1, true},
		{"1e3", 1000, true},
		{"1E3", 1000, true},
		{"1e-3", 1, true},
		{"2.5e+2", 250, true},
		{"0.000001e24", 1_000_000_000_000_000_000, true},
		{"1e65", 0, false},
		{"0e99", 0, false},
		{"", 0, false},
		{"k", 0, false},
		{".", 0, false},
		{"-5", 0, false},
		{"-1k", 0, false},
		{"1.2.3", 0, false},
		{"1e", 0, false},
		{"1e1.5", 0, false},
		{"1KB", 0, false},
		{"1 k", 0, false},
		{"0x10", 0, false},
		{"unbounded", 0, false},
	} {
		got, err := parseQuantity(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseQuantity(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
