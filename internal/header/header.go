// Package header holds the header-name rules that Sluice's packages share:
// ASCII case folding, and the one deterministic lookup of a header that a
// map may hold under several spellings.
package header

import "net/http"

// EqualFold reports whether a and b are equal under ASCII case folding.
// Header names are ASCII tokens; Unicode folding (strings.EqualFold) would
// let a non-ASCII letter such as the Kelvin sign match an ASCII one.
func EqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if 'A' <= cb && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}

// Value returns the first value of the header canonical (which must be in
// canonical form) in h, matching keys in any letter case, without
// allocating. The canonical key wins when it has a value, even an empty
// one; otherwise the smallest matching key in byte order that has a value,
// so the answer never depends on map order. ok is false when no matching
// key has a value.
func Value(h http.Header, canonical string) (value string, ok bool) {
	if vs := h[canonical]; len(vs) > 0 {
		return vs[0], true
	}
	var best string
	for key, vs := range h {
		if len(vs) == 0 || !EqualFold(key, canonical) {
			continue
		}
		if !ok || key < best {
			best, value, ok = key, vs[0], true
		}
	}
	return value, ok
}
