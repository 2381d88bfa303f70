package headroom

import (
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/internal/header"
)

// Canonical forms of the header names, as http.Header keys them.
var (
	canonicalHeaderName            = http.CanonicalHeaderKey(HeaderName)
	canonicalProvisionalHeaderName = http.CanonicalHeaderKey(ProvisionalHeaderName)
)

// Option changes what the stamping functions ([Stamp], [MutationFor],
// [Middleware] and [ModifyResponse]) emit. Pass any number; the zero Option
// changes nothing. Options never change what is removed: both header names
// are router-owned whichever the router sets.
type Option uint8

// EmitProvisional sets the headroom under [ProvisionalHeaderName] too, with
// the same value as [HeaderName]. Known consumers read one name each:
// llm-d-async's AIMD dispatch gate reads ProvisionalHeaderName
// (x-llm-d-flow-band-headroom; see api/inference_error.go there), while
// [Parse] and dispatchers following the band-headroom proposal read
// HeaderName (x-llm-d-flow-band-headroom-requests). A router serving both
// kinds of consumer stamps with EmitProvisional.
const EmitProvisional Option = 1 << 0

// has reports whether opts include o.
func has(opts []Option, o Option) bool {
	for _, opt := range opts {
		if opt&o != 0 {
			return true
		}
	}
	return false
}

// Strip deletes from h every copy of the headers named by names, in every
// form a backend could send one in, so that none reaches the client:
//
//   - a key equal to a name, ignoring letter case, with all its values; it
//     finds keys set directly in the map in any form, which http.Header.Del
//     (canonical keys only) misses;
//   - a trailer set through http.TrailerPrefix: a key of the form
//     "Trailer:" + name, ignoring letter case in both parts;
//   - a trailer declaration: the name is removed from the comma-separated
//     lists of every "Trailer" key (any letter case), keeping the other
//     declared names; a Trailer key left with no name is deleted. Without
//     this, net/http would send the router's own stamped value a second
//     time, as a trailer, and a backend could set a value after the body.
//
// A router calls it on the headers it owns before setting its own values. A
// nil h is left alone. Names must be header names (HTTP tokens).
//
// Strip costs one pass over h and allocates nothing, unless it rewrites a
// trailer declaration.
func Strip(h http.Header, names ...string) { strip(h, names, true) }

// stripTrailers is Strip for the trailer forms only: TrailerPrefix keys and
// trailer declarations. The plain keys, which hold the router's own values,
// stay.
func stripTrailers(h http.Header, names []string) { strip(h, names, false) }

// strip is Strip, deleting the plain keys only when plain is true.
func strip(h http.Header, names []string, plain bool) {
	if len(names) == 0 {
		return
	}
	for key, values := range h {
		switch {
		case plain && matchesAny(key, names), isTrailerPrefixed(key, names):
			delete(h, key)
		case header.EqualFold(key, "Trailer"):
			if kept, changed := undeclare(values, names); changed {
				if len(kept) == 0 {
					delete(h, key)
				} else {
					h[key] = kept
				}
			}
		}
	}
}

// matchesAny reports whether key equals one of names, ignoring ASCII case.
func matchesAny(key string, names []string) bool {
	for _, name := range names {
		if header.EqualFold(key, name) {
			return true
		}
	}
	return false
}

// isTrailerPrefixed reports whether key is http.TrailerPrefix followed by
// one of names, ignoring ASCII case in both.
func isTrailerPrefixed(key string, names []string) bool {
	const prefix = http.TrailerPrefix
	if len(key) <= len(prefix) || !header.EqualFold(key[:len(prefix)], prefix) {
		return false
	}
	return matchesAny(key[len(prefix):], names)
}

// undeclare removes names from a Trailer header's values, each a
// comma-separated list of field names. It returns the values unchanged and
// false when none of them names one of names; otherwise the rewritten values
// (elements joined by ", ", values left empty dropped) and true.
func undeclare(values []string, names []string) ([]string, bool) {
	changed := false
	for _, v := range values {
		for elem := range strings.SplitSeq(v, ",") {
			if matchesAny(strings.Trim(elem, " \t"), names) {
				changed = true
				break
			}
		}
	}
	if !changed {
		return values, false
	}
	var kept []string
	for _, v := range values {
		var elems []string
		for elem := range strings.SplitSeq(v, ",") {
			elem = strings.Trim(elem, " \t")
			if elem != "" && !matchesAny(elem, names) {
				elems = append(elems, elem)
			}
		}
		if len(elems) > 0 {
			kept = append(kept, strings.Join(elems, ", "))
		}
	}
	return kept, true
}

// Stamp makes h carry the router's headroom for band b, read from r now.
//
// It first removes every copy of [HeaderName] and [ProvisionalHeaderName]
// that h holds, in every form [Strip] removes (a backend's, in any letter
// case, with any number of values, as a header or as a trailer). Then, if
// [Sample] advertises a value, it sets HeaderName to that value alone, and
// ProvisionalHeaderName too with [EmitProvisional]; otherwise the headers
// stay absent. Stamp never fails and never panics: a Reader that panics (a
// typed nil pointer, say) counts as a failed read, because the header is
// advisory and a bug in reading it must not cost the response it rides on.
// A nil h is left alone.
//
// Call it when the response headers are about to be written. Stamp allocates
// once, for the value, when it sets one, and more only to rewrite a trailer
// declaration naming one of the headers.
func Stamp(h http.Header, r capacity.Reader, b Band, opts ...Option) {
	if h == nil {
		return
	}
	Strip(h, HeaderName, ProvisionalHeaderName)
	requests, ok := sampleSafely(r, b)
	if !ok {
		return
	}
	final, provisional := headerValues(uint64(requests))
	h[canonicalHeaderName] = final
	if has(opts, EmitProvisional) {
		h[canonicalProvisionalHeaderName] = provisional
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

// headerValues returns two independent one-element header value lists
// holding n in decimal, in a single allocation: both lists and the digits
// share one object. Each list has capacity 1, so appending to one copies it
// and never writes into the other.
func headerValues(n uint64) (a, b []string) {
	v := new(struct {
		lists  [2]string
		digits [20]byte // len("18446744073709551615")
	})
	digits := strconv.AppendUint(v.digits[:0], n, 10)
	// The digits are written once, above, and are reachable afterwards only
	// through the strings, so the strings are immutable as Go requires.
	s := unsafe.String(unsafe.SliceData(digits), len(digits))
	v.lists[0], v.lists[1] = s, s
	return v.lists[0:1:1], v.lists[1:2:2]
}

// Mutation is a headroom stamp as plain data, for proxies that do not hand
// the router an http.Header: an Envoy ext_proc server builds its
// response-headers HeaderMutation from it (Remove as remove_headers; Value,
// when Set, as a set_headers entry for HeaderName that overwrites, and one
// for ProvisionalHeaderName when SetProvisional), and its response-trailers
// HeaderMutation from Remove alone.
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
	// SetProvisional reports whether to set ProvisionalHeaderName to Value
	// as well; it is true only when Set is and [EmitProvisional] was given.
	SetProvisional bool
	// Value is the headroom in decimal; empty when Set is false.
	Value string
}

// MutationFor returns the stamp for band b as a [Mutation], reading r now.
// It behaves as [Stamp] does, and the returned Remove slice is the caller's
// to keep or change.
func MutationFor(r capacity.Reader, b Band, opts ...Option) Mutation {
	m := Mutation{Remove: []string{HeaderName, ProvisionalHeaderName}}
	if requests, ok := sampleSafely(r, b); ok {
		m.Set = true
		m.SetProvisional = has(opts, EmitProvisional)
		m.Value = strconv.FormatInt(requests, 10)
	}
	return m
}
