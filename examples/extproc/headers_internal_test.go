package extproc

import (
	"math/rand/v2"
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
)

// toHTTPHeader builds what http.Header.Add builds from the same entries,
// one by one: over lists that mix names from its table and names not in
// it, pseudo-headers, upper-case spellings, repeated names, values in
// raw_value or in value, and empty values. Then a change to one value
// list must not show in another, which share a backing array.
func TestToHTTPHeaderMatchesAdd(t *testing.T) {
	names := []string{
		":path", ":method", ":authority", ":status", "content-type", "content-length",
		"x-llm-d-inference-fairness-id", "X-LLM-D-Inference-Fairness-Id", "x-request-id",
		"x-custom-thing", "X-Custom-Thing", "trailer", "accept", "weird name", "x-llm-d-inference-ttl", ":Odd-Pseudo",
	}
	values := []string{"", "a", "tenant-a", "application/json", "1234", " spaced , list "}
	rng := rand.New(rand.NewPCG(33, 5))
	for round := range 2000 {
		m := &corev3.HeaderMap{}
		want := http.Header{}
		for range rng.IntN(14) {
			name := names[rng.IntN(len(names))]
			value := values[rng.IntN(len(values))]
			hv := &corev3.HeaderValue{Key: name}
			if rng.IntN(3) == 0 {
				hv.Value = value
			} else {
				hv.RawValue = []byte(value)
			}
			m.Headers = append(m.Headers, hv)
			want.Add(name, value)
		}
		got := toHTTPHeader(m)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d: toHTTPHeader differs from http.Header.Add (-Add +toHTTPHeader):\n%s", round, diff)
		}
		for key := range got {
			got[key] = append(got[key], "appended")
		}
		for key, vs := range want {
			if g := got[key]; !cmp.Equal(g[:len(g)-1], vs) {
				t.Fatalf("round %d: appending to %q's list changed another: %q, want %q then appended", round, key, g, vs)
			}
		}
	}
}

// The table maps each name to what textproto would make of it.
func TestCanonicalKeysTable(t *testing.T) {
	for name, canonical := range canonicalKeys {
		if want := http.CanonicalHeaderKey(name); canonical != want {
			t.Errorf("canonicalKeys[%q] = %q, want %q", name, canonical, want)
		}
	}
}
