package headroom

import (
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sluicegate/sluice/capacity"
)

// canonicalHeaderName is HeaderName as http.Header keys it.
var canonicalHeaderName = http.CanonicalHeaderKey(HeaderName)

// Strip deletes from h every key equal to one of names, ignoring letter case,
// with all its values. It finds keys set directly in the map in any form,
// which http.Header.Del (canonical keys only) misses. A router calls it on
// the headers it owns before setting its own values. A nil h is left alone.
//
// Strip costs one pass over h and allocates nothing.
func Strip(h http.Header, names ...string) {
	for key := range h {
		for _, name := range names {
			if len(key) == len(name) && strings.EqualFold(key, name) {
				delete(h, key)
				break
			}
		}
	}
}

// Stamp makes h carry the router's headroom for band b, read from r now.
//
// It first removes every copy of [HeaderName] and [ProvisionalHeaderName]
// that h holds (a backend's, in any letter case, with any number of values).
// Then, if [Sample] advertises a value, it sets HeaderName to that value
// alone; otherwise the header stays absent. Stamp never fails and never
// panics: a Reader that panics (a typed nil pointer, say) counts as a failed
// read, because the header is advisory and a bug in reading it must not
// cost the response it rides on. A nil h is left alone.
//
// Call it when the response headers are about to be written. Stamp allocates
// once, for the value, when it sets one.
func Stamp(h http.Header, r capacity.Reader, b Band) {
	if h == nil {
		return
	}
	Strip(h, HeaderName, ProvisionalHeaderName)
	if requests, ok := sampleSafely(r, b); ok {
		h[canonicalHeaderName] = headerValue(uint64(requests))
	}
}

// sampleSafely is Sample with a Reader's panic taken as a failed read.
func sampleSafely(r capacity.Reader, b Band) (requests int64, ok bool) {
	defer func() {
		if recover() != nil {
			requests, ok = 0, false
		}
	}()
	return Sample(r, b)
}

// headerValue returns a one-element header value list holding n in decimal,
// in a single allocation: the list and the digits share one object.
func headerValue(n uint64) []string {
	v := new(struct {
		list   [1]string
		digits [20]byte // len("18446744073709551615")
	})
	digits := strconv.AppendUint(v.digits[:0], n, 10)
	// The digits are written once, above, and are reachable afterwards only
	// through the string, so the string is immutable as Go requires.
	v.list[0] = unsafe.String(unsafe.SliceData(digits), len(digits))
	return v.list[:]
}

// Mutation is a headroom stamp as plain data, for proxies that do not hand
// the router an http.Header: an Envoy ext_proc server builds its
// response-headers HeaderMutation from it (Remove as remove_headers; Value,
// when Set, as a set_headers entry for HeaderName that overwrites).
//
// Apply Remove first, then Set, which is the order Envoy applies a
// HeaderMutation in. Header names are lower case; proxies match them without
// regard to case.
type Mutation struct {
	// Remove lists the header names to delete with all their values:
	// HeaderName and ProvisionalHeaderName, always.
	Remove []string
	// Set reports whether to set HeaderName to Value after removing.
	Set bool
	// Value is the headroom in decimal; empty when Set is false.
	Value string
}

// MutationFor returns the stamp for band b as a [Mutation], reading r now.
// It behaves as [Stamp] does, and the returned Remove slice is the caller's
// to keep or change.
func MutationFor(r capacity.Reader, b Band) Mutation {
	m := Mutation{Remove: []string{HeaderName, ProvisionalHeaderName}}
	if requests, ok := sampleSafely(r, b); ok {
		m.Set = true
		m.Value = strconv.FormatInt(requests, 10)
	}
	return m
}
