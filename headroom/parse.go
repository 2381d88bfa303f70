package headroom

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
)

// ErrAbsent is returned by [Parse] when the response carries no headroom
// header: the router advertised nothing (the band is unbounded, the request
// was not admitted through flow control, or the band could not be read).
var ErrAbsent = errors.New("headroom: header absent")

// ErrMalformed is wrapped by the error [Parse] returns for a header that is
// present but is not a single decimal integer in the range of int64.
var ErrMalformed = errors.New("headroom: malformed header")

// Parse reads the headroom a router advertised in a response's headers, for
// a dispatcher that paces its work by it.
//
// It reads [HeaderName], or [ProvisionalHeaderName] when HeaderName is
// absent, matching names without regard to letter case. The header must have
// exactly one value made of the ASCII digits 0-9 only, optionally surrounded
// by spaces or tabs, within the range of int64. Parse returns [ErrAbsent]
// when neither name is present, and an error wrapping [ErrMalformed] for any
// other value: empty, signed, fractional, comma-separated, repeated or out of
// range. A successful Parse allocates nothing.
//
// The value is an int64, the type [Sample] and [FromSnapshot] return, so a
// value read and a value sampled compare without conversion.
func Parse(h http.Header) (int64, error) {
	name := HeaderName
	value, count := lookup(h, name)
	if count == 0 {
		name = ProvisionalHeaderName
		value, count = lookup(h, name)
	}
	switch {
	case count == 0:
		return 0, ErrAbsent
	case count > 1:
		return 0, fmt.Errorf("%w: %s has %d values", ErrMalformed, name, count)
	}
	n, ok := parseDigits(value)
	if !ok {
		return 0, fmt.Errorf("%w: %s: %q", ErrMalformed, name, value)
	}
	return n, nil
}

// lookup returns how many values h holds for name under any letter case, and
// the last of them.
func lookup(h http.Header, name string) (value string, count int) {
	for key, vs := range h {
		if len(vs) > 0 && len(key) == len(name) && strings.EqualFold(key, name) {
			value = vs[len(vs)-1]
			count += len(vs)
		}
	}
	return value, count
}

// parseDigits parses s, optionally surrounded by spaces and tabs, as a
// decimal int64 made of digits only.
func parseDigits(s string) (int64, bool) {
	s = strings.Trim(s, " \t")
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		d := int64(s[i]) - '0'
		if d < 0 || d > 9 {
			return 0, false
		}
		if n > (math.MaxInt64-d)/10 {
			return 0, false // n*10 + d would exceed the int64 range
		}
		n = n*10 + d
	}
	return n, true
}
