package headroom_test

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/headroom"
	"pgregory.net/rapid"
)

// The two header names in canonical form, written out so that the tests
// do not lean on the package's own constants.
const (
	canonical   = "X-Llm-D-Flow-Band-Headroom-Requests"
	provisional = "X-Llm-D-Flow-Band-Headroom"
)

func TestParse(t *testing.T) {
	valid := []struct {
		name string
		h    http.Header
		want int64
	}{
		{"canonical", http.Header{canonical: {"19"}}, 19},
		{"zero", http.Header{canonical: {"0"}}, 0},
		{"surrounding spaces and tabs", http.Header{canonical: {" \t19 \t"}}, 19},
		{"leading zeros are digits", http.Header{canonical: {"007"}}, 7},
		{"max int64", http.Header{canonical: {"9223372036854775807"}}, math.MaxInt64},
		{"lower-case key", http.Header{headroom.HeaderName: {"5"}}, 5},
		{"provisional name when canonical absent", http.Header{provisional: {"3"}}, 3},
		{"provisional name, lower case", http.Header{headroom.ProvisionalHeaderName: {"4"}}, 4},
		{"canonical wins over provisional", http.Header{canonical: {"1"}, provisional: {"2"}}, 1},
		{"empty canonical list falls back", http.Header{canonical: {}, provisional: {"2"}}, 2},
	}
	for _, tt := range valid {
		got, err := headroom.Parse(tt.h)
		if err != nil || got != tt.want {
			t.Errorf("%s: Parse(%q) = %d, %v; want %d", tt.name, tt.h, got, err, tt.want)
		}
	}

	absent := []http.Header{
		nil,
		{},
		{"X-Model": {"m1"}},
		{canonical: {}},
		{"X-Llm-D-Flow-Band-Headroom-Requests-Extra": {"1"}},
	}
	for _, h := range absent {
		if got, err := headroom.Parse(h); !errors.Is(err, headroom.ErrAbsent) || got != 0 {
			t.Errorf("Parse(%q) = %d, %v; want 0, ErrAbsent", h, got, err)
		}
	}

	malformed := map[string]http.Header{
		"empty":                        {canonical: {""}},
		"spaces only":                  {canonical: {"   "}},
		"negative":                     {canonical: {"-1"}},
		"plus sign":                    {canonical: {"+1"}},
		"fraction":                     {canonical: {"1.5"}},
		"exponent":                     {canonical: {"1e3"}},
		"hex":                          {canonical: {"0x10"}},
		"underscore":                   {canonical: {"1_000"}},
		"comma list":                   {canonical: {"1, 2"}},
		"inner space":                  {canonical: {"1 2"}},
		"trailing text":                {canonical: {"19req"}},
		"newline":                      {canonical: {"19\n"}},
		"non-ASCII digit":              {canonical: {"١٩"}},
		"one past max int64":           {canonical: {"9223372036854775808"}},
		"max uint64":                   {canonical: {"18446744073709551615"}},
		"far past max int64":           {canonical: {"99999999999999999999999"}},
		"two values":                   {canonical: {"1", "2"}},
		"same value twice":             {canonical: {"1", "1"}},
		"two keys differing in case":   {canonical: {"1"}, headroom.HeaderName: {"1"}},
		"malformed canonical, no fall": {canonical: {"x"}, provisional: {"2"}},
		"malformed provisional":        {provisional: {"-2"}},
	}
	for name, h := range malformed {
		got, err := headroom.Parse(h)
		if !errors.Is(err, headroom.ErrMalformed) || got != 0 {
			t.Errorf("%s: Parse(%q) = %d, %v; want 0 and ErrMalformed", name, h, got, err)
		}
		if errors.Is(err, headroom.ErrAbsent) {
			t.Errorf("%s: a malformed header reported as absent", name)
		}
	}
}

func TestParseErrorNamesHeaderAndValue(t *testing.T) {
	_, err := headroom.Parse(http.Header{"X-Llm-D-Flow-Band-Headroom": {"lots"}})
	if err == nil || !strings.Contains(err.Error(), headroom.ProvisionalHeaderName) || !strings.Contains(err.Error(), `"lots"`) {
		t.Fatalf("error %v does not name the header and the value", err)
	}
}

func TestParseAllocatesNothing(t *testing.T) {
	h := http.Header{
		"Content-Type":                        {"application/json"},
		"X-Llm-D-Flow-Band-Headroom-Requests": {"12345"},
	}
	allocs := testing.AllocsPerRun(100, func() {
		if n, err := headroom.Parse(h); err != nil || n != 12345 {
			t.Fatal(n, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Parse allocates %v times, want 0", allocs)
	}
}

func TestParseRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.OneOf(rapid.Int64Min(0), rapid.SampledFrom([]int64{0, 1, math.MaxInt64})).Draw(t, "n")
		checkRoundTrip(t, n)
	})
}

func checkRoundTrip(t interface{ Fatalf(string, ...any) }, n int64) {
	h := http.Header{}
	h.Set(headroom.HeaderName, strconv.FormatInt(n, 10))
	if got, err := headroom.Parse(h); err != nil || got != n {
		t.Fatalf("Parse(FormatInt(%d)) = %d, %v", n, got, err)
	}
}

// FuzzParse feeds arbitrary values to Parse. It must never panic; it must
// accept a value exactly when the value, trimmed of spaces and tabs, is
// non-empty ASCII digits within int64, and then agree with strconv; and
// every non-negative int64 it is given must round-trip through its decimal
// form.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"19", " 0 ", "\t007\t", "", "-1", "+1", "1,2", "1e3", "9223372036854775807", "9223372036854775808", "18446744073709551615", "١٩"} {
		f.Add(seed, int64(len(seed)))
	}
	f.Add("x", int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, value string, n int64) {
		if n >= 0 {
			checkRoundTrip(t, n)
		}

		got, err := headroom.Parse(http.Header{"X-Llm-D-Flow-Band-Headroom-Requests": {value}})
		trimmed := strings.Trim(value, " \t")
		want, refErr := strconv.ParseInt(trimmed, 10, 64)
		digitsOnly := trimmed != "" && strings.Trim(trimmed, "0123456789") == ""
		switch {
		case digitsOnly && refErr == nil:
			if err != nil || got != want {
				t.Fatalf("Parse(%q) = %d, %v; want %d", value, got, err, want)
			}
		default:
			if !errors.Is(err, headroom.ErrMalformed) || got != 0 {
				t.Fatalf("Parse(%q) = %d, %v; want 0 and ErrMalformed", value, got, err)
			}
		}
	})
}
