package flowhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
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
	// PriorityHandoff, when Enabled, hands each dispatched request's
	// effective band to the model server: before the wrapped handler
	// runs, the body it replays gets its top-level "priority" member
	// (vLLM's) set by the mapping, every copy the client wrote replaced,
	// and the request's ContentLength (and a Content-Length header) set to
	// the new length; see [PriorityHandoff] for the mapping, the bounds and
	// what a body that is not a JSON object gets (nothing: it passes
	// unchanged, unless vLLM's lenient parser could read it as one: then
	// the request is answered 400 Bad Request, its admission released,
	// and never reaches the wrapped handler; [PriorityHandoff.Rewrite]).
	// The classifier reads the body as the client sent it. It
	// needs the body read, so a negative MaxBodyBytes with it is an error.
	// Off (the zero value), bodies pass as they came and the Handler does
	// no work for it.
	PriorityHandoff PriorityHandoff
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
//     and to replay it to the classifier and the wrapped handler (whose
//     request has GetBody set, as http.NewRequest sets it for a body in
//     memory, so that a proxy can send the bytes again); then
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
//   - if the controller revokes the admission while the wrapped handler
//     runs ([flowcontrol.Admission.Revoked]), cancels the handler's
//     context with a cause wrapping [ErrRevoked] and the admission's error,
//     discards whatever the handler writes from then on, and answers 429
//     with dropped reason evicted-priority (or evicted), Retry-After and
//     the JSON body if the handler had written neither a status nor a
//     byte, or else cuts the response it began (panic(http.ErrAbortHandler)
//     once the handler returns); see the package documentation's
//     Revocation section;
//   - releases the admission exactly once: when the wrapped handler returns
//     (after the whole body, streamed or not, was written; or, revoked,
//     after it stopped), or when the request's context ends (the client
//     went away), whichever is first.
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
	// handoff is Config.PriorityHandoff with its Map copied; off unless
	// handoff.Enabled.
	handoff PriorityHandoff
	next    http.Handler
}

// New returns a Handler that admits requests through cfg.Controller and
// serves the admitted ones with next. It fails, with an error naming the
// field, when Controller or next is nil, when both Classify and Headers are
// set, when a header name in Headers is not a valid header name, or when
// PriorityHandoff is not valid ([PriorityHandoff.Validate]) or is enabled
// with a negative MaxBodyBytes.
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
	if err := cfg.PriorityHandoff.validate("Config.PriorityHandoff"); err != nil {
		return nil, err
	}
	if cfg.PriorityHandoff.Enabled {
		if h.maxBody < 0 {
			return nil, fmt.Errorf("flowhttp: Config.PriorityHandoff is enabled but Config.MaxBodyBytes %d is negative: the hand-off rewrites the body, which must be read", h.maxBody)
		}
		h.handoff = cfg.PriorityHandoff
		h.handoff.Map = maps.Clone(cfg.PriorityHandoff.Map)
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
		// One allocation holds both.
		c := &classifiedRequest{req: *r}
		c.body.data = body
		c.body.Reset(body)
		c.req.Body = &c.body
		classified = &c.req
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
	st := &serving{fw: firstByteWriter{ResponseWriter: w, adm: adm}}
	hw := headroom.NewHeaderWriter(&st.fw, func(hdr http.Header) {
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
		if h.handoff.Enabled {
			if body, err = h.handOff(admitted, body, effective); err != nil {
				// Answered here, before the wrapped handler; the deferred
				// Done releases the admission.
				ErrorRejection(http.StatusBadRequest, err.Error()).Write(w)
				return
			}
		}
		// The server closes the original body once the handler returns.
		// A body net/http knows to be in memory (this one, and GetBody's
		// for a proxy, which wraps the body it is given) lets its
		// Transport send the request's header and body in one write,
		// where a body of another type costs a second write (and a
		// second packet) per request.
		st.body.Reset(body)
		st.data = body
		admitted.Body = io.NopCloser(&st.body)
		admitted.GetBody = st.replay
	}
	if revoked := adm.Revoked(); revoked != nil {
		h.serveRevocable(w, hw, admitted, adm, revoked, queueMillis)
		return
	}
	h.next.ServeHTTP(hw, admitted)
	// A handler that wrote nothing leaves net/http to send the header map
	// as it is; stamp it now. Trailers set after the body are stripped
	// here too, before net/http sends them.
	hw.Finish()
}

// handOff returns body with the priority member the hand-off writes for
// band, and sets admitted's length to match; a body that is not a JSON
// object is returned as it is, and one the hand-off refuses is an error
// (see PriorityHandoff.Rewrite). admitted is a copy of the caller's
// request, whose Header it replaces with a copy before changing it.
func (h *Handler) handOff(admitted *http.Request, body []byte, band int) ([]byte, error) {
	out, err := h.handoff.Rewrite(body, band)
	if err != nil || len(out) == len(body) && (len(body) == 0 || &out[0] == &body[0]) {
		return out, err // refused, or unchanged
	}
	admitted.ContentLength = int64(len(out))
	if _, declared := admitted.Header["Content-Length"]; declared {
		admitted.Header = admitted.Header.Clone()
		admitted.Header["Content-Length"] = []string{strconv.Itoa(len(out))}
	}
	return out, nil
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

// serving is what the Handler allocates for an admitted request, in one
// piece: the writer that reports its first byte, and the reader that
// replays its body.
type serving struct {
	fw   firstByteWriter
	body bytes.Reader
	data []byte
}

// replay is the admitted request's GetBody: a new reader of the body.
func (st *serving) replay() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(st.data)), nil
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
