package flowhttp

import (
	"strings"
	"testing"
)

// fieldBodies are bodies whose fields the two readers must read alike.
var fieldBodies = []string{
	``, `{}`, `null`, `[]`, `"s"`, `7`, `not json`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`,
	`{"model":"a","model":"b"}`, `{"model":"a","model":7}`, `{"Model":"case"}`, `{"model":null}`,
	`{"mod\u0065l":"escaped key"}`, `{"model":"\u00e9t\u00e9"}`, `{"model":"m"} {"model":"n"}`, `{"model":"m"`,
	`{"max_tokens":32,"max_completion_tokens":16}`, `{"max_completion_tokens":null,"max_tokens":32}`,
	`{"max_tokens":1e3}`, `{"max_tokens":"64"}`, `{"max_tokens":" 64 "}`, `{"max_tokens":-1}`, `{"max_tokens":1.5}`,
	`{"max_tokens":99999,"max_tokens":8}`, `{"MAX_TOKENS":99999}`, `{"extra":{"max_tokens":99999}}`,
	`{ "max_tokens" : 12 , "model" : "spaced" }`, "{\"model\":\"\xff\"}", "{\"\xff\":1,\"max_tokens\":2}",
	`{"a":` + strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000) + `,"max_tokens":5}`,
	`{"a":` + strings.Repeat(`[`, 9000) + strings.Repeat(`]`, 9000) + `,"max_tokens":5}`,
}

// checkReaders fails t unless both readers read body's model and output
// limit alike: the whole-body reader is a faster route to the stream's
// reading, not another reading.
func checkReaders(t *testing.T, body []byte) {
	t.Helper()
	whole, stream := readFieldsWhole(body), readFieldsStream(body)
	if w, s := whole.modelName(), stream.modelName(); w != s {
		t.Errorf("body %.200q: model %q read whole, %q as a stream", body, w, s)
	}
	if w, s := whole.outputLimit(), stream.outputLimit(); w != s {
		t.Errorf("body %.200q: output limit %d read whole, %d as a stream", body, w, s)
	}
}

func TestReadersAgree(t *testing.T) {
	for _, body := range fieldBodies {
		checkReaders(t, []byte(body))
	}
}

// A body over smallBody is read as a stream, with the same result.
func TestLargeBodyReadAsStream(t *testing.T) {
	body := []byte(`{"model":"big","prompt":"` + strings.Repeat("a", smallBody) + `","max_tokens":7}`)
	f := readFields(body)
	if f.modelName() != "big" || f.outputLimit() != 7 {
		t.Errorf("large body: model %q, output limit %d; want big, 7", f.modelName(), f.outputLimit())
	}
	checkReaders(t, body)
}

func FuzzReadersAgree(f *testing.F) {
	for _, body := range fieldBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(checkReaders)
}
