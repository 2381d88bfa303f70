package extproc

import (
	"net/http"
	"net/textproto"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// toHTTPHeader converts the header list Envoy sends into an http.Header.
// Envoy sends one entry per header line (a repeated header arrives as several
// entries, lowercased); each becomes one value under its canonical key, so
// http.Header.Get and ordering policies find it in any letter case.
// Pseudo-headers (":path", ":method", ...) keep their name as is.
//
// The result is what http.Header.Add would build, entry by entry, in fewer
// allocations: the raw values are copied into one string that every value
// slices, the keys' value lists share one backing array (each list with
// capacity one, so a repeated header appends into a copy of its own), and
// the names Sluice and Envoy send most are canonicalized from a table.
func toHTTPHeader(m *corev3.HeaderMap) http.Header {
	hvs := m.GetHeaders()
	h := make(http.Header, len(hvs))
	if len(hvs) == 0 {
		return h
	}
	size := 0
	for _, hv := range hvs {
		size += len(hv.GetRawValue())
	}
	var b strings.Builder
	b.Grow(size)
	for _, hv := range hvs {
		b.Write(hv.GetRawValue())
	}
	raw := b.String()
	lists := make([]string, len(hvs))
	at := 0
	for i, hv := range hvs {
		v := hv.GetValue()
		if n := len(hv.GetRawValue()); n > 0 {
			v = raw[at : at+n]
			at += n
		}
		key := canonicalKey(hv.GetKey())
		if vs, ok := h[key]; ok {
			h[key] = append(vs, v)
			continue
		}
		lists[i] = v
		h[key] = lists[i : i+1 : i+1]
	}
	return h
}

// canonicalKeys maps the lowercase header names Envoy most often sends
// and Sluice's classifiers read to their canonical form, so that the
// common case costs one lookup instead of a scan and, for a name
// net/textproto does not know, an allocation. It is never written after
// init.
var canonicalKeys = func() map[string]string {
	names := []string{
		"host", "content-type", "content-length", "content-encoding", "accept",
		"accept-encoding", "user-agent", "te", "connection", "cookie", "date", "server",
		flowhttp.FairnessIDHeader, flowhttp.DeprecatedFairnessIDHeader,
		flowhttp.DefaultObjectiveHeader, flowhttp.DeprecatedObjectiveHeader,
		flowhttp.TTLHeader, flowhttp.ModelNameHeader,
		"x-request-id", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host",
		"x-envoy-internal", "x-envoy-expected-rq-timeout-ms", "x-envoy-original-path",
		"x-envoy-external-address", "x-envoy-attempt-count",
		"traceparent", "tracestate", "x-b3-traceid", "x-b3-spanid", "x-b3-sampled",
		"authorization", "openai-organization", "openai-project",
	}
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = textproto.CanonicalMIMEHeaderKey(n)
	}
	return m
}()

// canonicalKey returns name's canonical form, as http.Header.Add would key
// it. A pseudo-header's name is its own: ':' is not a token character,
// and net/textproto leaves a name holding one as it is.
func canonicalKey(name string) string {
	if len(name) > 0 && name[0] == ':' {
		return name
	}
	if k, ok := canonicalKeys[name]; ok {
		return k
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

// headerValue returns a header's value from whichever field carries it. Envoy
// fills raw_value (bytes) unless the runtime flag
// envoy.reloadable_features.send_header_raw_value is turned off, in which case
// it fills value.
func headerValue(hv *corev3.HeaderValue) string {
	if raw := hv.GetRawValue(); len(raw) > 0 {
		return string(raw)
	}
	return hv.GetValue()
}

// setHeader returns a header option that replaces every existing copy of
// name with value. The value goes in raw_value, the field Envoy reads by
// default (it rejects options that fill both value and raw_value).
func setHeader(name, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: name, RawValue: []byte(value)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}
