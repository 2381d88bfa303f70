package flowhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
)

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})

func TestNewConfigErrors(t *testing.T) {
	fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
	classify := func(*http.Request) (flowhttp.Classification, error) { return flowhttp.Classification{}, nil }
	cases := []struct {
		name string
		cfg  flowhttp.Config
		next http.Handler
		want string // substring of the error; "" = no error
	}{
		{"defaults", flowhttp.Config{Controller: fc}, okHandler, ""},
		{"custom classifier", flowhttp.Config{Controller: fc, Classify: classify}, okHandler, ""},
		{"header classifier", flowhttp.Config{Controller: fc, Headers: flowhttp.HeaderClassifier{
			PriorityHeader: "x-llm-d-priority", ObjectiveHeader: "x-objective", Objectives: map[string]int{"chat": 10},
		}}, okHandler, ""},
		{"no controller", flowhttp.Config{}, okHandler, "Config.Controller is nil"},
		{"no handler", flowhttp.Config{Controller: fc}, nil, "handler to wrap is nil"},
		{"both classifiers", flowhttp.Config{Controller: fc, Classify: classify,
			Headers: flowhttp.HeaderClassifier{DefaultPriority: 1}}, okHandler, "Config.Headers is set but Config.Classify"},
		{"bad priority header", flowhttp.Config{Controller: fc, Headers: flowhttp.HeaderClassifier{
			PriorityHeader: "x priority"}}, okHandler, `PriorityHeader "x priority": not a valid header name`},
		{"bad objective header", flowhttp.Config{Controller: fc, Headers: flowhttp.HeaderClassifier{
			ObjectiveHeader: "x-objective:", Objectives: map[string]int{"chat": 1}}}, okHandler, `ObjectiveHeader "x-objective:": not a valid header name`},
		{"objective header without objectives", flowhttp.Config{Controller: fc, Headers: flowhttp.HeaderClassifier{
			ObjectiveHeader: "x-objective"}}, okHandler, "Objectives is empty"},
		{"empty objective", flowhttp.Config{Controller: fc, Headers: flowhttp.HeaderClassifier{
			Objectives: map[string]int{"": 1}}}, okHandler, "empty objective name"},
	}
	for _, c := range cases {
		h, err := flowhttp.New(c.cfg, c.next)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.name, err)
		case c.want == "" && h == nil:
			t.Errorf("%s: nil Handler", c.name)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "flowhttp: ")):
			t.Errorf("%s: error %v, want one starting with flowhttp: and containing %q", c.name, err, c.want)
		case c.want != "" && h != nil:
			t.Errorf("%s: a Handler with an error", c.name)
		}
	}
}

func TestHeaderClassifier(t *testing.T) {
	c := flowhttp.HeaderClassifier{
		PriorityHeader:  "x-llm-d-priority",
		Objectives:      map[string]int{"chat": 10, "batch": -10},
		DefaultPriority: 1,
	}
	cases := []struct {
		name   string
		header http.Header
		want   flowcontrol.FlowKey
	}{
		{"nothing", http.Header{}, flowcontrol.FlowKey{ID: "default-flow", Priority: 1}},
		{"fairness id", http.Header{"X-Llm-D-Inference-Fairness-Id": {"tenant-a"}}, flowcontrol.FlowKey{ID: "tenant-a", Priority: 1}},
		{"deprecated alias", http.Header{"X-Gateway-Inference-Fairness-Id": {"tenant-b"}}, flowcontrol.FlowKey{ID: "tenant-b", Priority: 1}},
		{"new name wins", http.Header{"X-Llm-D-Inference-Fairness-Id": {"new"}, "X-Gateway-Inference-Fairness-Id": {"old"}},
			flowcontrol.FlowKey{ID: "new", Priority: 1}},
		{"empty new name falls back", http.Header{"X-Llm-D-Inference-Fairness-Id": {""}, "X-Gateway-Inference-Fairness-Id": {"old"}},
			flowcontrol.FlowKey{ID: "old", Priority: 1}},
		{"lower-case map key", http.Header{"x-llm-d-inference-fairness-id": {"raw"}, "x-llm-d-priority": {"7"}},
			flowcontrol.FlowKey{ID: "raw", Priority: 7}},
		{"priority header", http.Header{"X-Llm-D-Priority": {" -5 "}}, flowcontrol.FlowKey{ID: "default-flow", Priority: -5}},
		{"priority beats objective", http.Header{"X-Llm-D-Priority": {"3"}, "X-Gateway-Inference-Objective": {"chat"}},
			flowcontrol.FlowKey{ID: "default-flow", Priority: 3}},
		{"bad priority: objective", http.Header{"X-Llm-D-Priority": {"high"}, "X-Gateway-Inference-Objective": {"batch"}},
			flowcontrol.FlowKey{ID: "default-flow", Priority: -10}},
		{"unknown objective", http.Header{"X-Gateway-Inference-Objective": {"other"}}, flowcontrol.FlowKey{ID: "default-flow", Priority: 1}},
	}
	for _, tc := range cases {
		if got := c.FlowKey(tc.header); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header = tc.header
		if got, err := c.Classify(r); got != (flowhttp.Classification{Key: tc.want}) || err != nil {
			t.Errorf("%s: Classify %+v, %v", tc.name, got, err)
		}
	}
	if got := (flowhttp.HeaderClassifier{}).FlowKey(http.Header{"X-Llm-D-Priority": {"3"}}); got != (flowcontrol.FlowKey{ID: "default-flow"}) {
		t.Errorf("zero classifier: %+v, want default-flow at 0", got)
	}
}

// TestCustomClassifier: a custom classifier decides the flow key, and its
// error refuses the request with 400 before flow control sees it.
func TestCustomClassifier(t *testing.T) {
	var events []flowcontrol.Event
	fc := newController(t, flowcontrol.Config{
		Bands:    []flowcontrol.BandConfig{band(0, 10), band(2, 5)},
		Observer: func(ev flowcontrol.Event) { events = append(events, ev) },
	})
	h, err := flowhttp.New(flowhttp.Config{Controller: fc, Classify: func(r *http.Request) (flowhttp.Classification, error) {
		if r.URL.Path == "/bad" {
			return flowhttp.Classification{}, errors.New("no tenant")
		}
		return flowhttp.Classification{Key: flowcontrol.FlowKey{ID: "path" + r.URL.Path, Priority: 2}}, nil
	}}, okHandler)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ok", nil))
	if got := rec.Result().Header.Get(headroom.HeaderName); got != "5" {
		t.Errorf("headroom %q, want 5 (band 2)", got)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/bad", nil))
	res := rec.Result()
	if res.StatusCode != http.StatusBadRequest || res.Header.Get(flowcontrol.DroppedReasonHeader) != "" {
		t.Errorf("classifier error: %d %q, want 400 without a dropped reason", res.StatusCode, res.Header.Get(flowcontrol.DroppedReasonHeader))
	}
	if e := decodeError(t, rec.Body.String()); !strings.Contains(e.Error.Message, "no tenant") {
		t.Errorf("body %+v does not explain the error", e)
	}
	want := []flowcontrol.Event{{
		Requested: flowcontrol.FlowKey{ID: "path/ok", Priority: 2},
		Effective: flowcontrol.FlowKey{ID: "path/ok", Priority: 2},
		Outcome:   flowcontrol.OutcomeDispatched,
	}}
	for i := range events {
		events[i].EnqueueTime = 0 // the real clock's reading
	}
	if !slices.Equal(events, want) {
		t.Errorf("events %+v, want %+v", events, want)
	}
}

// TestCancelledRequestAnswered503: a request whose context has ended is
// answered 503 rejected-context-cancelled (nobody may read it, but a proxy
// in between logs it) and its handler never runs.
func TestCancelledRequestAnswered503(t *testing.T) {
	fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
	called := false
	h := newHandler(t, fc, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	res := rec.Result()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get(flowcontrol.DroppedReasonHeader) != "rejected-context-cancelled" {
		t.Errorf("%d %q, want 503 rejected-context-cancelled", res.StatusCode, res.Header.Get(flowcontrol.DroppedReasonHeader))
	}
	if called {
		t.Error("the wrapped handler ran for a cancelled request")
	}
}

// TestHandlerThatWritesNothingIsStamped: when the wrapped handler writes
// nothing, net/http sends the header map as it is after the handler
// returns, and the router's headers are in it.
func TestHandlerThatWritesNothingIsStamped(t *testing.T) {
	fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
	h := newHandler(t, fc, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["x-llm-d-flow-band-headroom-requests"] = []string{"9999"}
	}))
	res, _ := send(t, http.DefaultClient, loopbackServer(t, h), 0)
	if got := routerHeaders(res.Header); !mapsEqual(got, map[string][]string{
		headroom.HeaderName: {"10"}, flowhttp.QueueDurationHeader: {"0"},
	}) {
		t.Errorf("router-owned headers %v, want headroom 10 and queue duration 0", got)
	}
}

// TestCapacityReader: Config.Capacity replaces the controller as the source
// of the headroom header.
func TestCapacityReader(t *testing.T) {
	fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
	var bands capacity.Bands
	bands.Set(capacity.Snapshot{Priority: 0, QueuedRequests: 3, RequestCapacity: capacity.Bounded(4)})
	h := mustHandler(t, flowhttp.Config{Controller: fc, Capacity: &bands}, okHandler)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if got := rec.Result().Header.Get(headroom.HeaderName); got != "1" {
		t.Errorf("headroom %q, want 1 from the configured reader", got)
	}
}
