package flowhttp

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
)

// Rejection is the answer to a request that flow control did not
// dispatch, as plain data: [Handler] writes it as an HTTP response, and a
// proxy that speaks another protocol (an Envoy ext_proc ImmediateResponse)
// can send exactly the same status, headers and body.
type Rejection struct {
	// Status is the HTTP status: the outcome's (429 or 503), 413 for a
	// request that can never fit ([flowcontrol.ErrTooLarge]), or 503 for
	// an error that is not a *flowcontrol.RejectionError.
	Status int
	// DroppedReason is the x-llm-d-request-dropped-reason value; empty when
	// the error carries none.
	DroppedReason string
	// RetryAfter is the Retry-After value, whole seconds rounded up; empty
	// unless the controller projected one (see
	// [flowcontrol.RejectionError.RetryAfter]).
	RetryAfter string
	// QueueDuration is the x-llm-d-flow-queue-duration-ms value: the whole
	// milliseconds the request waited ([flowcontrol.RejectionError.QueueTime]),
	// truncated; empty when err is not a *flowcontrol.RejectionError.
	QueueDuration string
	// Body is the OpenAI-shaped JSON error, with a final newline:
	// {"error":{"message":"...","type":"rate_limit_exceeded","param":null,"code":"rejected-saturated"}}.
	// message is the error's text; type follows the status (see the
	// package documentation); code is the dropped reason, null without
	// one.
	Body []byte
}

// RejectionFor returns the answer to a request whose EnqueueAndWait failed
// with err.
//
// The status is the outcome's ([flowcontrol.Outcome.HTTPStatus]): 429 for
// a full band, an expiry, or a displacement by fair admission (dropped
// reason rejected-saturated, [flowcontrol.ErrDisplaced] beside it: it never
// reached a model server), each with the Retry-After the controller
// projects; 503 for cancellation, shutdown and an empty pool. Every answer
// carries the time the request queued (QueueDuration). A
// capacity rejection wrapping [flowcontrol.ErrTooLarge] (the request's
// size or cost exceeds a byte or cost capacity, so it can never fit) is
// answered 413 Content Too Large instead, with dropped reason
// rejected-saturated and no Retry-After: retrying the same request cannot
// help.
func RejectionFor(err error) Rejection {
	r := Rejection{Status: http.StatusServiceUnavailable}
	var rej *flowcontrol.RejectionError
	if errors.As(err, &rej) {
		if s := rej.Outcome.HTTPStatus(); s != 0 {
			r.Status = s
		}
		r.DroppedReason = rej.Outcome.String()
		r.QueueDuration = strconv.FormatInt(int64(rej.QueueTime/time.Millisecond), 10)
		if rej.RetryAfter > 0 {
			r.RetryAfter = strconv.FormatInt(int64((rej.RetryAfter+time.Second-1)/time.Second), 10)
		}
	}
	if errors.Is(err, flowcontrol.ErrTooLarge) {
		r.Status = http.StatusRequestEntityTooLarge
		r.DroppedReason = flowcontrol.OutcomeRejectedSaturated.String()
		r.RetryAfter = ""
	}
	r.Body = errorJSON(r.Status, r.DroppedReason, err.Error())
	return r
}

// ClassifyRejection returns the answer to a request whose classifier failed
// with err: 400 Bad Request, no dropped reason (flow control never saw the
// request) and an OpenAI-shaped body whose message explains err. [Handler]
// answers with it, and so can a proxy that classifies with
// [HeaderClassifier.ClassifyHeader].
func ClassifyRejection(err error) Rejection {
	status := http.StatusBadRequest
	return Rejection{Status: status, Body: errorJSON(status, "", "flowhttp: classifying the request: "+err.Error())}
}

// errorBody is the JSON body of a response the Handler writes itself: the
// error object of the OpenAI API, whose SDKs read message, type, param and
// code.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"` // always null: no single parameter is at fault
		Code    *string `json:"code"`
	} `json:"error"`
}

// errorType returns the OpenAI error type for a status.
func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status >= 500:
		return "service_unavailable"
	default:
		return "invalid_request_error"
	}
}

// errorJSON encodes an errorBody, with a final newline; code is null when
// empty.
func errorJSON(status int, code, message string) []byte {
	var body errorBody
	body.Error.Message = message
	body.Error.Type = errorType(status)
	if code != "" {
		body.Error.Code = &code
	}
	js, _ := json.Marshal(body) // cannot fail: strings and nulls
	return append(js, '\n')
}

// ErrorRejection returns the answer to a request that flow control never
// saw: status, no dropped reason, and an OpenAI-shaped body with message and
// the type that follows the status. The Handler refuses an oversized body
// with it; a router answers its own errors with it (no backend to send the
// request to, a backend that failed) the way flowhttp answers its refusals.
func ErrorRejection(status int, message string) Rejection {
	return Rejection{Status: status, Body: errorJSON(status, "", message)}
}

// Write sends r as the response: its status, Content-Type
// application/json, the dropped-reason, queue-duration and Retry-After
// headers when set, and its body.
func (r Rejection) Write(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Content-Length", strconv.Itoa(len(r.Body)))
	if r.DroppedReason != "" {
		hdr.Set(flowcontrol.DroppedReasonHeader, r.DroppedReason)
	}
	if r.QueueDuration != "" {
		hdr[canonicalQueueDurationHeader] = []string{r.QueueDuration}
	}
	if r.RetryAfter != "" {
		hdr.Set("Retry-After", r.RetryAfter)
	}
	w.WriteHeader(r.Status)
	_, _ = w.Write(r.Body)
}
