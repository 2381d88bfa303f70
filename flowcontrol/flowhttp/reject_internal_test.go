package flowhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
		RejectionFor(&flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedSaturated, RetryAfter: c.retryAfter}).Write(rec)
		if diff := cmp.Diff(c.want, rec.Result().Header.Values("Retry-After")); diff != "" {
			t.Errorf("RetryAfter %v: Retry-After (-want +got):\n%s", c.retryAfter, diff)
		}
	}
}

// wantBody is the OpenAI error body for a status, code and message.
func wantBody(typ, code, message string) errorBody {
	var b errorBody
	b.Error.Message, b.Error.Type = message, typ
	if code != "" {
		b.Error.Code = &code
	}
	return b
}

func TestRejectionForEveryOutcome(t *testing.T) {
	capacityErr := &flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedSaturated, RetryAfter: 3 * time.Second}
	// ErrTooLarge rides beside the RejectionError; the controller may also
	// report a RetryAfter, which waiting cannot honour.
	tooLarge := fmt.Errorf("%w: %w", capacityErr, flowcontrol.ErrTooLarge)
	// A revoked admission's error (before its response began), with a
	// Retry-After that is not whole seconds: it rounds up.
	evicted := &flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeEvictedPriority, RetryAfter: 1500 * time.Millisecond}
	// An expiry carries its band's Retry-After and the time it waited, as
	// does an empty pool.
	expired := &flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedTTLExpired, RetryAfter: 4 * time.Second, QueueTime: 2500*time.Millisecond + 700*time.Microsecond}
	noEndpoints := &flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedNoEndpoints, RetryAfter: time.Second, QueueTime: 5 * time.Second}
	cases := []struct {
		name string
		err  error
		want Rejection // Body is the decoded body's expected value below
		body errorBody
	}{
		{"saturated", capacityErr,
			Rejection{Status: 429, DroppedReason: "rejected-saturated", RetryAfter: "3", QueueDuration: "0"},
			wantBody("rate_limit_exceeded", "rejected-saturated", capacityErr.Error())},
		{"too large", tooLarge,
			Rejection{Status: 413, DroppedReason: "rejected-saturated", QueueDuration: "0"},
			wantBody("invalid_request_error", "rejected-saturated", tooLarge.Error())},
		{"too large, bare sentinel", flowcontrol.ErrTooLarge,
			Rejection{Status: 413, DroppedReason: "rejected-saturated"},
			wantBody("invalid_request_error", "rejected-saturated", flowcontrol.ErrTooLarge.Error())},
		{"evicted-priority", evicted,
			Rejection{Status: 429, DroppedReason: "evicted-priority", RetryAfter: "2", QueueDuration: "0"},
			wantBody("rate_limit_exceeded", "evicted-priority", evicted.Error())},
		{"expired", expired,
			Rejection{Status: 429, DroppedReason: "rejected-ttl-expired", RetryAfter: "4", QueueDuration: "2500"},
			wantBody("rate_limit_exceeded", "rejected-ttl-expired", expired.Error())},
		{"no endpoints", noEndpoints,
			Rejection{Status: 503, DroppedReason: "rejected-no-endpoints", RetryAfter: "1", QueueDuration: "5000"},
			wantBody("service_unavailable", "rejected-no-endpoints", noEndpoints.Error())},
		{"cancelled", &flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedContextCancelled},
			Rejection{Status: 503, DroppedReason: "rejected-context-cancelled", QueueDuration: "0"},
			wantBody("service_unavailable", "rejected-context-cancelled", (&flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedContextCancelled}).Error())},
		{"shutting down", &flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedShuttingDown},
			Rejection{Status: 503, DroppedReason: "rejected-shutting-down", QueueDuration: "0"},
			wantBody("service_unavailable", "rejected-shutting-down", (&flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeRejectedShuttingDown}).Error())},
		// An error that is not a RejectionError still fails safe.
		{"unknown error", errors.New("boom"),
			Rejection{Status: 503},
			wantBody("service_unavailable", "", "boom")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := RejectionFor(c.err)
			var body errorBody
			if err := json.Unmarshal(got.Body, &body); err != nil {
				t.Fatalf("body %q: %v", got.Body, err)
			}
			got.Body = nil
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("RejectionFor (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.body, body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}

			rec := httptest.NewRecorder()
			RejectionFor(c.err).Write(rec)
			res := rec.Result()
			if res.StatusCode != c.want.Status {
				t.Errorf("written status %d, want %d", res.StatusCode, c.want.Status)
			}
			wantHeader := http.Header{
				"Content-Type":           {"application/json"},
				"X-Content-Type-Options": {"nosniff"},
				"Content-Length":         {fmt.Sprint(rec.Body.Len())},
			}
			if c.want.DroppedReason != "" {
				wantHeader.Set(flowcontrol.DroppedReasonHeader, c.want.DroppedReason)
			}
			if c.want.RetryAfter != "" {
				wantHeader.Set("Retry-After", c.want.RetryAfter)
			}
			if c.want.QueueDuration != "" {
				wantHeader.Set(QueueDurationHeader, c.want.QueueDuration)
			}
			if diff := cmp.Diff(wantHeader, res.Header); diff != "" {
				t.Errorf("written header (-want +got):\n%s", diff)
			}
		})
	}
}

// TestErrorBodyIsOpenAIShaped pins the exact bytes: all four fields of the
// OpenAI error object, param and a missing code as null.
func TestErrorBodyIsOpenAIShaped(t *testing.T) {
	cases := []struct {
		status  int
		code    string
		message string
		want    string
	}{
		{429, "rejected-saturated", "full", `{"error":{"message":"full","type":"rate_limit_exceeded","param":null,"code":"rejected-saturated"}}` + "\n"},
		{503, "", "boom", `{"error":{"message":"boom","type":"service_unavailable","param":null,"code":null}}` + "\n"},
		{400, "", "bad", `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}` + "\n"},
		{413, "rejected-saturated", "big", `{"error":{"message":"big","type":"invalid_request_error","param":null,"code":"rejected-saturated"}}` + "\n"},
	}
	for _, c := range cases {
		if got := string(errorJSON(c.status, c.code, c.message)); got != c.want {
			t.Errorf("errorJSON(%d, %q, %q) = %s, want %s", c.status, c.code, c.message, got, c.want)
		}
	}
}

// ErrorRejection answers a router's own error in flowhttp's shape: no
// dropped reason, the type that follows the status.
func TestErrorRejection(t *testing.T) {
	rec := httptest.NewRecorder()
	ErrorRejection(http.StatusBadGateway, "backend down").Write(rec)
	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusBadGateway || rec.Header().Get(flowcontrol.DroppedReasonHeader) != "" ||
		body.Error.Message != "backend down" || body.Error.Type != "service_unavailable" || body.Error.Code != nil {
		t.Fatalf("%d %v %+v", rec.Code, rec.Header(), body)
	}
}
