package flowhttp

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
)

func TestRejectRetryAfterWholeSecondsRoundedUp(t *testing.T) {
	cases := []struct {
		retryAfter time.Duration
		want       []string // nil: no header
	}{
		{0, nil},
		{-time.Second, nil},
		{time.Nanosecond, []string{"1"}},
		{time.Second, []string{"1"}},
		{1500 * time.Millisecond, []string{"2"}},
		{30 * time.Second, []string{"30"}},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		reject(rec, &flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedCapacity, RetryAfter: c.retryAfter})
		got := rec.Result().Header.Values("Retry-After")
		if len(got) != len(c.want) || (len(got) == 1 && got[0] != c.want[0]) {
			t.Errorf("RetryAfter %v: Retry-After %q, want %q", c.retryAfter, got, c.want)
		}
	}
}

func TestRejectStatusReasonAndBodyPerOutcome(t *testing.T) {
	for _, o := range []flowcontrol.Outcome{
		flowcontrol.OutcomeRejectedCapacity, flowcontrol.OutcomeExpired,
		flowcontrol.OutcomeCancelled, flowcontrol.OutcomeRejectedShutdown,
	} {
		rec := httptest.NewRecorder()
		rej := &flowcontrol.RejectionError{Outcome: o}
		reject(rec, rej)
		res := rec.Result()
		if res.StatusCode != o.HTTPStatus() {
			t.Errorf("%v: status %d, want %d", o, res.StatusCode, o.HTTPStatus())
		}
		if got := res.Header.Get(flowcontrol.DroppedReasonHeader); got != o.DroppedReason() {
			t.Errorf("%v: reason %q, want %q", o, got, o.DroppedReason())
		}
		var body errorBody
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			t.Fatalf("%v: body: %v", o, err)
		}
		if body.Error.Status != o.HTTPStatus() || body.Error.Reason != o.DroppedReason() || body.Error.Message != rej.Error() {
			t.Errorf("%v: body %+v", o, body.Error)
		}
	}
	// An error that is not a RejectionError still fails safe: 503, no reason.
	rec := httptest.NewRecorder()
	reject(rec, errors.New("boom"))
	if res := rec.Result(); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get(flowcontrol.DroppedReasonHeader) != "" {
		t.Errorf("unknown error: %d %q, want 503 and no reason", res.StatusCode, res.Header.Get(flowcontrol.DroppedReasonHeader))
	}
}
