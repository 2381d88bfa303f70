package flowhttp

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
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

// tokenCount reads a plain integer of up to 18 digits without converting
// it to a string; at the edges of that fast path it answers as the long
// way (strconv) does.
func TestTokenCountFastPathEdges(t *testing.T) {
	for _, tc := range []struct {
		raw string
		n   int64
		ok  bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"256", 256, true},
		{"999999999999999999", 999999999999999999, true},   // 18 digits: the fast path's longest
		{"1000000000000000000", 1000000000000000000, true}, // 19: the long way
		{"9223372036854775807", math.MaxInt64, true},       // the largest int64
		{"9223372036854775808", math.MaxInt64, true},       // saturated
		{"01", 1, true}, // a leading zero: the long way, as before
		{"-0", 0, true},
		{"-1", 0, false},
		{"1e3", 1000, true},
		{"12.5", 0, false},
		{"12a", 0, false},
		{`"12"`, 12, true},
		{"null", 0, false},
	} {
		n, ok := tokenCount(json.RawMessage(tc.raw))
		if ok != tc.ok || ok && n != tc.n { // n means nothing when !ok
			t.Errorf("tokenCount(%s) = %d, %v; want %d, %v", tc.raw, n, ok, tc.n, tc.ok)
		}
	}
	raw := json.RawMessage("4096")
	if allocs := testing.AllocsPerRun(100, func() { tokenCount(raw) }); allocs != 0 {
		t.Errorf("tokenCount of a plain integer allocates %v times, want 0", allocs)
	}
}
