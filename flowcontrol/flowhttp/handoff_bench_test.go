package flowhttp_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// chatBody is a chat completion request of about 2 KB with a priority of
// the client's.
var chatBody = []byte(`{"model":"m","priority":-5,"messages":[{"role":"user","content":"` +
	strings.Repeat("lorem ipsum ", 170) + `"}],"max_tokens":256,"stream":true}`)

// BenchmarkServeHTTPHandoff measures a request through a Handler (no
// gate, a wrapped handler that reads the body) with the hand-off off and
// on. The baseline is handoff=off, which must allocate exactly what a
// Handler without the option did: the option costs a bool test when off.
func BenchmarkServeHTTPHandoff(b *testing.B) {
	for _, c := range []struct {
		name    string
		handoff flowhttp.PriorityHandoff
	}{
		{"handoff=off", flowhttp.PriorityHandoff{}},
		{"handoff=on", flowhttp.PriorityHandoff{Enabled: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			fc := newController(b, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 100)}})
			var buf bytes.Buffer
			h := mustHandler(b, flowhttp.Config{Controller: fc, PriorityHandoff: c.handoff},
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					buf.Reset()
					buf.ReadFrom(r.Body)
				}))
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				req.Body = readerBody{bytes.NewReader(chatBody)}
				req.ContentLength = int64(len(chatBody))
				h.ServeHTTP(w, req)
			}
		})
	}
}

// BenchmarkSetBodyPriority measures the rewrite of a 2 KB chat body;
// the baseline is json.Valid over the same body, the validation the
// rewrite starts with.
func BenchmarkSetBodyPriority(b *testing.B) {
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(chatBody)))
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(chatBody) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("SetBodyPriority", func(b *testing.B) {
		b.SetBytes(int64(len(chatBody)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := flowhttp.SetBodyPriority(chatBody, -10); !ok {
				b.Fatal("passed through")
			}
		}
	})
}

// readerBody is a request body over a reader that closes as a no-op.
type readerBody struct{ *bytes.Reader }

func (readerBody) Close() error { return nil }
