package flowhttp

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// BodyPriorityField is the top-level member of a JSON request body that
// the priority hand-off ([PriorityHandoff]) sets: vLLM's request field
// priority, an integer that a server run with --scheduling-policy
// priority serves lowest first (ties first-come), preempting running
// requests of a higher number for a waiting one of a lower. A vLLM server
// run with first-come scheduling (its default) refuses a request whose
// priority is not 0.
const BodyPriorityField = "priority"

// The default bounds of the value the hand-off writes ([PriorityHandoff]'s
// Min and Max when both are 0): a 32-bit integer. vLLM takes any integer,
// but a front end, a proxy or a fake server between the router and it may
// take no more (examples/modelserver refuses more), and band priorities
// need no more.
const (
	DefaultHandoffMin int64 = math.MinInt32
	DefaultHandoffMax int64 = math.MaxInt32
)

// PriorityHandoff hands the band that admitted a request to the model
// server, so that priority holds past the router: a dispatched request's
// JSON body gets the top-level member "priority" ([BodyPriorityField]),
// vLLM's, set from its *effective* band — the band that admitted it,
// which is the fallback band for a priority that has none — not from the
// priority it asked for. Run vLLM with --scheduling-policy priority: with
// first-come scheduling, its default, vLLM refuses (400) every request
// whose priority is not 0.
//
// The mapping, from a band's priority (higher is more important) to the
// value written (lower is served first):
//
//   - With Map empty, value = −band: band 10 → −10, band 0 → 0, band −1 →
//     1, so the order of the bands is the order vLLM serves them in.
//   - With Map, a band it lists takes its value; a band it does not list
//     takes the value of the nearest listed band below it, or, below every
//     listed band, that of the lowest: it is served as the next band down
//     is, never ahead of a listed band above it. Map must be monotone: a
//     higher band maps to a value no greater than a lower band's (equal
//     values merge bands in vLLM's queue, first-come between them).
//   - The value is clamped to [Min, Max] (for the default mapping) or
//     must lie in it (a Map's values); both 0 means [DefaultHandoffMin,
//     DefaultHandoffMax].
//
// When the hand-off is on, the field is the router's, as the router-owned
// headers are: every top-level "priority" member the client wrote is
// removed, whatever its value (a number, a string, null, an object) and
// however many times the key repeats (JSON parsers differ on duplicate
// keys; most keep the last), and exactly one is written, after every
// other member, so no client jumps the server's queue by writing its own.
// Keys are compared as decoded, so "pri\u006frity" is "priority" too;
// letter case counts, as it does for vLLM. Every other member is kept
// byte for byte, in order, nested objects included (a "priority" inside
// one is not vLLM's field and is left alone).
//
// A body that is not one JSON object — empty, not JSON, an array, a
// string, an object followed by more — is passed on unchanged: the
// hand-off applies to JSON APIs and leaves others alone. One exception
// keeps the field the router's: Python's JSON parser, vLLM's, reads some
// bodies that are not JSON as objects (NaN and Infinity literals, UTF-16
// and UTF-32 text), so [PriorityHandoff.Rewrite] refuses a body that it
// could read so ([ErrHandoffBody]: 400 from a Handler), and rewrites an
// object behind a UTF-8 byte-order mark, which it skips.
//
// The gate must know that the servers schedule by priority, or it holds
// the higher bands at the router behind the lower bands' work: a slot
// gate never sends a server more than its slots, so the server never has
// a higher band to preempt for, and a gate that reads the servers' queues
// shuts on the work the lower bands queued. Use
// [github.com/sluicegate/sluice/flowcontrol/gate.PriorityMaxInFlight] for
// the first and
// [github.com/sluicegate/sluice/flowcontrol/gate.SaturationConfig.PriorityScheduling]
// for the second; for replicas that share a fleet view,
// [github.com/sluicegate/sluice/flowcontrol/fleet.Config.PriorityScheduling].
//
// The zero PriorityHandoff is off. See [Config.PriorityHandoff] for the
// Handler, and [PriorityHandoff.Rewrite] for a proxy that rewrites bodies
// itself (the ext_proc adapter in examples/extproc does).
type PriorityHandoff struct {
	// Enabled turns the hand-off on.
	Enabled bool
	// Map maps a band's priority to the value written; empty means the
	// default mapping, −band. It must be monotone, and its values must lie
	// in [Min, Max].
	Map map[int]int64
	// Min and Max bound the value written; both 0 means
	// [DefaultHandoffMin] and [DefaultHandoffMax]. Min must not be above
	// Max.
	Min, Max int64
}

// Bounds returns the bounds the hand-off writes within: Min and Max, or
// the defaults when both are 0.
func (p PriorityHandoff) Bounds() (lo, hi int64) {
	if p.Min == 0 && p.Max == 0 {
		return DefaultHandoffMin, DefaultHandoffMax
	}
	return p.Min, p.Max
}

// Validate reports what is wrong with p, naming the field: Map or Min set
// while Enabled is false (a mapping that would silently do nothing), Min
// above Max, a value of Map outside [Min, Max], or a Map that is not
// monotone (a higher band mapped to a greater value, served later, than
// a lower band's).
func (p PriorityHandoff) Validate() error { return p.validate("PriorityHandoff") }

func (p PriorityHandoff) validate(name string) error {
	if !p.Enabled {
		if len(p.Map) > 0 || p.Min != 0 || p.Max != 0 {
			return fmt.Errorf("flowhttp: %s.Map, Min or Max is set but %s.Enabled is false: set Enabled to hand the band to the model server", name, name)
		}
		return nil
	}
	lo, hi := p.Bounds()
	if lo > hi {
		return fmt.Errorf("flowhttp: %s.Min %d is above %s.Max %d", name, lo, name, hi)
	}
	bands := slices.Sorted(maps.Keys(p.Map))
	for i, b := range bands {
		v := p.Map[b]
		if v < lo || v > hi {
			return fmt.Errorf("flowhttp: %s.Map[%d] = %d is outside [%d, %d] (%s.Min, %s.Max)", name, b, v, lo, hi, name, name)
		}
		if i > 0 && v > p.Map[bands[i-1]] {
			below := bands[i-1]
			return fmt.Errorf("flowhttp: %s.Map is not monotone: band %d maps to %d, above band %d's %d; "+
				"the model server serves the lower value first, so a higher band must map to a value no greater than a lower band's",
				name, b, v, below, p.Map[below])
		}
	}
	return nil
}

// Value returns the value the hand-off writes for a request admitted in
// band, by the mapping of [PriorityHandoff]. It is meaningful for a p
// that [PriorityHandoff.Validate] accepts, and allocates nothing.
func (p PriorityHandoff) Value(band int) int64 {
	lo, hi := p.Bounds()
	if len(p.Map) == 0 {
		v := int64(band)
		if v == math.MinInt64 {
			v = math.MaxInt64 // −MinInt64 does not fit; the clamp below takes it to hi
		} else {
			v = -v
		}
		return min(max(v, lo), hi)
	}
	if v, ok := p.Map[band]; ok {
		return v
	}
	// The nearest listed band below, else the lowest listed band.
	var (
		below, lowest       int
		haveBelow, haveLow  bool
		belowVal, lowestVal int64
	)
	for b, v := range p.Map {
		if b < band && (!haveBelow || b > below) {
			below, belowVal, haveBelow = b, v, true
		}
		if !haveLow || b < lowest {
			lowest, lowestVal, haveLow = b, v, true
		}
	}
	if haveBelow {
		return belowVal
	}
	return lowestVal
}

// ErrHandoffBody is the error [PriorityHandoff.Rewrite] returns for a
// body it cannot rewrite that a model server may still read as a JSON
// object, priority and all; a [Handler] answers it 400 Bad Request.
var ErrHandoffBody = errors.New("flowhttp: the request body is not a valid JSON object, but a lenient JSON parser could read it as one; " +
	"with the priority hand-off on, send UTF-8 JSON without NaN or Infinity")

// utf8BOM is the UTF-8 byte-order mark.
const utf8BOM = "\xef\xbb\xbf"

// Rewrite returns the body the model server gets for a request admitted
// in band:
//
//   - a JSON object: [SetBodyPriority]'s result, priority p.Value(band);
//   - a JSON object behind a UTF-8 byte-order mark, which Python's JSON
//     parser (vLLM's) skips: the mark, then the rewritten object;
//   - a body that is not valid JSON but that Python's parser could read
//     as an object — UTF-8 text whose first character is '{' (an object
//     with NaN or Infinity in it, say), or UTF-16 or UTF-32 text, which
//     it detects as Python's json.loads does, whose first is '{' — is
//     refused with [ErrHandoffBody]: passed on, it could carry the
//     client's priority past the hand-off;
//   - anything else (another JSON value, a form, text, no body): body
//     itself, unchanged.
func (p PriorityHandoff) Rewrite(body []byte, band int) ([]byte, error) {
	value := p.Value(band)
	if out, ok := SetBodyPriority(body, value); ok {
		return out, nil
	}
	if rest, ok := bytes.CutPrefix(body, []byte(utf8BOM)); ok {
		if out, ok := SetBodyPriority(rest, value); ok {
			return append([]byte(utf8BOM), out...), nil
		}
	}
	if lenientObject(body) {
		return nil, ErrHandoffBody
	}
	return body, nil
}

// lenientObject reports whether the first character of b that is not JSON
// whitespace is '{', once b is decoded as Python's json.loads decodes
// bytes: UTF-32 or UTF-16 by a byte-order mark or by where its first
// bytes are zero, UTF-8 after a byte-order mark, else UTF-8.
func lenientObject(b []byte) bool {
	unit, skip := 1, 0
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(b, []byte("\x00\x00\xfe\xff")):
		unit, order, skip = 4, binary.BigEndian, 4
	case bytes.HasPrefix(b, []byte("\xff\xfe\x00\x00")):
		unit, order, skip = 4, binary.LittleEndian, 4
	case bytes.HasPrefix(b, []byte("\xfe\xff")):
		unit, order, skip = 2, binary.BigEndian, 2
	case bytes.HasPrefix(b, []byte("\xff\xfe")):
		unit, order, skip = 2, binary.LittleEndian, 2
	case bytes.HasPrefix(b, []byte(utf8BOM)):
		skip = 3
	case len(b) >= 4 && b[0] == 0:
		unit, order = 4, binary.BigEndian
		if b[1] != 0 {
			unit = 2
		}
	case len(b) >= 4 && b[1] == 0:
		unit, order = 4, binary.LittleEndian
		if b[2] != 0 || b[3] != 0 {
			unit = 2
		}
	case len(b) == 2 && b[0] == 0:
		unit, order = 2, binary.BigEndian
	case len(b) == 2 && b[1] == 0:
		unit, order = 2, binary.LittleEndian
	}
	for i := skip; i+unit <= len(b); i += unit {
		var c uint32
		switch unit {
		case 1:
			c = uint32(b[i])
		case 2:
			c = uint32(order.Uint16(b[i:]))
		default:
			c = order.Uint32(b[i:])
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

// String describes the mapping for a log or a configuration check: "off",
// "priority = −band, clamped to [lo, hi]", or the listed bands from the
// highest, such as "band 10 → -10, band 0 → 0, band -1 → 1 (unlisted:
// the nearest listed band below)".
func (p PriorityHandoff) String() string {
	if !p.Enabled {
		return "off"
	}
	lo, hi := p.Bounds()
	if len(p.Map) == 0 {
		return fmt.Sprintf("priority = -band, clamped to [%d, %d]", lo, hi)
	}
	s := ""
	for i, b := range slices.Backward(slices.Sorted(maps.Keys(p.Map))) {
		if i != len(p.Map)-1 {
			s += ", "
		}
		s += fmt.Sprintf("band %d → %d", b, p.Map[b])
	}
	return s + " (an unlisted band: the nearest listed band below, else the lowest)"
}

// priorityMember is what SetBodyPriority appends before the value.
const priorityMember = `"` + BodyPriorityField + `":`

// SetBodyPriority returns body with its top-level member "priority"
// ([BodyPriorityField]) set to value, and true; or body itself, unchanged,
// and false when body is not one JSON object (see [PriorityHandoff]).
// Every top-level "priority" member of body is removed, however its key is
// spelled in escapes and whatever its value, and one is written after
// the other members, which are kept byte for byte and in order. The result
// is valid JSON exactly when body is. It never modifies body; the work is
// two passes over it, and the result is at most 32 bytes longer (the
// caller bounds body's size, as [Config.MaxBodyBytes] does).
func SetBodyPriority(body []byte, value int64) ([]byte, bool) {
	// json.Valid is encoding/json's own scanner: once it has accepted the
	// body, the walk below moves through well-formed JSON, where a string
	// ends at the first quote not escaped and brackets outside strings
	// nest, so no crafted body can make it misread a member.
	start := skipSpace(body, 0)
	if start == len(body) || body[start] != '{' || !json.Valid(body) {
		return body, false
	}
	out := make([]byte, 0, len(body)+len(priorityMember)+len(",")+len("-9223372036854775808"))
	out = append(out, body[:start+1]...)
	kept := false
	i := start + 1             // just past '{' or a member's ','
	tail := skipSpace(body, i) // where the closing '}' (and what follows) starts
	if body[tail] != '}' {
		for {
			keyStart := skipSpace(body, i)
			keyEnd := skipString(body, keyStart)
			valueStart := skipSpace(body, skipSpace(body, keyEnd)+1) // past ':'
			valueEnd := skipValue(body, valueStart)
			if !isPriorityKey(body[keyStart:keyEnd]) {
				if kept {
					out = append(out, ',')
				}
				out = append(out, body[i:valueEnd]...)
				kept = true
			}
			next := skipSpace(body, valueEnd)
			if body[next] == '}' {
				tail = valueEnd
				break
			}
			i = next + 1 // past ','
		}
	}
	if kept {
		out = append(out, ',')
	}
	out = append(out, priorityMember...)
	out = strconv.AppendInt(out, value, 10)
	return append(out, body[tail:]...), true
}

// isPriorityKey reports whether the JSON string raw (quotes included)
// decodes to BodyPriorityField.
func isPriorityKey(raw []byte) bool {
	inner := raw[1 : len(raw)-1]
	if string(inner) == BodyPriorityField {
		return true
	}
	// Escapes can spell the key only if some are present, and at most
	// six bytes (\uXXXX) spell one of its letters.
	if len(inner) > 6*len(BodyPriorityField) || !slices.Contains(inner, '\\') {
		return false
	}
	var key string
	return json.Unmarshal(raw, &key) == nil && key == BodyPriorityField
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the valid JSON string that
// starts at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte cannot end the string
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just past the valid JSON value that starts
// at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // a number, true, false or null: up to a delimiter
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}
