package extproc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
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
	checkImmediate(t, rejection(err).GetImmediateResponse(), 429, map[string]string{
		"content-type":                  "application/json",
		flowcontrol.DroppedReasonHeader: "rejected-ttl-expired",
		flowhttp.QueueDurationHeader:    "2000",
		"retry-after":                   "3",
	})
}

// checkImmediate checks an ImmediateResponse's status and the headers it
// sets, all of them.
func checkImmediate(t *testing.T, ir *extprocv3.ImmediateResponse, status int, want map[string]string) {
	t.Helper()
	if got := ir.GetStatus().GetCode(); int(got) != status {
		t.Errorf("status %v, want %d", got, status)
	}
	got := map[string]string{}
	for _, opt := range ir.GetHeaders().GetSetHeaders() {
		got[opt.GetHeader().GetKey()] = string(opt.GetHeader().GetRawValue())
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("headers %v, want %v", got, want)
	}
}

// TestRejectionOfADisplacement: a request a fairer flow displaced from its
// queue never reached a server, so Envoy answers it as flowhttp does —
// 429, dropped reason rejected-saturated, the time it waited and its
// band's Retry-After — never with an evicted-* reason.
func TestRejectionOfADisplacement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc, err := flowcontrol.New(flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(2)}},
			Gate:  gate.MaxInFlight(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer fc.Close()
		// heavy holds the band: its newest request is the one displaced.
		var displaced error
		fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "heavy"}}, func(*flowcontrol.Admission, error) {})
		fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "heavy"}}, func(_ *flowcontrol.Admission, err error) { displaced = err })
		time.Sleep(2 * time.Second)
		fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "light"}}, func(*flowcontrol.Admission, error) {})
		synctest.Wait()
		if !errors.Is(displaced, flowcontrol.ErrRejectedSaturated) || !errors.Is(displaced, flowcontrol.ErrDisplaced) {
			t.Fatalf("heavy's request: %v, want a displacement", displaced)
		}
		ir := rejection(displaced).GetImmediateResponse()
		checkImmediate(t, ir, 429, map[string]string{
			"content-type":                  "application/json",
			flowcontrol.DroppedReasonHeader: "rejected-saturated",
			flowhttp.QueueDurationHeader:    "2000",
			"retry-after":                   "30",
		})
		if ir.GetDetails() != "rejected-saturated" {
			t.Errorf("details %q, want rejected-saturated", ir.GetDetails())
		}
		if want := string(flowhttp.RejectionFor(displaced).Body); string(ir.GetBody()) != want {
			t.Errorf("body %s, want flowhttp's %s", ir.GetBody(), want)
		}
	})
}
