package window_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicegate/sluice/headroom/window"
)

func TestRead(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		want   window.Feedback
	}{
		{"accepted", 200, http.Header{"X-Llm-D-Flow-Band-Headroom-Requests": {"19"}, "X-Llm-D-Flow-Queue-Duration-Ms": {"250"}},
			window.Feedback{Signal: window.Accepted, Headroom: 19, HeadroomKnown: true, QueueDelay: 250 * time.Millisecond, QueueDelayKnown: true}},
		{"provisional headroom name", 200, http.Header{"X-Llm-D-Flow-Band-Headroom": {"4"}},
			window.Feedback{Signal: window.Accepted, Headroom: 4, HeadroomKnown: true}},
		{"malformed headroom", 200, http.Header{"X-Llm-D-Flow-Band-Headroom-Requests": {"-3"}},
			window.Feedback{Signal: window.Accepted}},
		{"malformed queue duration", 200, http.Header{"X-Llm-D-Flow-Queue-Duration-Ms": {"1.5"}},
			window.Feedback{Signal: window.Accepted}},
		{"saturated", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-saturated"}, "Retry-After": {"2"}},
			window.Feedback{Signal: window.Saturated, Reason: "rejected-saturated", RetryAfter: 2 * time.Second}},
		// A displaced request: rejected-saturated after it queued, as
		// flowhttp answers it.
		{"displaced", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-saturated"}, "Retry-After": {"30"}, "X-Llm-D-Flow-Queue-Duration-Ms": {"1500"}},
			window.Feedback{Signal: window.Saturated, Reason: "rejected-saturated", RetryAfter: 30 * time.Second, QueueDelay: 1500 * time.Millisecond, QueueDelayKnown: true}},
		{"429 without a reason", 429, http.Header{},
			window.Feedback{Signal: window.Saturated}},
		{"expired", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-ttl-expired"}},
			window.Feedback{Signal: window.Expired, Reason: "rejected-ttl-expired"}},
		// What a Sluice router sends with an expiry: the time it waited and
		// its band's Retry-After.
		{"expired with queue duration and Retry-After", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-ttl-expired"},
			"X-Llm-D-Flow-Queue-Duration-Ms": {"3000"}, "Retry-After": {"4"}},
			window.Feedback{Signal: window.Expired, Reason: "rejected-ttl-expired", QueueDelay: 3 * time.Second, QueueDelayKnown: true, RetryAfter: 4 * time.Second}},
		// In-flight eviction: the request ran, and a higher band took its
		// room. Any evicted-* reads so.
		{"evicted-priority", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"evicted-priority"}, "Retry-After": {"3"}, "X-Llm-D-Flow-Queue-Duration-Ms": {"0"}},
			window.Feedback{Signal: window.Evicted, Reason: "evicted-priority", RetryAfter: 3 * time.Second, QueueDelayKnown: true}},
		{"evicted (a guarantee taken back)", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"evicted"}, "Retry-After": {"1"}},
			window.Feedback{Signal: window.Evicted, Reason: "evicted", RetryAfter: time.Second}},
		{"evicted as a 503", 503, http.Header{"X-Llm-D-Request-Dropped-Reason": {"evicted-priority"}},
			window.Feedback{Signal: window.Evicted, Reason: "evicted-priority"}},
		// llm-d-router's name for a request killed in flight under queue
		// pressure; a Sluice router does not send it.
		{"llm-d's evicted-queue-pressure", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"evicted-queue-pressure"}, "Retry-After": {"1"}},
			window.Feedback{Signal: window.Evicted, Reason: "evicted-queue-pressure", RetryAfter: time.Second}},
		{"an evicted-* reason of the future", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"evicted-slo"}},
			window.Feedback{Signal: window.Evicted, Reason: "evicted-slo"}},
		{"not an evicted-* reason", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"evictedpriority"}},
			window.Feedback{Signal: window.Failed, Reason: "evictedpriority"}},
		{"no endpoints", 503, http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-no-endpoints"}, "Retry-After": {"1"}},
			window.Feedback{Signal: window.Failed, Reason: "rejected-no-endpoints", RetryAfter: time.Second}},
		{"shutting down", 503, http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-shutting-down"}},
			window.Feedback{Signal: window.Failed, Reason: "rejected-shutting-down"}},
		{"cancelled", 503, http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-context-cancelled"}},
			window.Feedback{Signal: window.Failed, Reason: "rejected-context-cancelled"}},
		{"server error", 500, http.Header{},
			window.Feedback{Signal: window.Failed}},
	} {
		if got := window.Read(tc.status, tc.header, now); got != tc.want {
			t.Errorf("%s: Read = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestReadRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"0":                             0,
		" 7 ":                           7 * time.Second,
		"120":                           window.MaxRetryAfter,
		"99999999999999999999":          window.MaxRetryAfter,
		"-1":                            0,
		"1.5":                           0,
		"soon":                          0,
		"Wed, 01 Jan 2025 00:00:05 GMT": 5 * time.Second,
		"Tue, 31 Dec 2024 23:00:00 GMT": 0,
		"Wed, 01 Jan 2025 01:00:00 GMT": window.MaxRetryAfter,
	} {
		h := http.Header{"Retry-After": {in}}
		if got := window.Read(http.StatusTooManyRequests, h, now).RetryAfter; got != want {
			t.Errorf("Retry-After %q read as %v, want %v", in, got, want)
		}
	}
}
