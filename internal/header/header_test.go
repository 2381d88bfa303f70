package header

import (
	"net/http"
	"testing"

	"pgregory.net/rapid"
)

func TestEqualFold(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"X-Llm-D-Slo-Ttft-Ms", "x-llm-d-slo-ttft-ms", true},
		{"Trailer", "TRAILER", true},
		{"k", "\u212a", false}, // the Kelvin sign folds to k only under Unicode rules
		{"ab", "abc", false},
		{"a-b", "a_b", false},
	}
	for _, c := range cases {
		if got := EqualFold(c.a, c.b); got != c.want {
			t.Errorf("EqualFold(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestValueIsDeterministic: whatever the map's spellings, the answer is the
// canonical key's first value if it has one, else the smallest spelling's.
func TestValueIsDeterministic(t *testing.T) {
	h := http.Header{"X-Id": {""}, "x-id": {"lower"}, "X-ID": {"upper"}}
	for range 1000 {
		if v, ok := Value(h, "X-Id"); v != "" || !ok {
			t.Fatalf("Value = %q, %v; want the canonical key's empty value", v, ok)
		}
	}
	delete(h, "X-Id")
	for range 1000 {
		if v, _ := Value(h, "X-Id"); v != "upper" { // "X-ID" < "x-id"
			t.Fatalf("Value = %q; want the smallest spelling's", v)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		spellings := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"x-id", "X-ID", "x-Id", "X-iD", "X-Id"}), 0, 5, rapid.ID[string]).Draw(t, "keys")
		h := http.Header{}
		for _, k := range spellings {
			h[k] = []string{k}
		}
		v, ok := Value(h, "X-Id")
		if ok != (len(spellings) > 0) {
			t.Fatalf("ok %v with %d spellings", ok, len(spellings))
		}
		if !ok {
			return
		}
		want := spellings[0]
		for _, k := range spellings {
			if k < want {
				want = k
			}
		}
		if _, canonical := h["X-Id"]; canonical {
			want = "X-Id"
		}
		if v != want {
			t.Fatalf("Value = %q, want %q", v, want)
		}
	})
}
