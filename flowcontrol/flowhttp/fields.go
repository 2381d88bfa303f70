package flowhttp

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// bodyFields are the members of a request body's top-level object that
// the package reads, raw (slices of the body); each is nil when absent,
// and all are nil for a body that is not one JSON object. When a key
// repeats, its last value is kept, as the model server reads it; keys
// match exactly, not in any letter case.
type bodyFields struct {
	model, maxTokens, maxCompletionTokens json.RawMessage
}

// readFields returns body's fields; see bodyFields.
//
// encoding/json checks that the body is one JSON value (json.Valid, which
// allocates nothing); the members of a body known to be valid are then
// found by skipping over the values at the top level, without decoding
// them: a string to its closing quote, an array or object to its closing
// bracket, anything else to the next delimiter. Keys are compared as
// written, or, when they hold an escape, as encoding/json decodes them.
// (The skipping is the priority hand-off's: skipString, skipValue.) The
// work is two passes over the body, and the fields are slices of it:
// nothing a client sends makes the read hold more than its body. A token
// stream (json.Decoder) reads the same, several times slower, with an
// allocation per token; the package's tests compare the two.
func readFields(body []byte) bodyFields {
	if !json.Valid(body) {
		return bodyFields{}
	}
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return bodyFields{} // valid, but not an object
	}
	var f bodyFields
	i = skipSpace(body, i+1)
	for body[i] != '}' {
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
		keyEnd := skipString(body, i)
		key := body[i:keyEnd]
		i = skipSpace(body, keyEnd)
		i = skipSpace(body, i+1) // the colon
		valueEnd := skipValue(body, i)
		value := body[i:valueEnd:valueEnd]
		switch {
		case keyIs(key, "model"):
			f.model = value
		case keyIs(key, "max_tokens"):
			f.maxTokens = value
		case keyIs(key, "max_completion_tokens"):
			f.maxCompletionTokens = value
		}
		i = skipSpace(body, valueEnd)
	}
	return f
}

// keyIs reports whether the JSON string key (with its quotes) is name.
func keyIs(key []byte, name string) bool {
	raw := key[1 : len(key)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == name
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == name
}

// modelName returns the model the fields name: the model member when it
// is a string, else "".
func (f bodyFields) modelName() string {
	if n := len(f.model); n >= 2 && f.model[0] == '"' {
		// A string of valid JSON without an escape, in valid UTF-8, is
		// its own bytes: encoding/json would decode it to the same.
		if raw := f.model[1 : n-1]; bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
			return string(raw)
		}
	}
	var model string
	if f.model != nil && json.Unmarshal(f.model, &model) != nil {
		return "" // not a string: no model
	}
	return model
}

// outputLimit returns the output limit the fields ask for, 0 if none; see
// EstimateTokens.
func (f bodyFields) outputLimit() int64 {
	if n, ok := tokenCount(f.maxCompletionTokens); ok {
		return n
	}
	if n, ok := tokenCount(f.maxTokens); ok {
		return n
	}
	return 0
}
