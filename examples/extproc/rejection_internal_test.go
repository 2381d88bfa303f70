package extproc

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
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
		resp := rejection(&flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedSaturated, RetryAfter: tc.retryAfter})
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
		flowcontrol.OutcomeRejectedSaturated, flowcontrol.OutcomeRejectedTTLExpired,
		flowcontrol.OutcomeRejectedContextCancelled, flowcontrol.OutcomeRejectedShuttingDown,
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
		if reason != o.String() {
			t.Errorf("%v: reason %q, want %q", o, reason, o.String())
		}
		if ir.GetDetails() != o.String() {
			t.Errorf("%v: details %q, want %q", o, ir.GetDetails(), o.String())
		}
	}
	// An error that is not a RejectionError still fails safe.
	ir := rejection(errors.New("boom")).GetImmediateResponse()
	if ir.GetStatus().GetCode() != 503 {
		t.Errorf("unknown error: status %v, want 503", ir.GetStatus().GetCode())
	}
}

func TestRejectionForTooLarge(t *testing.T) {
	err := fmt.Errorf("%w: %w", &flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedSaturated, RetryAfter: time.Second}, flowcontrol.ErrTooLarge)
	ir := rejection(err).GetImmediateResponse()
	if got := ir.GetStatus().GetCode(); got != 413 {
		t.Errorf("status %v, want 413", got)
	}
	var reason, retryAfter string
	for _, opt := range ir.GetHeaders().GetSetHeaders() {
		switch opt.GetHeader().GetKey() {
		case flowcontrol.DroppedReasonHeader:
			reason = string(opt.GetHeader().GetRawValue())
		case "retry-after":
			retryAfter = string(opt.GetHeader().GetRawValue())
		}
	}
	if reason != "rejected-saturated" || retryAfter != "" {
		t.Errorf("reason %q, Retry-After %q; want rejected-saturated and none", reason, retryAfter)
	}
	if want := string(flowhttp.RejectionFor(err).Body); string(ir.GetBody()) != want {
		t.Errorf("body %s, want flowhttp's %s", ir.GetBody(), want)
	}
}

// TestRejectionOfAnExpiry: an expiry's ImmediateResponse carries what
// flowhttp's answer does — 429, the time the request waited in
// x-llm-d-flow-queue-duration-ms and its band's Retry-After — so a
// dispatcher behind Envoy learns as much as one behind flowhttp.
func TestRejectionOfAnExpiry(t *testing.T) {
	err := &flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedTTLExpired, RetryAfter: 3 * time.Second, QueueTime: 2*time.Second + 400*time.Microsecond}
	ir := rejection(err).GetImmediateResponse()
	if got := ir.GetStatus().GetCode(); got != 429 {
		t.Errorf("status %v, want 429", got)
	}
	got := map[string]string{}
	for _, opt := range ir.GetHeaders().GetSetHeaders() {
		got[opt.GetHeader().GetKey()] = string(opt.GetHeader().GetRawValue())
	}
	want := map[string]string{
		"content-type":                  "application/json",
		flowcontrol.DroppedReasonHeader: "rejected-ttl-expired",
		flowhttp.QueueDurationHeader:    "2000",
		"retry-after":                   "3",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("headers %v, want %v", got, want)
	}
}
