package extproc

import (
	"math/rand/v2"
	"net/http"
	"net/textproto"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
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

// canonicalKey keys every name as net/textproto does: the names its switch
// answers (each listed here), names it does not, other letter cases and
// pseudo-headers.
func TestCanonicalKey(t *testing.T) {
	names := []string{
		"host", "content-type", "content-length", "content-encoding", "accept",
		"accept-encoding", "user-agent", "te", "connection", "cookie", "date", "server",
		"x-request-id", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host",
		"x-envoy-internal", "x-envoy-expected-rq-timeout-ms", "x-envoy-original-path",
		"x-envoy-external-address", "x-envoy-attempt-count",
		"traceparent", "tracestate", "x-b3-traceid", "x-b3-spanid", "x-b3-sampled",
		"authorization", "openai-organization", "openai-project",
		flowhttp.FairnessIDHeader, flowhttp.DeprecatedFairnessIDHeader,
		flowhttp.DefaultObjectiveHeader, flowhttp.DeprecatedObjectiveHeader,
		flowhttp.TTLHeader, flowhttp.ModelNameHeader,
		"x-custom-thing", "X-LLM-D-Inference-TTL", "Content-Type", "weird name", "",
	}
	for _, n := range names {
		if got, want := canonicalKey(n), textproto.CanonicalMIMEHeaderKey(n); got != want {
			t.Errorf("canonicalKey(%q) = %q, want %q", n, got, want)
		}
	}
	for _, n := range []string{":path", ":authority", ":Odd-Pseudo"} {
		if got := canonicalKey(n); got != n {
			t.Errorf("canonicalKey(%q) = %q, want it unchanged", n, got)
		}
	}
}
