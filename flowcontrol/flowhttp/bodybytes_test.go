package flowhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// BodyBytes gives the classifier the whole body the Handler read, however
// much of r.Body the classifier has read, and the wrapped handler still
// receives the whole body; any other request has no such bytes.
func TestBodyBytes(t *testing.T) {
	const body = `{"model":"m","prompt":"hello","max_tokens":7}`
	var classified string
	var classifiedOK bool
	classify := func(r *http.Request) (flowhttp.Classification, error) {
		head := make([]byte, 5)
		_, _ = io.ReadFull(r.Body, head) // a part read first changes nothing
		b, ok := flowhttp.BodyBytes(r)
		classified, classifiedOK = string(b), ok
		return flowhttp.Classification{}, nil
	}
	fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}, Gate: gate.MaxInFlight(1)})
	var served string
	h := mustHandler(t, flowhttp.Config{Controller: fc, Classify: classify}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		served = string(b)
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(body)))
	if !classifiedOK || classified != body {
		t.Errorf("BodyBytes in the classifier = %q, %v; want %q, true", classified, classifiedOK, body)
	}
	if served != body {
		t.Errorf("the wrapped handler read %q, want %q", served, body)
	}

	if b, ok := flowhttp.BodyBytes(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))); ok || b != nil {
		t.Errorf("BodyBytes of a request the Handler did not read = %q, %v; want nil, false", b, ok)
	}
	if b, ok := flowhttp.BodyBytes(httptest.NewRequest(http.MethodGet, "/", nil)); ok || b != nil {
		t.Errorf("BodyBytes of a request without a body = %q, %v; want nil, false", b, ok)
	}
}
