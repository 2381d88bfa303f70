// Package flowhttp puts a [flowcontrol.FlowController] in front of any
// net/http handler, typically an httputil.ReverseProxy to model servers:
// admission when the request arrives, the router's advisory headers when the
// response headers are written.
//
// For each request a [Handler] reads its body to size it, classifies the
// request (a flow key, an optional TTL and a cost), and waits in
// [flowcontrol.FlowController.EnqueueAndWait] for as long as the request's
// context lives: a client that goes away while queued leaves the queue,
// whatever its protocol and body framing. A rejected request is answered at once and
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
//	x-llm-d-flow-band-headroom            the same value, under the provisional      as above; and unless
//	                                      name llm-d-async's AIMD gate reads         Config.EmitProvisionalHeadroom
//	x-llm-d-flow-queue-duration-ms        whole milliseconds the request waited in   refused before flow
//	                                      EnqueueAndWait (0: no measurable wait),    control (400, 408, and
//	                                      admitted or dropped                        413 for the body)
//	x-llm-d-request-dropped-reason        why flow control dropped the request:      dispatched; refused before
//	                                      rejected-saturated, rejected-ttl-expired,  flow control (400 from the
//	                                      rejected-context-cancelled,                classifier or a body that
//	                                      rejected-shutting-down,                    cannot be read, 413 for a
//	                                      evicted-queue-pressure                     body over MaxBodyBytes)
//	Retry-After                           whole seconds, rounded up, after which     dispatched; 413;
//	                                      the band should have room again (see       cancellation and
//	                                      flowcontrol's Retry-After section): on     shutdown
//	                                      capacity rejections, displacements,
//	                                      expiries and rejected-no-endpoints
//
// Statuses of a request that is not dispatched:
//
//	status                    when                                           dropped reason
//	400 Bad Request           the classifier fails (a bad                    —
//	                          x-llm-d-inference-ttl), or the body cannot
//	                          be read
//	408 Request Timeout       the body did not arrive within                 —
//	                          Config.BodyReadTimeout: refused before
//	                          queueing
//	413 Content Too Large     the body is longer than Config.MaxBodyBytes    —
//	                          (declared or read): refused before queueing
//	413 Content Too Large     the request's size or cost exceeds a byte or   rejected-saturated
//	                          cost capacity, so it can never fit
//	                          (flowcontrol.ErrTooLarge); no Retry-After
//	429 Too Many Requests     the band (or the controller) is full, by       rejected-saturated
//	                          requests, bytes or cost, and the request's
//	                          flow holds its share already
//	429 Too Many Requests     while queued, displaced by a request of a      evicted-queue-pressure
//	                          flow holding less than its share of the full
//	                          band (fair admission); Retry-After as for a
//	                          full band
//	429 Too Many Requests     the queue-wait TTL expired; Retry-After as     rejected-ttl-expired
//	                          for the full band
//	503 Service Unavailable   the client went away while queued              rejected-context-cancelled
//	503 Service Unavailable   the controller shut down                       rejected-shutting-down
//
// Every such answer has an OpenAI-shaped JSON body, which OpenAI SDKs
// surface as the error's message, type and code:
//
//	{"error":{"message":"...","type":"rate_limit_exceeded","param":null,"code":"rejected-saturated"}}
//
// type is invalid_request_error (400, 408, 413), rate_limit_exceeded (429) or
// service_unavailable (503); code is the dropped reason, or null when flow
// control never saw the request.
//
// The router owns every name of [RouterOwnedHeaders]:
// x-llm-d-flow-band-headroom-requests, x-llm-d-flow-band-headroom,
// x-llm-d-request-dropped-reason and x-llm-d-flow-queue-duration-ms. On a
// dispatched request every copy a backend sends, in any letter case and
// with any number of values, is removed before the router's own values are
// set — from the header, from each informational (1xx) header, and from
// the trailers (declared in a Trailer header or set through
// http.TrailerPrefix, before or after the body). A backend cannot spoof
// them; in particular a dispatched response never carries a dropped
// reason.
//
// # Threat model
//
// Clients and backends are both untrusted: nothing either sends may cost
// the router more than a bound named here, take a slot it does not give
// back, or change what the router tells other clients.
//
// A client sends a request line and headers, a body, and the time it takes
// to send them. The headers are bounded by the http.Server (MaxHeaderBytes,
// net/http's 1 MB by default, and ReadHeaderTimeout, which the server that
// runs the Handler must set: sluice-gateway does). The body is read before
// queueing, at most [Config.MaxBodyBytes] ([DefaultMaxBodyBytes], 4 MiB;
// 413 beyond, unread when its Content-Length says so) within
// [Config.BodyReadTimeout] ([DefaultBodyReadTimeout], 30 s; 408 beyond),
// so a queued request holds at most one body's bytes, and a client that
// stalls is cut before it queues. What the classifier reads is the
// client's too: a priority outside the provisioned bands falls back (or,
// with NeverPromote, is refused); a fairness id is any string, which the
// controller keys flows by while they wait and a metrics exporter must
// bound (examples/deploy/metrics does, in count and length); a TTL can only
// shorten the wait. A cost estimated from the body must be clamped:
// [EstimateTokens] clamps to the model's context ([DefaultMaxTokens],
// 128 Ki tokens, by default) and saturates, whatever max_tokens says. A
// client that goes away while queued leaves the queue at once; one that
// goes away while served releases its slot at once.
//
// A backend sends a status, headers, 1xx headers, a body and trailers. The
// router-owned names are stripped from all of them, as above, so a backend
// cannot advertise room that is not there, claim a queue time, or make a
// dispatched request look dropped. The body and the rest are passed on
// unread: the Handler buffers nothing of a response. A backend that never
// answers holds its slot until the client goes away or the wrapped handler
// (the proxy's transport) gives up; bounding that is the proxy's.
//
// What the router answers itself (rejections, classifier errors, the
// limits above) is the OpenAI-shaped body of [Rejection], of bounded size:
// its message names the limit, or quotes the header value the classifier
// could not read (itself bounded by MaxHeaderBytes), never the body.
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
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/headroom"
)

// QueueDurationHeader is the response header carrying the whole milliseconds
// a request waited in [flowcontrol.FlowController.EnqueueAndWait],
// truncated: 0 when it was dispatched or refused at once or waited less
// than a millisecond. It is set on an admitted request's response and on
// every answer of [RejectionFor] to a [flowcontrol.RejectionError] (an
// expiry's is the time it waited); it is absent when flow control never saw
// the request.
const QueueDurationHeader = "x-llm-d-flow-queue-duration-ms"

// DefaultMaxBodyBytes is the value of [Config.MaxBodyBytes] used when it is
// 0: the longest request body read before queueing.
const DefaultMaxBodyBytes = 4 << 20

// DefaultBodyReadTimeout is the value of [Config.BodyReadTimeout] used
// when it is 0: the longest a request body may take to arrive. At the
// default MaxBodyBytes it asks for about 140 KB/s of a client, which any
// client sending a prompt can give.
const DefaultBodyReadTimeout = 30 * time.Second

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
	// Classify classifies each request: the flow key it asks admission
	// under, its own TTL and its cost. Nil means Headers.Classify, which
	// sets no cost.
	Classify ClassifyFunc
	// Headers configures the default classifier. It must be left zero when
	// Classify is set.
	Headers HeaderClassifier
	// MaxBodyBytes bounds the request body, which is read whole before the
	// request is queued (and replayed to the wrapped handler): its length
	// is the request's byte size, and reading it to its end is what lets
	// an HTTP/1 server notice a client that goes away while queued. A body
	// longer than this, whether its Content-Length says so (it is then
	// refused unread) or it is found while reading one of unknown length,
	// is refused with 413 Content Too Large before flow control sees it.
	// 0 means [DefaultMaxBodyBytes].
	//
	// A negative value never reads: a declared Content-Length is taken as
	// the size, and a body of unknown length counts as 0 bytes. An HTTP/1
	// request with a body then leaves the queue only when its TTL expires
	// or the controller drops it, not when its client goes away: net/http
	// notices a closed HTTP/1 connection only once the body has been read
	// to its end, or when a write fails. HTTP/2 and bodiless requests are
	// unaffected.
	MaxBodyBytes int64
	// BodyReadTimeout bounds the time the body takes to arrive, from the
	// moment the Handler starts reading it: a client that sends its
	// headers and then stalls, or trickles its body, is answered 408
	// Request Timeout once it passes, and holds its goroutine and buffer
	// no longer. It is a read deadline on the connection (for HTTP/2, on
	// the stream), set through http.ResponseController and cleared before
	// the request queues, so it never bounds the queue wait or the
	// response. 0 means [DefaultBodyReadTimeout]; negative, no bound (the
	// server's ReadTimeout, if any, still applies). It has no effect when
	// the body is not read (negative MaxBodyBytes) or the ResponseWriter
	// has no read deadline (http.ErrNotSupported).
	BodyReadTimeout time.Duration
	// EmitProvisionalHeadroom sets the headroom under the provisional name
	// x-llm-d-flow-band-headroom too (headroom.ProvisionalHeaderName, which
	// llm-d-async's AIMD gate reads), beside
	// x-llm-d-flow-band-headroom-requests. Both names are router-owned
	// either way.
	EmitProvisionalHeadroom bool
	// Logger, if set, hears what the handler swallows: a capacity read
	// for the headroom header that fails or panics (the header is then
	// omitted and the response goes on, as the headroom contract asks). It
	// logs at Warn, once per failed read, and never on a request that goes
	// well. Nil logs nothing.
	Logger *slog.Logger
}

// Handler is an http.Handler that admits each request through a flow
// controller before passing it to the handler it wraps. Build one with
// [New]. It is safe for concurrent use.
//
// For each request it:
//
//   - reads its body whole, up to [Config.MaxBodyBytes] (413 Content Too
//     Large beyond, unread when a Content-Length declares it), to size it
//     and to replay it to the classifier and the wrapped handler; then
//     classifies it ([Config.Classify]: flow key, TTL and cost; 400 Bad
//     Request on error);
//   - calls EnqueueAndWait with the request's context, so a client that goes
//     away while queued leaves the queue at once, whatever the protocol and
//     the body's framing (Content-Length, chunked, none; HTTP/1 or
//     HTTP/2): it is counted cancelled and never reaches the wrapped
//     handler;
//   - on rejection or displacement, answers with [RejectionFor]'s status
//     (429, 503, or 413 for a request that can never fit), the
//     x-llm-d-request-dropped-reason
//     header, x-llm-d-flow-queue-duration-ms, Retry-After when the
//     controller projects one, and an OpenAI-shaped JSON body; the
//     wrapped handler is not called;
//   - on dispatch, records the effective band in the request context
//     ([headroom.NewContext]) and calls the wrapped handler with a
//     [headroom.HeaderWriter] that, when the response headers are written,
//     strips every backend copy of the router-owned headers and sets the
//     headroom of the effective band (read then) and the queue duration,
//     and keeps the router-owned names out of the trailers.
//     http.Flusher and http.ResponseController work through it, so streamed
//     responses flush as the wrapped handler flushes;
//   - releases the admission exactly once: when the wrapped handler returns
//     (after the whole body, streamed or not, was written), or when the
//     request's context ends (the client went away), whichever is first.
//
// A handler that hijacks the connection writes its response headers itself,
// past the wrapper: httputil.ReverseProxy does so for protocol upgrades
// (101 Switching Protocols), copying the backend's headers as they are. To
// keep a backend from setting router-owned headers on an upgrade too, give
// the proxy a ModifyResponse that calls [StripRouterOwned] on the
// response's Header and Trailer.
type Handler struct {
	controller  *flowcontrol.FlowController
	capacity    capacity.Reader
	classify    ClassifyFunc
	maxBody     int64
	bodyTimeout time.Duration
	stampOpts   []headroom.Option
	next        http.Handler
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
	switch {
	case cfg.BodyReadTimeout == 0:
		h.bodyTimeout = DefaultBodyReadTimeout
	case cfg.BodyReadTimeout > 0:
		h.bodyTimeout = cfg.BodyReadTimeout
	}
	if h.capacity == nil {
		h.capacity = cfg.Controller
	}
	if cfg.Logger != nil {
		h.capacity = loggedReader{r: h.capacity, log: cfg.Logger}
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if cfg.EmitProvisionalHeadroom {
		h.stampOpts = []headroom.Option{headroom.EmitProvisional}
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
	// The controller's clock, so that the received time shares the time
	// line of the queue it is compared with (a TTL, an SLO deadline).
	received := h.controller.Clock().Now()
	size, body, status, err := h.readBody(w, r)
	if err != nil {
		ErrorRejection(status, err.Error()).Write(w)
		return
	}
	classified := r
	if body != nil {
		// The classifier may read the body; it reads a copy of the request
		// whose body replays the bytes, so the caller's request is
		// unchanged and the wrapped handler gets the whole body again.
		classified = r.WithContext(r.Context())
		classified.Body = io.NopCloser(bytes.NewReader(body))
	}
	class, err := h.classify(classified)
	if err != nil {
		ClassifyRejection(err).Write(w)
		return
	}

	adm, err := h.controller.EnqueueAndWait(r.Context(), flowcontrol.Request{
		Key:          class.Key,
		ByteSize:     size,
		ReceivedTime: received,
		Header:       r.Header,
		TTL:          class.TTL,
		Cost:         class.Cost,
		Tag:          class.Tag,
	})
	if err != nil {
		RejectionFor(err).Write(w)
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
	hw := headroom.NewHeaderWriter(&firstByteWriter{ResponseWriter: w, adm: adm}, func(hdr http.Header) {
		// Every router-owned name, the dropped reason included: a
		// dispatched response carries none, whatever the backend says.
		StripRouterOwned(hdr)
		headroom.Stamp(hdr, h.capacity, band, h.stampOpts...) // samples the band now
		hdr[canonicalQueueDurationHeader] = []string{queueMillis}
	}, routerOwned[:]...)
	// WithContext copies r, so the replayed body does not change the
	// caller's request.
	admitted := r.WithContext(headroom.NewContext(r.Context(), headroom.Admitted(effective)))
	if body != nil {
		admitted.Body = replayBody{Reader: bytes.NewReader(body), Closer: r.Body}
	}
	h.next.ServeHTTP(hw, admitted)
	// A handler that wrote nothing leaves net/http to send the header map
	// as it is; stamp it now. Trailers set after the body are stripped
	// here too, before net/http sends them.
	hw.Finish()
}

// loggedReader is a capacity.Reader that logs the failures of the one it
// wraps: an error, or a panic, which it turns into an error so the header
// is omitted as for any failed read.
type loggedReader struct {
	r   capacity.Reader
	log *slog.Logger
}

func (lr loggedReader) CapacitySnapshot(priority int) (s capacity.Snapshot, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("flowhttp: capacity reader panicked: %v", v)
			lr.log.Warn("headroom header omitted: the capacity reader panicked", "priority", priority, "panic", v)
		}
	}()
	s, err = lr.r.CapacitySnapshot(priority)
	if err != nil {
		lr.log.Warn("headroom header omitted: the capacity read failed", "priority", priority, "error", err)
	}
	return s, err
}

// firstByteWriter reports the first byte of the response body to the
// admission as its first token ([flowcontrol.Admission.FirstToken]), for a
// gate that learns from time to first token. For a streamed completion the
// first body byte is the first token's event; for one that is not streamed
// it is the whole answer, the best a proxy can see.
type firstByteWriter struct {
	http.ResponseWriter
	adm  *flowcontrol.Admission
	seen bool
}

func (fw *firstByteWriter) Write(p []byte) (int, error) {
	if !fw.seen && len(p) > 0 {
		fw.seen = true
		fw.adm.FirstToken()
	}
	return fw.ResponseWriter.Write(p)
}

// FlushError flushes the wrapped writer, for http.ResponseController.
func (fw *firstByteWriter) FlushError() error {
	return http.NewResponseController(fw.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (fw *firstByteWriter) Unwrap() http.ResponseWriter { return fw.ResponseWriter }

// readBody reads r's body whole, up to the limit, and returns its length
// and its bytes, which the classifier and the wrapped handler read again;
// body is nil when it was not read (none, or a negative limit), and
// non-nil, possibly empty, when it was. On failure it returns the status to
// answer with.
//
// Reading to the end is what makes an HTTP/1 server watch the connection
// while the request waits in the queue: net/http starts its background read,
// which notices a client that goes away and cancels the request's context,
// only once the body has hit EOF.
//
// The read is bounded in time as in size: a read deadline of
// [Config.BodyReadTimeout] is set on the connection (through
// http.ResponseController; a writer without deadlines reads unbounded),
// and cleared once the whole body is read, before the request queues. A
// connection deadline is a point in wall time, so it is the real clock's,
// not the controller's.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) (size int64, body []byte, status int, err error) {
	switch {
	case r.Body == nil || r.Body == http.NoBody:
		return max(r.ContentLength, 0), nil, 0, nil
	case h.maxBody < 0:
		return max(r.ContentLength, 0), nil, 0, nil
	case r.ContentLength > h.maxBody:
		return 0, nil, http.StatusRequestEntityTooLarge,
			fmt.Errorf("flowhttp: request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, h.maxBody)
	}
	var deadline *http.ResponseController
	if h.bodyTimeout > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(h.bodyTimeout)) == nil {
			deadline = rc
		}
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
		if isTimeout(err) {
			return 0, nil, http.StatusRequestTimeout,
				fmt.Errorf("flowhttp: the request body was not received within %v", h.bodyTimeout)
		}
		return 0, nil, http.StatusBadRequest, fmt.Errorf("flowhttp: reading the request body: %w", err)
	}
	if int64(len(buf)) > h.maxBody {
		return 0, nil, http.StatusRequestEntityTooLarge,
			fmt.Errorf("flowhttp: request body exceeds the limit of %d bytes", h.maxBody)
	}
	if deadline != nil {
		// Cleared only once the whole body is in (for HTTP/2 the stream
		// keeps it otherwise; HTTP/1 clears it itself when its background
		// read starts): on a failure net/http may read what is left of
		// the body after the handler returns, and that read must stay
		// bounded too. The next request on a connection reads under the
		// server's own timeouts.
		_ = deadline.SetReadDeadline(time.Time{})
	}
	if buf == nil {
		buf = []byte{}
	}
	return int64(len(buf)), buf, 0, nil
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// replayBody serves a body that was read before queueing, and closes the
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
// a full band, an expiry, or a displacement by fair admission
// (evicted-queue-pressure), each with the Retry-After the controller
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
