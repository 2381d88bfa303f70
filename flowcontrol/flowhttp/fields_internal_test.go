package flowhttp

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// readFieldsStream is the reference readFields is checked against: the
// members read with a json.Decoder token stream, as the package read them
// before readFields skipped over the values.
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
	if _, err := dec.Token(); err != io.EOF {
		// Something after the object, a token or not: not one JSON value.
		// (The package's stream reader took `{...}A` for the object, as
		// its doc comments did not; the fuzz target found it.)
		return bodyFields{}
	}
	return f
}

// fieldBodies are bodies whose fields readFields must read as the
// reference does.
var fieldBodies = []string{
	``, ` `, `{}`, ` { } `, `null`, `[]`, `"s"`, `7`, `not json`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`,
	`{"model":"a","model":"b"}`, `{"model":"a","model":7}`, `{"Model":"case"}`, `{"model":null}`,
	`{"mod\u0065l":"escaped key"}`, `{"model\"":"quote in key","model":"m"}`, `{"a\\":"x","model":"m"}`,
	`{"model":"\u00e9t\u00e9"}`, `{"model":"a\"b\\"}`, `{"model":"m"} {"model":"n"}`, `{"model":"0"}A`, `{"max_tokens":5} x`, `{"model":"m"`,
	`{"max_tokens":32,"max_completion_tokens":16}`, `{"max_completion_tokens":null,"max_tokens":32}`,
	`{"max_tokens":1e3}`, `{"max_tokens":-0.0E+2}`, `{"max_tokens":"64"}`, `{"max_tokens":" 64 "}`, `{"max_tokens":-1}`,
	`{"max_tokens":1.5}`, `{"max_tokens":true}`, `{"max_tokens":[8]}`, `{"max_tokens":{"n":5}}`,
	`{"max_tokens":99999,"max_tokens":8}`, `{"MAX_TOKENS":99999}`, `{"extra":{"max_tokens":99999}}`,
	`{"a":[{"b":"]}"},"}",[]],"max_tokens":3}`, `{"s":"{[\"","max_tokens":6}`,
	"{ \"max_tokens\" :\t12 ,\r\n \"model\" : \"spaced\" }", "{\"model\":\"\xff\"}", "{\"\xff\":1,\"max_tokens\":2}",
	`{"a":` + strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000) + `,"max_tokens":5}`,
	`{"a":` + strings.Repeat(`[`, 9000) + strings.Repeat(`]`, 9000) + `,"max_tokens":5}`,
}

// checkReaders fails t unless readFields reads body's model and output
// limit as the reference does.
func checkReaders(t *testing.T, body []byte) {
	t.Helper()
	got, want := readFields(body), readFieldsStream(body)
	if g, w := got.modelName(), want.modelName(); g != w {
		t.Errorf("body %.200q: model %q, want %q", body, g, w)
	}
	if g, w := got.outputLimit(), want.outputLimit(); g != w {
		t.Errorf("body %.200q: output limit %d, want %d", body, g, w)
	}
}

func TestReadFieldsAsTheStream(t *testing.T) {
	for _, body := range fieldBodies {
		checkReaders(t, []byte(body))
	}
	large := []byte(`{"model":"big","prompt":"` + strings.Repeat("a\\\"[{", 1<<15) + `","max_tokens":7}`)
	if f := readFields(large); f.modelName() != "big" || f.outputLimit() != 7 {
		t.Errorf("large body: model %q, output limit %d; want big, 7", f.modelName(), f.outputLimit())
	}
	checkReaders(t, large)
}

// FuzzReadFields: whatever the body, readFields reads what the reference
// reads.
func FuzzReadFields(f *testing.F) {
	for _, body := range fieldBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(checkReaders)
}

// BenchmarkReadFields reads a small chat completion's fields; the
// baseline, stream, is the json.Decoder token stream the package used
// before.
func BenchmarkReadFields(b *testing.B) {
	body := []byte(`{"model":"loadbench","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say ok."}],"max_tokens":16,"stream":false}`)
	for _, bc := range []struct {
		name string
		read func([]byte) bodyFields
	}{{"impl=stream", readFieldsStream}, {"impl=readFields", readFields}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f := bc.read(body)
				if f.modelName() != "loadbench" || f.outputLimit() != 16 {
					b.Fatal("misread")
				}
			}
		})
	}
}
