package config

import (
	"math/rand/v2"
	"net/url"
	"path"
	"strings"
	"testing"
)

// routeMatch is a request and whether the routes should match it.
type routeMatch struct {
	method, path string
	want         bool
}

// wantMatches reports each case that r matches otherwise than it wants.
func wantMatches(t *testing.T, r InferenceRoutes, cases []routeMatch) {
	t.Helper()
	for _, tc := range cases {
		if got := r.Match(tc.method, tc.path); got != tc.want {
			t.Errorf("Match(%s, %q) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestDefaultInferenceRoutes(t *testing.T) {
	r := DefaultInferenceRoutes()
	wantMatches(t, r, []routeMatch{
		{"POST", "/v1/chat/completions", true},
		{"POST", "/v1/completions", true},
		{"POST", "/v1/embeddings", true},
		{"POST", "/v1/responses", true},
		// What a backend may route to the same handler is inference too.
		{"POST", "/v1//chat/completions", true},
		{"POST", "/v1/chat/completions/", true},
		{"POST", "/v1/x/../chat/completions", true},
		{"POST", "v1/chat/completions", true},
		// Not inference: listings, probes, other methods, other paths.
		{"GET", "/v1/chat/completions", false},
		{"GET", "/v1/models", false},
		{"GET", "/health", false},
		{"GET", "/ping", false},
		{"POST", "/tokenize", false},
		{"POST", "/v1/chat/completionsx", false},
		{"GET", "/v1/responses/resp_1", false},
		{"post", "/v1/chat/completions", false}, // methods are case-sensitive; a backend answers 405
	})
}

func TestInferenceRoutesSubtreeAndAnyMethod(t *testing.T) {
	var r InferenceRoutes
	f := &InferenceRoutesFlag{Routes: &r}
	for _, s := range []string{"/v1/", "PUT /admin"} {
		if err := f.Set(s); err != nil {
			t.Fatalf("Set(%q): %v", s, err)
		}
	}
	wantMatches(t, r, []routeMatch{
		{"GET", "/v1/models", true},
		{"DELETE", "/v1", true},
		{"GET", "/v10", false},
		{"PUT", "/admin", true},
		{"GET", "/admin", false},
		{"GET", "/metrics", false},
	})
	var all InferenceRoutes
	if err := (&InferenceRoutesFlag{Routes: &all}).Set("/"); err != nil || !all.Match("GET", "/anything") {
		t.Errorf(`"/": %v; it must match every request`, err)
	}
}

func TestInferenceRoutesRequestTarget(t *testing.T) {
	r := DefaultInferenceRoutes()
	for _, tc := range []struct {
		target string
		want   bool
	}{
		{"/v1/chat/completions?stream=true", true},
		{"/v1/chat/%63ompletions", true}, // the backend decodes it to /v1/chat/completions
		{"/v1/models?x=1", false},
		{"/v1/chat/%zzcompletions", true}, // does not parse: admitted
		{"", true},
	} {
		if got := r.MatchRequestTarget("POST", tc.target); got != tc.want {
			t.Errorf("MatchRequestTarget(POST, %q) = %v, want %v", tc.target, got, tc.want)
		}
	}
}

func TestParseInferenceRouteErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"chat", "must start with /"},
		{"POST /v1/a b", "want [METHOD] PATH"},
		{"PO(ST /v1/a", "not an HTTP method"},
		{"/v1//a", `write the path as "/v1/a"`},
		{"/v1/./a/", `write the path as "/v1/a/"`},
	} {
		_, err := ParseInferenceRoute(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseInferenceRoute(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

// A target that isCleanPath lets through is one that parsing and cleaning
// leave as it is, so MatchRequestTarget answers for every target what
// parsing, cleaning and Match answer: over random targets drawn from the
// characters that matter (separators, dots, escapes, a query, a space),
// against routes with and without a method, exact and subtrees.
func TestMatchRequestTargetFastPathAgrees(t *testing.T) {
	routes := InferenceRoutes{routes: []InferenceRoute{
		{"POST", "/v1/chat/completions"}, {"", "/v1/completions"}, {"GET", "/a/"}, {"POST", "/x.y/"},
	}}
	slow := func(method, target string) bool {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return true
		}
		return routes.Match(method, u.Path)
	}
	pieces := []string{"/", "/", "/", "v1", "chat", "completions", "a", "x.y", ".", "..", "-", "~", "_", "%2F", "%", "?q=1", "#f", " ", ":", ";", "A", "é"}
	segments := []string{"v1", "chat", "completions", "a", "x.y", "-", "~", "_", "A", "", ".", ".."}
	rng := rand.New(rand.NewPCG(33, 6))
	fast := 0
	for range 20000 {
		var b strings.Builder
		if rng.IntN(2) == 0 {
			// Segments, most of them clean.
			for range 1 + rng.IntN(4) {
				b.WriteString("/")
				b.WriteString(segments[rng.IntN(len(segments))])
			}
		} else {
			for range 1 + rng.IntN(7) {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			}
		}
		target := b.String()
		if isCleanPath(target) {
			fast++
			if u, err := url.ParseRequestURI(target); err != nil || u.Path != target || path.Clean("/"+target) != target {
				t.Fatalf("isCleanPath(%q) but parsing and cleaning give %v, %v, %q", target, u, err, path.Clean("/"+target))
			}
		}
		for _, method := range []string{"POST", "GET"} {
			if got, want := routes.MatchRequestTarget(method, target), slow(method, target); got != want {
				t.Fatalf("MatchRequestTarget(%s, %q) = %v; parsing, cleaning and Match say %v", method, target, got, want)
			}
		}
	}
	if fast < 1000 {
		t.Fatalf("only %d of the targets were clean; the fast path is barely exercised", fast)
	}
	for _, target := range []string{"/", "/v1/chat/completions", "/v1/models"} {
		if !isCleanPath(target) {
			t.Errorf("isCleanPath(%q) = false, want true", target)
		}
	}
	if n := testing.AllocsPerRun(100, func() { routes.MatchRequestTarget("POST", "/v1/chat/completions") }); n != 0 {
		t.Errorf("MatchRequestTarget of a clean path allocates %v times, want 0", n)
	}
	// Match, which the gateway calls with every request's decoded path,
	// takes the same fast path.
	if n := testing.AllocsPerRun(100, func() { routes.Match("POST", "/v1/chat/completions") }); n != 0 {
		t.Errorf("Match of a clean path allocates %v times, want 0", n)
	}
}
