package window

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegate/sluice/headroom"
)

// Response headers a Sluice router (flowcontrol/flowhttp, examples/extproc)
// sets besides the headroom ([headroom.HeaderName] and
// [headroom.ProvisionalHeaderName]). This package does not import the
// router; the names are the router's contract.
const (
	// QueueDurationHeader carries the whole milliseconds an admitted request
	// waited in the router's queue.
	QueueDurationHeader = "x-llm-d-flow-queue-duration-ms"
	// DroppedReasonHeader names why the router refused a request.
	DroppedReasonHeader = "x-llm-d-request-dropped-reason"
)

// Dropped reasons that [Read] classifies; any other reason is [Failed].
const (
	// ReasonSaturated: the band was full, or a fairer flow's request
	// displaced this one from its queue: 429 + Retry-After.
	ReasonSaturated = "rejected-saturated"
	// ReasonExpired: the queue-wait TTL ran out: 429.
	ReasonExpired = "rejected-ttl-expired"
	// ReasonEvictedPriority: the request was dispatched, then revoked
	// while it ran for a request of a higher band (in-flight eviction):
	// 429 + Retry-After.
	ReasonEvictedPriority = "evicted-priority"
	// ReasonEvictedGeneric is llm-d's generic eviction reason, which a
	// Sluice router sends when a band takes back its guaranteed share
	// from a request that borrowed it: 429 + Retry-After. [Read] counts
	// it, and every other evicted-* reason (llm-d-router's
	// evicted-queue-pressure among them), [Evicted].
	ReasonEvictedGeneric = "evicted"
)

// MaxRetryAfter bounds the Retry-After [Read] reports: a larger value, or
// one that does not parse as a number, reads as MaxRetryAfter (a Sluice
// router sends at most 30 s).
const MaxRetryAfter = time.Minute

// Read builds the [Feedback] of a response from its status code and headers,
// received at now (for a Retry-After given as an HTTP date).
//
// A 2xx response is [Accepted]. A refusal is [Saturated] when its
// dropped reason is rejected-saturated (a displacement by a fairer flow
// included), or when it is a 429 without a reason (a proxy in front of
// the router that is just as full); [Expired] when the reason is
// rejected-ttl-expired; [Evicted] when it is evicted or any other
// evicted-* (evicted-priority; llm-d-router's evicted-queue-pressure): the
// request ran and was revoked; [Failed] otherwise. A
// stream the router cut off because it was revoked once its response
// had begun carries no reason (its status was 200): the caller sees its
// body break off, and should read it as Failed, not Accepted. The headroom is read with [headroom.Parse], under either name;
// a malformed value reads as unknown. The queue duration is read when it is
// a plain decimal count of milliseconds. Retry-After is read as
// delay-seconds or an HTTP date, clamped to [0, MaxRetryAfter].
func Read(status int, h http.Header, now time.Time) Feedback {
	fb := Feedback{Signal: Failed, Reason: h.Get(DroppedReasonHeader)}
	switch {
	case status/100 == 2:
		fb.Signal = Accepted
	case fb.Reason == ReasonSaturated:
		fb.Signal = Saturated
	case fb.Reason == ReasonExpired:
		fb.Signal = Expired
	case fb.Reason == ReasonEvictedGeneric || strings.HasPrefix(fb.Reason, ReasonEvictedGeneric+"-"):
		fb.Signal = Evicted
	case fb.Reason == "" && status == http.StatusTooManyRequests:
		fb.Signal = Saturated
	}
	if n, err := headroom.Parse(h); err == nil {
		fb.Headroom, fb.HeadroomKnown = n, true
	}
	if v := h.Get(QueueDurationHeader); v != "" {
		if ms, ok := digits(v); ok && ms <= int64(MaxQueueDelay/time.Millisecond) {
			fb.QueueDelay, fb.QueueDelayKnown = time.Duration(ms)*time.Millisecond, true
		}
	}
	fb.RetryAfter = parseRetryAfter(h.Get("Retry-After"), now)
	return fb
}

// MaxQueueDelay is the largest queue duration [Read] accepts; a larger value
// reads as unknown.
const MaxQueueDelay = 24 * time.Hour

// digits parses s, optionally surrounded by spaces, as a decimal made of
// digits only.
func digits(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if strings.TrimLeft(v, "0123456789") == "" {
		n, ok := digits(v)
		if !ok || n > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter)
}
