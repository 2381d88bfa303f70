package headroom

import (
	"net/http"

	"github.com/sluicegate/sluice/capacity"
)

// Middleware returns a handler that serves next and stamps the headroom of
// the request's admitted band ([AdmittedBand] of the request context) into
// the response at the moment its header is written: the first WriteHeader
// with a final status, the first Write or Flush, or, if next writes nothing,
// when next returns. The band is read from r then, not when the request
// arrived. Backend copies are removed whether or not a value is set, also
// from informational (1xx) headers.
//
// Admission must happen before Middleware: the step that dispatched the
// request calls [WithAdmittedBand] and passes the request carrying that
// context on, directly or through other handlers, to the returned handler.
// A router that admits inside its final handler calls [Stamp] on
// w.Header() itself before writing.
//
// The ResponseWriter that next sees is a [HeaderWriter]: http.Flusher and
// http.ResponseController keep working through it.
func Middleware(r capacity.Reader, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		band := AdmittedBand(req.Context())
		hw := NewHeaderWriter(w, func(h http.Header) { Stamp(h, r, band) })
		next.ServeHTTP(hw, req)
		hw.Finish()
	})
}

// ModifyResponse returns a function for httputil.ReverseProxy.ModifyResponse
// that stamps the headroom of the band recorded in the context of
// resp.Request, read from r when the backend's response headers arrive.
// It never returns an error, so the proxy always forwards the response.
//
// Informational (1xx) responses do not pass through ModifyResponse; wrap the
// proxy in [Middleware] instead if backends may send them. To combine with
// another ModifyResponse, call both from one function.
func ModifyResponse(r capacity.Reader) func(*http.Response) error {
	return func(resp *http.Response) error {
		if resp == nil {
			return nil
		}
		var band Band
		if resp.Request != nil {
			band = AdmittedBand(resp.Request.Context())
		}
		if resp.Header == nil {
			resp.Header = make(http.Header)
		}
		Stamp(resp.Header, r, band)
		return nil
	}
}

// HeaderWriter is an http.ResponseWriter that calls a hook on the header map
// just before the header is written, so a router can set the headers it owns
// from state read at that moment. Build one with [NewHeaderWriter].
//
// The hook runs once before the final header: on the first WriteHeader with
// a status of 200 or more (or 101), the first Write, the first Flush, or, if
// none of those happened, on [HeaderWriter.Finish]. It also runs before each
// informational (1xx) header, which net/http writes from the same map, so it
// should be idempotent. A HeaderWriter, like any ResponseWriter, is not safe
// for concurrent use.
//
// It implements http.Flusher, and [HeaderWriter.FlushError] and
// [HeaderWriter.Unwrap] for http.ResponseController, which reaches the
// wrapped writer's other abilities (deadlines, Hijack, full duplex) through
// Unwrap.
type HeaderWriter struct {
	w      http.ResponseWriter
	hook   func(http.Header)
	wrote  bool // the final header has been written (or handed to net/http)
	hooked bool // the hook has run for the final header
}

// NewHeaderWriter returns a HeaderWriter that writes to w and calls
// beforeHeader with w.Header() as described on [HeaderWriter]. A nil
// beforeHeader does nothing.
func NewHeaderWriter(w http.ResponseWriter, beforeHeader func(http.Header)) *HeaderWriter {
	if beforeHeader == nil {
		beforeHeader = func(http.Header) {}
	}
	return &HeaderWriter{w: w, hook: beforeHeader}
}

// Header returns the wrapped writer's header map.
func (hw *HeaderWriter) Header() http.Header { return hw.w.Header() }

// WriteHeader runs the hook, unless the final header has already been
// written, and then writes the header with status code.
func (hw *HeaderWriter) WriteHeader(code int) {
	if !hw.wrote {
		hw.hook(hw.w.Header())
		// net/http writes these and keeps the header open for the final one.
		informational := code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols
		if !informational {
			hw.wrote, hw.hooked = true, true
		}
	}
	hw.w.WriteHeader(code)
}

// Write writes p to the body, writing the header (status 200) first if it
// has not been written.
func (hw *HeaderWriter) Write(p []byte) (int, error) {
	hw.beforeFinal()
	return hw.w.Write(p)
}

// Flush sends any buffered data to the client, writing the header first if
// it has not been written. It does nothing more if the wrapped writer cannot
// flush.
func (hw *HeaderWriter) Flush() { _ = hw.FlushError() }

// FlushError is Flush that reports the error of the wrapped writer's flush,
// http.ErrNotSupported included; http.ResponseController.Flush calls it.
func (hw *HeaderWriter) FlushError() error {
	hw.beforeFinal()
	return http.NewResponseController(hw.w).Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (hw *HeaderWriter) Unwrap() http.ResponseWriter { return hw.w }

// Finish runs the hook if it has not run for the final header. Call it after
// the handler returns: a handler that writes nothing leaves net/http to send
// the header map as it is, without a call through the HeaderWriter. Finish
// writes nothing and may be called more than once.
func (hw *HeaderWriter) Finish() {
	if !hw.hooked {
		hw.hooked = true
		hw.hook(hw.w.Header())
	}
}

func (hw *HeaderWriter) beforeFinal() {
	if !hw.wrote {
		hw.wrote = true
		hw.Finish()
	}
}
