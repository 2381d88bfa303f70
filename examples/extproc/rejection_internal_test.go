package extproc

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
)

func TestRejectionRetryAfterWholeSecondsRoundedUp(t *testing.T) {
	cases := []struct {
		retryAfter time.Duration
		want       string // "" = no header
	}{
		{0, ""},
		{time.Second, "1"},
		{1500 * time.Millisecond, "2"},
		{time.Nanosecond, "1"},
		{30 * time.Second, "30"},
	}
	for _, tc := range cases {
		resp := rejection(&flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedCapacity, RetryAfter: tc.retryAfter})
		got, ok := "", false
		for _, opt := range resp.GetImmediateResponse().GetHeaders().GetSetHeaders() {
			if opt.GetHeader().GetKey() == "retry-after" {
				got, ok = string(opt.GetHeader().GetRawValue()), true
			}
		}
		if tc.want == "" && ok {
			t.Errorf("RetryAfter %v: Retry-After %q, want none", tc.retryAfter, got)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("RetryAfter %v: Retry-After %q, want %q", tc.retryAfter, got, tc.want)
		}
	}
}

func TestRejectionStatusAndReasonPerOutcome(t *testing.T) {
	for _, o := range []flowcontrol.Outcome{
		flowcontrol.OutcomeRejectedCapacity, flowcontrol.OutcomeExpired,
		flowcontrol.OutcomeCancelled, flowcontrol.OutcomeRejectedShutdown,
	} {
		ir := rejection(&flowcontrol.RejectionError{Outcome: o}).GetImmediateResponse()
		if got, want := int(ir.GetStatus().GetCode()), o.HTTPStatus(); got != want {
			t.Errorf("%v: status %d, want %d", o, got, want)
		}
		reason := ""
		for _, opt := range ir.GetHeaders().GetSetHeaders() {
			if opt.GetHeader().GetKey() == flowcontrol.DroppedReasonHeader {
				reason = string(opt.GetHeader().GetRawValue())
			}
		}
		if reason != o.DroppedReason() {
			t.Errorf("%v: reason %q, want %q", o, reason, o.DroppedReason())
		}
		if ir.GetDetails() != o.DroppedReason() {
			t.Errorf("%v: details %q, want %q", o, ir.GetDetails(), o.DroppedReason())
		}
	}
	// An error that is not a RejectionError still fails safe.
	ir := rejection(errors.New("boom")).GetImmediateResponse()
	if ir.GetStatus().GetCode() != 503 {
		t.Errorf("unknown error: status %v, want 503", ir.GetStatus().GetCode())
	}
}
