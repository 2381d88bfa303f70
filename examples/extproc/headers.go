package extproc

import (
	"net/http"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// toHTTPHeader converts the header list Envoy sends into an http.Header.
// Envoy sends one entry per header line (a repeated header arrives as several
// entries, lowercased); each becomes one value under its canonical key, so
// http.Header.Get and ordering policies find it in any letter case.
// Pseudo-headers (":path", ":method", ...) keep their name as is.
func toHTTPHeader(m *corev3.HeaderMap) http.Header {
	h := make(http.Header, len(m.GetHeaders()))
	for _, hv := range m.GetHeaders() {
		h.Add(hv.GetKey(), headerValue(hv))
	}
	return h
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
