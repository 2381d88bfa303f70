package flowhttp_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
)

// faultyReader fails every read: with an error, or by panicking.
type faultyReader struct{ panics bool }

func (r faultyReader) CapacitySnapshot(int) (capacity.Snapshot, error) {
	if r.panics {
		panic("reader bug")
	}
	return capacity.Snapshot{}, errors.New("registry unavailable")
}

// A reader that fails or panics costs the response only its headroom
// header, and leaves a trace in the log.
func TestLoggerHearsReaderFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reader faultyReader
		want   string
	}{
		{"error", faultyReader{}, "registry unavailable"},
		{"panic", faultyReader{panics: true}, "reader bug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}})
			if err != nil {
				t.Fatal(err)
			}
			defer fc.Close()
			var logs bytes.Buffer
			h := mustHandler(t, flowhttp.Config{
				Controller: fc,
				Capacity:   tc.reader,
				Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
			}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Code != http.StatusOK || rec.Body.String() != "ok" {
				t.Fatalf("response %d %q: a failed read must not spoil it", rec.Code, rec.Body.String())
			}
			if v := rec.Header().Values(headroom.HeaderName); len(v) != 0 {
				t.Fatalf("headroom header %q stamped from a failed read", v)
			}
			if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, tc.want) || !strings.Contains(got, "priority=0") {
				t.Fatalf("log %q: want a warning naming the band and %q", got, tc.want)
			}
		})
	}
}
