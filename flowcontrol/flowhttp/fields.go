package flowhttp

import (
	"bytes"
	"encoding/json"
)

// bodyFields are the members of a request body's top-level object that
// the package reads, raw; each is nil when absent, and all are nil for a
// body that is not one JSON object. When a key repeats, its last value is
// kept, as the model server reads it; keys match exactly, not in any
// letter case.
type bodyFields struct {
	model, maxTokens, maxCompletionTokens json.RawMessage
}

// smallBody is the largest body readFields reads whole into a map of its
// top-level members: one validating pass and a decode, several times
// cheaper than a token stream. A map holds every distinct key, so a
// larger body, whose cost its size dominates anyway, is read as a stream
// instead, which keeps nothing but the members wanted: a client cannot
// make the read hold much more memory than its body.
const smallBody = 64 << 10

// readFields returns body's fields; see bodyFields.
func readFields(body []byte) bodyFields {
	if len(body) <= smallBody {
		return readFieldsWhole(body)
	}
	return readFieldsStream(body)
}

// readFieldsWhole reads body with json.Unmarshal: it fails on anything
// but one JSON value, and a map takes each key exactly, the last of a
// repeated one.
func readFieldsWhole(body []byte) bodyFields {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return bodyFields{} // not JSON, or not an object
	}
	// A body of null leaves members nil: no fields, as for any other
	// value that is not an object.
	return bodyFields{model: members["model"], maxTokens: members["max_tokens"],
		maxCompletionTokens: members["max_completion_tokens"]}
}

// readFieldsStream reads body as a stream of tokens, keeping only the
// wanted members.
func readFieldsStream(body []byte) bodyFields {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bodyFields{}
	}
	var f bodyFields
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bodyFields{}
		}
		key, _ := tok.(string) // an object's keys are strings
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return bodyFields{}
		}
		switch key {
		case "model":
			f.model = value
		case "max_tokens":
			f.maxTokens = value
		case "max_completion_tokens":
			f.maxCompletionTokens = value
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return bodyFields{}
	}
	if _, err := dec.Token(); err == nil {
		return bodyFields{} // something after the object: not one JSON value
	}
	return f
}

// modelName returns the model the fields name: the model member when it
// is a string, else "".
func (f bodyFields) modelName() string {
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
