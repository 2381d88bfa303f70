// Package flowhttp puts a [flowcontrol.FlowController] in front of any
// net/http handler, typically an httputil.ReverseProxy to model servers:
// admission when the request arrives, the router's advisory headers when the
// response headers are written.
//
// For each request a [Handler] classifies the request into a flow key, sizes
// it, and waits in [flowcontrol.FlowController.EnqueueAndWait] for as long as
// the request's context lives. A rejected request is answered at once and
// never reaches the wrapped handler. A dispatched one is served by the
// wrapped handler, and its admission is released when that handler returns or
// the client goes away, whichever comes first.
//
// # Response-header contract
//
//	header                                meaning                                    absent when
//	x-llm-d-flow-band-headroom-requests   request capacity − length of the band      not admitted; band unbounded,
//	                                      that admitted the request, read when the   unresolved or unreadable
//	                                      response headers are written
//	x-llm-d-flow-queue-duration-ms        whole milliseconds the request waited in   not admitted
//	                                      EnqueueAndWait (0: no measurable wait)
//	x-llm-d-request-dropped-reason        why flow control dropped the request:      dispatched; refused before
//	                                      rejected-saturated, rejected-ttl-expired,  flow control (400 from the
//	                                      rejected-context-cancelled,                classifier, 413 for a body
//	                                      rejected-shutting-down                     too long to size)
//	Retry-After                           whole seconds, rounded up, after which     dispatched; no projection
//	                                      the band should have room again            (only capacity rejections
//	                                                                                 carry one)
//
// The first two headers, and the provisional name
// x-llm-d-flow-band-headroom that dispatchers may read instead, are owned by
// the router: every copy a backend sends, in any letter case and with any
// number of values, is removed before the router's own values are set. A
// backend cannot spoof them.
//
// The band reported is the effective one: a request for a band that is not
// provisioned is admitted in the fallback band, and its headroom is that
// band's, whatever is provisioned while it runs.
package flowhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/headroom"
)

// QueueDurationHeader is the response header carrying the whole milliseconds
// an admitted request waited in [flowcontrol.FlowController.EnqueueAndWait],
// truncated: 0 when it was dispatched at once or waited less than a
// millisecond. It is absent from the response of a request that was not
// admitted.
const QueueDurationHeader = "x-llm-d-flow-queue-duration-ms"

// DefaultMaxBodyBytes is the value of [Config.MaxBodyBytes] used when it is
// 0: how much of a body of unknown length is read to size the request.
const DefaultMaxBodyBytes = 4 << 20

// canonicalQueueDurationHeader is QueueDurationHeader as http.Header keys it.
var canonicalQueueDurationHeader = http.CanonicalHeaderKey(QueueDurationHeader)

// Config configures a [Handler].
type Config struct {
	// Controller admits the requests. Required.
	Controller *flowcontrol.FlowController
	// Capacity is read for the headroom header at response time. Nil means
	// Controller, which is what most routers want; set it to report from a
	// different registry of the same bands.
	Capacity capacity.Reader
	// Classify turns each request into the flow key it asks admission
	// under. Nil means Headers.Classify.
	Classify ClassifyFunc
	// Headers configures the default classifier. It must be left zero when
	// Classify is set.
	Headers HeaderClassifier
	// MaxBodyBytes bounds how much of a request body of unknown length (no
	// Content-Length, as with chunked encoding) is read, before queueing,
	// to learn the request's byte size. Such a body longer than this is
	// refused with 413 Request Entity Too Large. A declared Content-Length
	// is taken as the size without reading. 0 means [DefaultMaxBodyBytes];
	// a negative value never reads, and a body of unknown length then
	// counts as 0 bytes.
	MaxBodyBytes int64
}

// Handler is an http.Handler that admits each request through a flow
// controller before passing it to the handler it wraps. Build one with
// [New]. It is safe for concurrent use.
//
// For each request it:
//
//   - classifies it ([Config.Classify]) and sizes it: Content-Length, or the
//     body read up to [Config.MaxBodyBytes], then replayed to the wrapped
//     handler;
//   - calls EnqueueAndWait with the request's context, so a client that goes
//     away while queued leaves the queue;
//   - on rejection, answers with the outcome's status
//     ([flowcontrol.Outcome.HTTPStatus]: 429 or 503), the
//     x-llm-d-request-dropped-reason header, Retry-After when the
//     controller projects one, and a short JSON body; the wrapped handler
//     is not called;
//   - on dispatch, records the effective band in the request context
//     ([headroom.WithAdmittedBand]) and calls the wrapped handler with a
//     [headroom.HeaderWriter] that, when the response headers are written,
//     strips every backend copy of the router-owned headers and sets the
//     headroom of the effective band (read then) and the queue duration.
//     http.Flusher and http.ResponseController work through it, so streamed
//     responses flush as the wrapped handler flushes;
//   - releases the admission exactly once: when the wrapped handler returns
//     (after the whole body, streamed or not, was written), or when the
//     request's context ends (the client went away), whichever is first.
//     An HTTP/1 server notices a client that went away once the request
//     body has been read to its end (a reverse proxy reads it all) or when
//     a write fails.
//
// A handler that hijacks the connection writes its response headers itself,
// past the wrapper: httputil.ReverseProxy does so for protocol upgrades
// (101 Switching Protocols), copying the backend's headers as they are. To
// keep a backend from setting router-owned headers on an upgrade too, give
// the proxy a ModifyResponse that calls [headroom.Strip] on them.
type Handler struct {
	controller *flowcontrol.FlowController
	capacity   capacity.Reader
	classify   ClassifyFunc
	maxBody    int64
	next       http.Handler
}

// New returns a Handler that admits requests through cfg.Controller and
// serves the admitted ones with next. It fails, with an error naming the
// field, when Controller or next is nil, when both Classify and Headers are
// set, or when a header name in Headers is not a valid header name.
func New(cfg Config, next http.Handler) (*Handler, error) {
	if cfg.Controller == nil {
		return nil, errors.New("flowhttp: Config.Controller is nil")
	}
	if next == nil {
		return nil, errors.New("flowhttp: New: the handler to wrap is nil")
	}
	h := &Handler{
		controller: cfg.Controller,
		capacity:   cfg.Capacity,
		classify:   cfg.Classify,
		maxBody:    cfg.MaxBodyBytes,
		next:       next,
	}
	if h.capacity == nil {
		h.capacity = cfg.Controller
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.classify != nil {
		if !cfg.Headers.isZero() {
			return nil, errors.New("flowhttp: Config.Headers is set but Config.Classify replaces the header classifier; set only one")
		}
		return h, nil
	}
	hc := cfg.Headers
	if hc.PriorityHeader != "" && !validHeaderName(hc.PriorityHeader) {
		return nil, fmt.Errorf("flowhttp: Config.Headers.PriorityHeader %q: not a valid header name", hc.PriorityHeader)
	}
	if hc.ObjectiveHeader != "" && !validHeaderName(hc.ObjectiveHeader) {
		return nil, fmt.Errorf("flowhttp: Config.Headers.ObjectiveHeader %q: not a valid header name", hc.ObjectiveHeader)
	}
	if hc.ObjectiveHeader != "" && len(hc.Objectives) == 0 {
		return nil, fmt.Errorf("flowhttp: Config.Headers.ObjectiveHeader %q is set but Objectives is empty", hc.ObjectiveHeader)
	}
	if _, ok := hc.Objectives[""]; ok {
		return nil, errors.New(`flowhttp: Config.Headers.Objectives has an empty objective name ""; an absent header never matches it`)
	}
	h.classify = hc.Classify
	return h, nil
}

// ServeHTTP admits r and, if it is dispatched, serves it with the wrapped
// handler; see [Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	key, err := h.classify(r)
	if err != nil {
		msg := "flowhttp: classifying the request: " + err.Error()
		Rejection{Status: http.StatusBadRequest, Body: errorJSON(http.StatusBadRequest, "", msg)}.write(w)
		return
	}
	size, replay, status, err := h.sizeBody(r)
	if err != nil {
		Rejection{Status: status, Body: errorJSON(status, "", err.Error())}.write(w)
		return
	}

	adm, err := h.controller.EnqueueAndWait(r.Context(), flowcontrol.Request{
		Key:          key,
		ByteSize:     size,
		ReceivedTime: received,
		Header:       r.Header,
	})
	if err != nil {
		reject(w, err)
		return
	}

	// Release on whichever comes first: the client going away (the
	// context ends while the handler may still run) or the handler
	// returning. stop reports whether the AfterFunc had not started, which
	// settles the race: exactly one of the two calls Done.
	stop := context.AfterFunc(r.Context(), adm.Done)
	defer func() {
		if stop() {
			adm.Done()
		}
	}()

	effective := adm.Effective().Priority
	band := headroom.Admitted(effective)
	queueMillis := strconv.FormatInt(int64(adm.QueueTime()/time.Millisecond), 10)
	hw := headroom.NewHeaderWriter(w, func(hdr http.Header) {
		headroom.Strip(hdr, QueueDurationHeader)
		headroom.Stamp(hdr, h.capacity, band) // strips the headroom names, then samples the band now
		hdr[canonicalQueueDurationHeader] = []string{queueMillis}
	})
	// WithContext copies r, so the replayed body does not change the
	// caller's request.
	admitted := r.WithContext(headroom.WithAdmittedBand(r.Context(), effective))
	if replay != nil {
		admitted.Body = replay
	}
	h.next.ServeHTTP(hw, admitted)
	// A handler that wrote nothing leaves net/http to send the header map
	// as it is; stamp it now.
	hw.Finish()
}

// sizeBody returns the byte size of r's body. A body of unknown length is
// read, up to the limit, and returned as replay, which serves the same bytes
// to the wrapped handler; replay is nil when the body was not read. On
// failure it returns the status to answer with.
func (h *Handler) sizeBody(r *http.Request) (size int64, replay io.ReadCloser, status int, err error) {
	switch {
	case r.ContentLength >= 0:
		return r.ContentLength, nil, 0, nil
	case r.Body == nil || r.Body == http.NoBody || h.maxBody < 0:
		return 0, nil, 0, nil
	}
	// Read one byte past the limit to tell a body at the limit from a
	// longer one; at math.MaxInt64 that byte would overflow the count (and
	// no body can be longer anyway).
	limit := h.maxBody
	if limit < math.MaxInt64 {
		limit++
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit))
	if err != nil {
		return 0, nil, http.StatusBadRequest, fmt.Errorf("flowhttp: reading the request body: %w", err)
	}
	if int64(len(buf)) > h.maxBody {
		return 0, nil, http.StatusRequestEntityTooLarge,
			fmt.Errorf("flowhttp: request body of unknown length exceeds %d bytes", h.maxBody)
	}
	return int64(len(buf)), replayBody{Reader: bytes.NewReader(buf), Closer: r.Body}, 0, nil
}

// replayBody serves a body that was read to size it, and closes the
// original.
type replayBody struct {
	io.Reader
	io.Closer
}

// Rejection is the answer to a request that flow control did not
// dispatch, as plain data: [Handler] writes it as an HTTP response, and a
// proxy that speaks another protocol (an Envoy ext_proc ImmediateResponse)
// can send exactly the same status, headers and body.
type Rejection struct {
	// Status is the HTTP status: the outcome's (429 or 503), or 503 for an
	// error that is not a *flowcontrol.RejectionError.
	Status int
	// DroppedReason is the x-llm-d-request-dropped-reason value; empty when
	// the error carries none.
	DroppedReason string
	// RetryAfter is the Retry-After value, whole seconds rounded up; empty
	// unless the controller projected one (capacity rejections only).
	RetryAfter string
	// Body is a short JSON body:
	// {"error":{"status":429,"reason":"rejected-saturated","message":"..."}}.
	Body []byte
}

// RejectionFor returns the answer to a request whose EnqueueAndWait failed
// with err.
func RejectionFor(err error) Rejection {
	r := Rejection{Status: http.StatusServiceUnavailable}
	var rej *flowcontrol.RejectionError
	if errors.As(err, &rej) {
		if s := rej.Outcome.HTTPStatus(); s != 0 {
			r.Status = s
		}
		r.DroppedReason = rej.Outcome.DroppedReason()
		if rej.RetryAfter > 0 {
			r.RetryAfter = strconv.FormatInt(int64((rej.RetryAfter+time.Second-1)/time.Second), 10)
		}
	}
	r.Body = errorJSON(r.Status, r.DroppedReason, err.Error())
	return r
}

// errorBody is the JSON body of a response the Handler writes itself.
type errorBody struct {
	Error struct {
		Status  int    `json:"status"`
		Reason  string `json:"reason,omitempty"`
		Message string `json:"message"`
	} `json:"error"`
}

// errorJSON encodes an errorBody, with a final newline.
func errorJSON(status int, reason, message string) []byte {
	var body errorBody
	body.Error.Status = status
	body.Error.Reason = reason
	body.Error.Message = message
	js, _ := json.Marshal(body) // cannot fail: strings and an int
	return append(js, '\n')
}

// write sends r as the response.
func (r Rejection) write(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Content-Length", strconv.Itoa(len(r.Body)))
	if r.DroppedReason != "" {
		hdr.Set(flowcontrol.DroppedReasonHeader, r.DroppedReason)
	}
	if r.RetryAfter != "" {
		hdr.Set("Retry-After", r.RetryAfter)
	}
	w.WriteHeader(r.Status)
	_, _ = w.Write(r.Body)
}

// reject answers a request that EnqueueAndWait did not dispatch.
func reject(w http.ResponseWriter, err error) { RejectionFor(err).write(w) }
