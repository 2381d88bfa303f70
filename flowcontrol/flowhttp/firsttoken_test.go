package flowhttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/internal/gatetest"
)

// The handler reports the first byte of the response body as the first
// token — not the header, which a streaming server sends before it has one.
func TestFirstBodyByteIsTheFirstToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatetest.UsageGate{}
		fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
		if err != nil {
			t.Fatal(err)
		}
		defer fc.Close()
		backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			time.Sleep(300 * time.Millisecond) // prefill
			w.Write(nil)                       // an empty write is no token
			time.Sleep(100 * time.Millisecond)
			w.Write([]byte("data: {\"choices\":[{\"text\":\"hi\"}]}\n\n"))
			time.Sleep(2 * time.Second) // decoding the rest
			w.Write([]byte("data: [DONE]\n\n"))
		})
		h := mustHandler(t, flowhttp.Config{Controller: fc}, backend)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/completions", nil))
		if !rec.Flushed {
			t.Fatal("the flush did not reach the client's writer")
		}
		returned := g.Returns()
		if len(returned) != 1 {
			t.Fatalf("gate heard %d returns, want 1", len(returned))
		}
		if u := returned[0]; u.FirstToken != 400*time.Millisecond || u.Held != 2400*time.Millisecond {
			t.Fatalf("usage %+v: want FirstToken 400ms, Held 2.4s", u)
		}
	})
}
