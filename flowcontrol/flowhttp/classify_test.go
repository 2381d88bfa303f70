package flowhttp_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

func TestObjectiveHeaderAndAlias(t *testing.T) {
	objectives := map[string]int{"chat": 10, "batch": -10}
	cases := []struct {
		name            string
		objectiveHeader string
		header          http.Header
		want            int
	}{
		{"new name", "", http.Header{"X-Llm-D-Inference-Objective": {"chat"}}, 10},
		{"deprecated alias", "", http.Header{"X-Gateway-Inference-Objective": {"batch"}}, -10},
		{"new name wins", "", http.Header{"X-Llm-D-Inference-Objective": {"chat"}, "X-Gateway-Inference-Objective": {"batch"}}, 10},
		{"empty new name: alias", "", http.Header{"X-Llm-D-Inference-Objective": {""}, "X-Gateway-Inference-Objective": {"batch"}}, -10},
		{"unknown new name: no alias", "", http.Header{"X-Llm-D-Inference-Objective": {"other"}, "X-Gateway-Inference-Objective": {"batch"}}, 1},
		{"lower-case keys", "", http.Header{"x-gateway-inference-objective": {"chat"}}, 10},
		{"default set explicitly keeps the alias", "X-LLM-D-Inference-Objective", http.Header{"X-Gateway-Inference-Objective": {"batch"}}, -10},
		{"override", "x-objective", http.Header{"X-Objective": {"chat"}}, 10},
		{"override reads nothing else", "x-objective", http.Header{"X-Llm-D-Inference-Objective": {"chat"}, "X-Gateway-Inference-Objective": {"batch"}}, 1},
		{"override to the deprecated name alone", "x-gateway-inference-objective", http.Header{"X-Llm-D-Inference-Objective": {"chat"}, "X-Gateway-Inference-Objective": {"batch"}}, -10},
	}
	for _, c := range cases {
		hc := flowhttp.HeaderClassifier{ObjectiveHeader: c.objectiveHeader, Objectives: objectives, DefaultPriority: 1}
		assert.Equal(t, c.want, hc.FlowKey(c.header).Priority, c.name)
	}
}

func TestTTLHeader(t *testing.T) {
	cases := []struct {
		value   []string // nil: absent
		want    time.Duration
		wantErr string
	}{
		{nil, 0, ""},
		{[]string{""}, 0, ""},
		{[]string{"  "}, 0, ""},
		{[]string{"30s"}, 30 * time.Second, ""},
		{[]string{" 500ms\t"}, 500 * time.Millisecond, ""},
		{[]string{"1m30s", "5s"}, 90 * time.Second, ""}, // the first value
		{[]string{"1ns"}, time.Nanosecond, ""},
		{[]string{"0"}, 0, "not positive"},
		{[]string{"0s"}, 0, "not positive"},
		{[]string{"-1s"}, 0, "not positive"},
		{[]string{"5"}, 0, "not a Go duration"},
		{[]string{"soon"}, 0, "not a Go duration"},
		{[]string{"1e3s"}, 0, "not a Go duration"},
		{[]string{"9999999h"}, 0, "not a Go duration"}, // out of range
	}
	for _, c := range cases {
		h := http.Header{"X-Llm-D-Inference-Fairness-Id": {"tenant"}}
		if c.value != nil {
			h["X-Llm-D-Inference-Ttl"] = c.value
		}
		got, err := flowhttp.HeaderClassifier{DefaultPriority: 3}.ClassifyHeader(h)
		if c.wantErr != "" {
			if assert.Error(t, err, "%q", c.value) {
				assert.Contains(t, err.Error(), c.wantErr, "%q", c.value)
				assert.Contains(t, err.Error(), flowhttp.TTLHeader, "%q", c.value)
				assert.True(t, strings.HasPrefix(err.Error(), "flowhttp: "), "%q", err)
			}
			continue
		}
		require.NoError(t, err, "%q", c.value)
		want := flowhttp.Classification{Key: flowcontrol.FlowKey{ID: "tenant", Priority: 3}, TTL: c.want}
		assert.Equal(t, want, got, "%q", c.value)
	}
	// Any letter case.
	got, err := flowhttp.HeaderClassifier{}.ClassifyHeader(http.Header{"x-llm-d-inference-ttl": {"2s"}})
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, got.TTL)
}

// TestTTLHeaderOverHTTP: the TTL a request asks for bounds its wait, but
// only shortens the band's; a bad value is refused with 400 before
// queueing.
func TestTTLHeaderOverHTTP(t *testing.T) {
	cases := []struct {
		name    string
		bandTTL time.Duration
		header  string
		wait    time.Duration // until expiry; 0: refused at once with 400
	}{
		{"header alone", 0, "2s", 2 * time.Second},
		{"header shorter than the band's", 5 * time.Second, "1500ms", 1500 * time.Millisecond},
		{"header longer than the band's", 1 * time.Second, "1h", 1 * time.Second},
		{"malformed", 1 * time.Second, "2", 0},
		{"zero", 1 * time.Second, "0s", 0},
		{"negative", 0, "-3s", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := band(0, 10)
				b.TTL = c.bandTTL
				var outcomes []flowcontrol.Outcome
				fc := newController(t, flowcontrol.Config{
					Bands:    []flowcontrol.BandConfig{b},
					Gate:     newCountingGate(1),
					Observer: func(ev flowcontrol.Event) { outcomes = append(outcomes, ev.Outcome) },
				})
				client, backend, held := startHeld(t, fc)
				start := time.Now()
				res := <-goSend(t.Context(), client, 0, flowhttp.TTLHeader, c.header)
				waited := time.Since(start)
				if c.wait == 0 {
					assert.Equal(t, http.StatusBadRequest, res.status)
					assert.Zero(t, waited, "refused after a wait")
					assert.Empty(t, res.header.Get(flowcontrol.DroppedReasonHeader))
					e := decodeError(t, res.body)
					assert.Equal(t, "invalid_request_error", e.Error.Type)
					assert.Empty(t, e.code())
					assert.Contains(t, e.Error.Message, flowhttp.TTLHeader)
				} else {
					assert.Equal(t, http.StatusTooManyRequests, res.status)
					assert.Equal(t, "rejected-ttl-expired", res.header.Get(flowcontrol.DroppedReasonHeader))
					assert.Equal(t, c.wait, waited)
				}
				close(backend.respond)
				<-held
				synctest.Wait()
				want := []flowcontrol.Outcome{flowcontrol.OutcomeDispatched}
				if c.wait != 0 {
					want = append(want, flowcontrol.OutcomeRejectedTTLExpired)
				}
				if diff := cmp.Diff(want, outcomes); diff != "" {
					t.Errorf("outcomes (-want +got):\n%s", diff)
				}
				assert.EqualValues(t, 1, backend.calls.Load())
			})
		})
	}
}

// TestClassificationIsDeterministic: when a header name is held under
// several spellings, the canonical key wins when it has a value (even an
// empty one, which then counts as absent), else the smallest key in byte
// order; never whichever map iteration finds first.
func TestClassificationIsDeterministic(t *testing.T) {
	c := flowhttp.HeaderClassifier{
		PriorityHeader: "x-llm-d-priority",
		Objectives:     map[string]int{"chat": 10, "batch": -10},
	}
	h := http.Header{
		// Canonical but empty: absent, so the deprecated alias is read.
		"X-Llm-D-Inference-Fairness-Id": {""},
		"x-llm-d-inference-fairness-id": {"lower"},
		"X-LLM-D-INFERENCE-FAIRNESS-ID": {"upper"},
		// No canonical key: the smallest in byte order, upper case first.
		"x-gateway-inference-fairness-id": {"lower-alias"},
		"X-GATEWAY-INFERENCE-FAIRNESS-ID": {"upper-alias"},
		"X-Gateway-INFERENCE-Fairness-ID": {"mixed-alias"},
		// A canonical key with no values does not count.
		"X-Llm-D-Priority":            {},
		"x-llm-d-priority":            {"high"},
		"X-LLM-D-PRIORITY":            {"bad"}, // not an integer: the objective decides
		"x-LLM-d-priority":            {"7"},
		"X-Llm-D-Inference-Objective": {"chat"},
		"x-llm-d-inference-objective": {"batch"},
		"x-llm-d-inference-ttl":       {"3s"},
		"X-LLM-D-INFERENCE-TTL":       {"bad"},
		"X-Llm-D-Inference-Ttl":       {"1s"},
	}
	want := flowhttp.Classification{Key: flowcontrol.FlowKey{ID: "upper-alias", Priority: 10}, TTL: time.Second}
	for i := range 1000 {
		got, err := c.ClassifyHeader(h)
		require.NoError(t, err, "call %d", i)
		require.Equal(t, want, got, "call %d", i)
	}
	// An empty canonical TTL hides the other spellings.
	h["X-Llm-D-Inference-Ttl"] = []string{""}
	for i := range 1000 {
		got, err := c.ClassifyHeader(h)
		require.NoError(t, err, "call %d", i)
		require.Zero(t, got.TTL, "call %d", i)
	}
}

// classifiedNames are the headers a HeaderClassifier with PriorityHeader
// "x-llm-d-priority" reads.
var classifiedNames = []string{
	flowhttp.FairnessIDHeader, flowhttp.DeprecatedFairnessIDHeader,
	"x-llm-d-priority", flowhttp.DefaultObjectiveHeader, flowhttp.DeprecatedObjectiveHeader,
	flowhttp.TTLHeader,
}

// TestClassificationIgnoresSpelling: a header map whose keys are spelled in
// any letter case classifies as its canonical form does, as long as no two
// spellings of one name disagree.
func TestClassificationIgnoresSpelling(t *testing.T) {
	c := flowhttp.HeaderClassifier{
		PriorityHeader: "x-llm-d-priority",
		Objectives:     map[string]int{"chat": 10, "batch": -10},
	}
	values := rapid.SampledFrom([]string{"", "tenant-a", "tenant-b", "7", " -3 ", "chat", "batch", "30s", "500ms", "0", "-1s", "soon"})
	rapid.Check(t, func(t *rapid.T) {
		h, canonical := http.Header{}, http.Header{}
		for _, name := range classifiedNames {
			if !rapid.Bool().Draw(t, "present "+name) {
				continue
			}
			vs := rapid.SliceOfN(values, 0, 2).Draw(t, "values of "+name)
			spellings := rapid.IntRange(1, 3).Draw(t, "spellings of "+name)
			for i := range spellings {
				h[spell(t, name, i)] = vs
			}
			if len(vs) > 0 {
				canonical[http.CanonicalHeaderKey(name)] = vs
			}
		}
		got, gotErr := c.ClassifyHeader(h)
		want, wantErr := c.ClassifyHeader(canonical)
		if (gotErr != nil) != (wantErr != nil) || got != want {
			t.Fatalf("%q classifies as %+v, %v; its canonical form %q as %+v, %v", h, got, gotErr, canonical, want, wantErr)
		}
	})
}

// spell draws a spelling of name: each letter in either case.
func spell(t *rapid.T, name string, i int) string {
	upper := rapid.SliceOfN(rapid.Bool(), len(name), len(name)).Draw(t, "case of spelling "+string(rune('0'+i))+" of "+name)
	b := []byte(name)
	for j := range b {
		if upper[j] && 'a' <= b[j] && b[j] <= 'z' {
			b[j] -= 'a' - 'A'
		}
	}
	return string(b)
}
