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
// the names Sluice and Envoy send most are canonicalized by a switch.
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

// canonicalKey returns name's canonical form, as http.Header.Add would key
// it. A pseudo-header's name is its own: ':' is not a token character,
// and net/textproto leaves a name holding one as it is. The lowercase
// names Envoy most often sends and Sluice's classifiers read are answered
// by a switch, which costs less than hashing the name for a table and
// spares net/textproto's scan and, for a name it does not know, its
// allocation; TestCanonicalKey checks every one against net/textproto.
func canonicalKey(name string) string {
	if len(name) > 0 && name[0] == ':' {
		return name
	}
	switch name {
	case "host":
		return "Host"
	case "content-type":
		return "Content-Type"
	case "content-length":
		return "Content-Length"
	case "content-encoding":
		return "Content-Encoding"
	case "accept":
		return "Accept"
	case "accept-encoding":
		return "Accept-Encoding"
	case "user-agent":
		return "User-Agent"
	case "te":
		return "Te"
	case "connection":
		return "Connection"
	case "cookie":
		return "Cookie"
	case "date":
		return "Date"
	case "server":
		return "Server"
	case "x-request-id":
		return "X-Request-Id"
	case "x-forwarded-for":
		return "X-Forwarded-For"
	case "x-forwarded-proto":
		return "X-Forwarded-Proto"
	case "x-forwarded-host":
		return "X-Forwarded-Host"
	case "x-envoy-internal":
		return "X-Envoy-Internal"
	case "x-envoy-expected-rq-timeout-ms":
		return "X-Envoy-Expected-Rq-Timeout-Ms"
	case "x-envoy-original-path":
		return "X-Envoy-Original-Path"
	case "x-envoy-external-address":
		return "X-Envoy-External-Address"
	case "x-envoy-attempt-count":
		return "X-Envoy-Attempt-Count"
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "x-b3-traceid":
		return "X-B3-Traceid"
	case "x-b3-spanid":
		return "X-B3-Spanid"
	case "x-b3-sampled":
		return "X-B3-Sampled"
	case "authorization":
		return "Authorization"
	case "openai-organization":
		return "Openai-Organization"
	case "openai-project":
		return "Openai-Project"
	case flowhttp.FairnessIDHeader:
		return "X-Llm-D-Inference-Fairness-Id"
	case flowhttp.DeprecatedFairnessIDHeader:
		return "X-Gateway-Inference-Fairness-Id"
	case flowhttp.DefaultObjectiveHeader:
		return "X-Llm-D-Inference-Objective"
	case flowhttp.DeprecatedObjectiveHeader:
		return "X-Gateway-Inference-Objective"
	case flowhttp.TTLHeader:
		return "X-Llm-D-Inference-Ttl"
	case flowhttp.ModelNameHeader:
		return "X-Gateway-Model-Name"
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
