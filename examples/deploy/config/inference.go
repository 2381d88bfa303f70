package config

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// InferenceRoutes says which requests are inference requests: the ones a
// binary puts through flow control. Every other request (a model list, a
// health check, a tokenizer call) goes straight to a backend, neither
// queued nor counted by the gate, so that saturation never refuses it.
// The zero value matches nothing; [DefaultInferenceRoutes] is what the
// binaries use unless told otherwise.
type InferenceRoutes struct {
	routes []InferenceRoute
}

// InferenceRoute is one entry of [InferenceRoutes]: a method (empty for
// any) and a path, which matches that path alone, or, ending in "/", the
// whole subtree below it ("/" matches every request).
type InferenceRoute struct {
	Method string
	Path   string
}

// DefaultInferenceRoutes returns the OpenAI-compatible endpoints that run
// the model on the GPU, as vLLM's OpenAI server serves them and as
// llm-d-router's request parser reads their bodies: POST /v1/completions,
// /v1/chat/completions, /v1/embeddings and /v1/responses. vLLM's other
// POST endpoints (/v1/audio/*, /v1/rerank, /v1/score, /pooling, /classify)
// run the model too; an operator who serves them adds them with
// -inference-path. /tokenize and /detokenize, the model list and the
// health checks are cheap and must answer under saturation.
func DefaultInferenceRoutes() InferenceRoutes {
	return InferenceRoutes{routes: []InferenceRoute{
		{"POST", "/v1/completions"},
		{"POST", "/v1/chat/completions"},
		{"POST", "/v1/embeddings"},
		{"POST", "/v1/responses"},
	}}
}

// ParseInferenceRoute parses "[METHOD] PATH", such as
// "POST /v1/chat/completions", "/v1/" or "/". PATH must be absolute and
// clean (no "//", "." or ".." segment); a trailing "/" makes it a subtree.
func ParseInferenceRoute(s string) (InferenceRoute, error) {
	fields := strings.Fields(s)
	var r InferenceRoute
	switch len(fields) {
	case 1:
		r.Path = fields[0]
	case 2:
		r.Method, r.Path = fields[0], fields[1]
		if !httpguts.ValidHeaderFieldName(r.Method) { // a method is a token, as a header name is
			return r, fmt.Errorf("%q: %q is not an HTTP method", s, r.Method)
		}
	default:
		return r, fmt.Errorf("%q: want [METHOD] PATH, such as %q", s, "POST /v1/chat/completions")
	}
	if !strings.HasPrefix(r.Path, "/") {
		return r, fmt.Errorf("%q: the path must start with /", s)
	}
	clean := path.Clean(r.Path)
	if strings.HasSuffix(r.Path, "/") && clean != "/" {
		clean += "/"
	}
	if clean != r.Path {
		return r, fmt.Errorf("%q: write the path as %q", s, clean)
	}
	return r, nil
}

// Match reports whether a request of method for urlPath is an inference
// request. urlPath is the request's path, decoded (http.Request.URL.Path);
// it is cleaned before matching, so that "/v1//chat/completions/" or
// "/v1/x/../chat/completions", which a backend may route to the same
// handler, cannot slip past admission.
func (r InferenceRoutes) Match(method, urlPath string) bool {
	if isCleanPath(urlPath) {
		return r.match(method, urlPath) // cleaning would change nothing: no allocation
	}
	return r.match(method, path.Clean("/"+urlPath))
}

// match is Match for p, a path already cleaned.
func (r InferenceRoutes) match(method, p string) bool {
	for _, rt := range r.routes {
		if rt.Method != "" && rt.Method != method {
			continue
		}
		if strings.HasSuffix(rt.Path, "/") {
			if rt.Path == "/" || p+"/" == rt.Path || strings.HasPrefix(p, rt.Path) {
				return true
			}
			continue
		}
		if p == rt.Path {
			return true
		}
	}
	return false
}

// MatchRequestTarget is [InferenceRoutes.Match] for a request target as it
// arrives on the wire (an HTTP/2 :path, with its query and percent
// escapes): a target that does not parse is an inference request, so that
// nothing a backend might still route passes unadmitted.
func (r InferenceRoutes) MatchRequestTarget(method, target string) bool {
	if isCleanPath(target) {
		// What parsing and cleaning would give back unchanged: the
		// common case, matched without allocating.
		return r.match(method, target)
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return true
	}
	return r.Match(method, u.Path)
}

// isCleanPath reports whether target is a path that url.ParseRequestURI
// and path.Clean would both leave as it is: "/" or "/" followed by
// segments of unreserved characters (RFC 3986: letters, digits, "-", ".",
// "_", "~"), none empty, "." or "..", and no trailing "/". Anything else
// (a query, a percent escape, "//") takes the long way.
func isCleanPath(target string) bool {
	if target == "/" {
		return true
	}
	if len(target) < 2 || target[0] != '/' || target[len(target)-1] == '/' {
		return false
	}
	start := 1 // of the current segment
	for i := 1; i <= len(target); i++ {
		if i == len(target) || target[i] == '/' {
			switch seg := target[start:i]; seg {
			case "", ".", "..":
				return false
			}
			start = i + 1
			continue
		}
		c := target[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

// Routes returns the routes, in order; the slice is a fresh copy.
func (r InferenceRoutes) Routes() []InferenceRoute {
	return append([]InferenceRoute(nil), r.routes...)
}

// String lists the routes as -inference-path takes them, comma-separated.
func (r InferenceRoutes) String() string {
	parts := make([]string, len(r.routes))
	for i, rt := range r.routes {
		parts[i] = rt.String()
	}
	return strings.Join(parts, ", ")
}

// String returns the route as -inference-path takes it: "PATH" or
// "METHOD PATH".
func (rt InferenceRoute) String() string {
	if rt.Method == "" {
		return rt.Path
	}
	return rt.Method + " " + rt.Path
}

// InferenceRoutesFlag is the flag.Value of a repeatable -inference-path:
// the first value given replaces what Routes held (the defaults), later
// ones add to it.
type InferenceRoutesFlag struct {
	Routes *InferenceRoutes
	given  bool
}

// String returns the routes held, for flag's defaults in -h.
func (f *InferenceRoutesFlag) String() string {
	if f == nil || f.Routes == nil {
		return ""
	}
	return f.Routes.String()
}

// Set parses one -inference-path value and adds its route; the first call
// replaces the routes held before.
func (f *InferenceRoutesFlag) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("empty: want [METHOD] PATH")
	}
	r, err := ParseInferenceRoute(s)
	if err != nil {
		return err
	}
	if !f.given {
		f.given = true
		f.Routes.routes = nil
	}
	f.Routes.routes = append(f.Routes.routes, r)
	return nil
}
