package modelserver

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/sluicegate/sluice/internal/openaierror"
)

// FuzzDecodeRequest feeds arbitrary bodies to the request decoder of both
// routes: it never panics; what it accepts fits the context and asks for at
// least one token of prompt and of output; what it refuses is a 400 with a
// well-formed OpenAI error body.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"sim","prompt":"hello world","max_tokens":8}`,
		`{"prompt":[1,2,3],"max_completion_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":["a b"],"n":1,"ignore_eos":true}`,
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null}],"max_tokens":3}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a b c"}]}]}`,
		`{"prompt":"a","max_tokens":99999}`,
		`{"prompt":"a","priority":-3}`, `{"prompt":"a","priority":99999999999}`,
		`{"prompt":null}`, `[]`, `{`, ``,
	} {
		f.Add(seed)
	}
	fcfs := Config{MaxModelLen: 64}.withDefaults()
	priority := Config{MaxModelLen: 64, SchedulingPolicy: PolicyPriority}.withDefaults()
	f.Fuzz(func(t *testing.T, body string) {
		for _, ep := range []endpoint{completions, chatCompletions} {
			cfg := fcfs
			if len(body)%2 == 1 {
				cfg = priority
			}
			req, err := decodeRequest(ep, []byte(body), cfg)
			if err != nil {
				var e *apiError
				if !errors.As(err, &e) || e.status != 400 || e.message == "" || e.typ != "invalid_request_error" {
					t.Fatalf("endpoint %d, %q: error %#v", ep, body, err)
				}
				var b openaierror.Body
				if json.Unmarshal(e.body(), &b) != nil || b.Error.Message != e.message {
					t.Fatalf("endpoint %d, %q: error body %s", ep, body, e.body())
				}
				continue
			}
			if req.endpoint != ep || req.promptTokens < 1 || req.maxTokens < 1 || req.promptTokens+req.maxTokens > cfg.MaxModelLen {
				t.Fatalf("endpoint %d, %q: accepted %+v beyond the context of %d", ep, body, req, cfg.MaxModelLen)
			}
			if req.priority != 0 && cfg.SchedulingPolicy != PolicyPriority || req.priority < minPriority || req.priority > maxPriority {
				t.Fatalf("endpoint %d, %q: accepted priority %d under %s", ep, body, req.priority, cfg.SchedulingPolicy)
			}
			if req.includeUsage && !req.stream {
				t.Fatalf("endpoint %d, %q: usage chunk without a stream", ep, body)
			}
		}
	})
}
