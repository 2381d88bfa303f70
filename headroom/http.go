package headroom

import (
	"io"
	"net/http"

	"github.com/sluicegate/sluice/capacity"
)

// ownedNames are the header names the stamping functions of this package
// own: the two it sets. A router that sets the others too (the dropped
// reason, the queue duration) strips its whole list, which is
// flowhttp.RouterOwnedHeaders for Sluice's; this package cannot import it.
var ownedNames = []string{HeaderName, ProvisionalHeaderName}

// Middleware returns a handler that serves next and stamps the headroom of
// the request's admitted band ([FromContext] of the request context) into
// the response at the moment its header is written: the first WriteHeader
// with a final status, the first Write or Flush, or, if next writes nothing,
// when next returns. The band is read from r then, not when the request
// arrived. Backend copies are removed whether or not a value is set, also
// from informational (1xx) headers, and from the trailers: next cannot
// declare either name as a trailer, nor set one through http.TrailerPrefix,
// even after the body. opts are as for [Stamp].
//
// Admission must happen before Middleware: the step that dispatched the
// request calls [NewContext] and passes the request carrying that
// context on, directly or through other handlers, to the returned handler.
// A router that admits inside its final handler calls [Stamp] on
// w.Header() itself before writing.
//
// The ResponseWriter that next sees is a [HeaderWriter]: http.Flusher and
// http.ResponseController keep working through it.
func Middleware(r capacity.Reader, next http.Handler, opts ...Option) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		band := FromContext(req.Context())
		hw := NewHeaderWriter(w, func(h http.Header) { Stamp(h, r, band, opts...) }, ownedNames...)
		next.ServeHTTP(hw, req)
		hw.Finish()
	})
}

// ModifyResponse returns a function for httputil.ReverseProxy.ModifyResponse
// that stamps the headroom of the band recorded in the context of
// resp.Request, read from r when the backend's response headers arrive, with
// opts as for [Stamp]. It never returns an error, so the proxy always
// forwards the response.
//
// It also keeps the backend's trailers from carrying either name: it
// deletes them from resp.Trailer (the trailers the backend declared, which
// the proxy announces to its client), and wraps resp.Body so that the
// trailers the transport adds to resp.Trailer when the body ends, declared
// or not, are deleted before the proxy copies them. The wrapper is left off
// a 101 Switching Protocols response, whose body the proxy needs as the
// backend connection.
//
// Informational (1xx) responses do not pass through ModifyResponse; wrap the
// proxy in [Middleware] instead if backends may send them. To combine with
// another ModifyResponse, call both from one function.
func ModifyResponse(r capacity.Reader, opts ...Option) func(*http.Response) error {
	return func(resp *http.Response) error {
		if resp == nil {
			return nil
		}
		var band Band
		if resp.Request != nil {
			band = FromContext(resp.Request.Context())
		}
		if resp.Header == nil {
			resp.Header = make(http.Header)
		}
		StripResponse(resp, ownedNames...)
		Stamp(resp.Header, r, band, opts...)
		return nil
	}
}

// StripResponse removes every copy of names (any letter case, also as
// trailers: see [Strip]) from a backend's response, as a reverse proxy's
// ModifyResponse sees it: from its header, from the trailers it declared,
// and from the trailers that arrive with the end of its body, declared or
// not. It wraps resp.Body for the last, except for a protocol upgrade
// (101), whose body is the connection, and for an HTTP/1 response of
// known length, which cannot carry trailers (HTTP/1.1 sends them only
// after a chunked body).
func StripResponse(resp *http.Response, names ...string) {
	Strip(resp.Header, names...)
	Strip(resp.Trailer, names...)
	if resp.Body != nil && resp.Body != http.NoBody && resp.StatusCode != http.StatusSwitchingProtocols && !noTrailers(resp) {
		resp.Body = &trailerStrippingBody{ReadCloser: resp.Body, resp: resp, names: names}
	}
}

// noTrailers reports whether resp is an HTTP/1 response whose body has a
// length and no chunked coding, so that no trailer can arrive after it.
func noTrailers(resp *http.Response) bool {
	return resp.ProtoMajor == 1 && resp.ContentLength >= 0 && len(resp.TransferEncoding) == 0 && len(resp.Trailer) == 0
}

// trailerStrippingBody deletes names from resp.Trailer when the body
// reports its end. Transports (net/http's HTTP/1 and HTTP/2) fill
// resp.Trailer before the body's Read returns io.EOF, so the deletion comes
// after the last trailer arrives and before the reader (the proxy) looks.
type trailerStrippingBody struct {
	io.ReadCloser
	resp  *http.Response
	names []string
}

func (b *trailerStrippingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		Strip(b.resp.Trailer, b.names...)
	}
	return n, err
}

// HeaderWriter is an http.ResponseWriter that calls a hook on the header map
// just before the header is written, so a router can set the headers it owns
// from state read at that moment, and keeps the names it owns out of the
// trailers. Build one with [NewHeaderWriter].
//
// The hook runs once before the final header: on the first WriteHeader with
// a status of 200 or more (or 101), the first Write, the first Flush, or, if
// none of those happened, on [HeaderWriter.Finish]. It also runs before each
// informational (1xx) header, which net/http writes from the same map, so it
// should be idempotent. A HeaderWriter, like any ResponseWriter, is not safe
// for concurrent use.
//
// Trailers: right after the hook, the owned names given to NewHeaderWriter
// are removed from the response's trailer declarations (the values of its
// "Trailer" header, which net/http reads when it writes the header) and
// from the http.TrailerPrefix keys, as [Strip] does; Finish removes the
// TrailerPrefix keys the handler set after the header. So neither a
// declared trailer nor an undeclared one can carry an owned name, and a
// router's own stamped value is not sent again as a trailer.
//
// It implements http.Flusher, and [HeaderWriter.FlushError] and
// [HeaderWriter.Unwrap] for http.ResponseController, which reaches the
// wrapped writer's other abilities (deadlines, Hijack, full duplex) through
// Unwrap.
type HeaderWriter struct {
	w      http.ResponseWriter
	hook   func(http.Header)
	owned  []string
	wrote  bool // the final header has been written (or handed to net/http)
	hooked bool // the hook has run for the final header
}

// NewHeaderWriter returns a HeaderWriter that writes to w and calls
// beforeHeader with w.Header() as described on [HeaderWriter]. A nil
// beforeHeader does nothing. owned names the headers the router owns, which
// the HeaderWriter keeps out of the trailers; the hook strips and sets the
// headers themselves.
func NewHeaderWriter(w http.ResponseWriter, beforeHeader func(http.Header), owned ...string) *HeaderWriter {
	if beforeHeader == nil {
		beforeHeader = func(http.Header) {}
	}
	return &HeaderWriter{w: w, hook: beforeHeader, owned: owned}
}

// Header returns the wrapped writer's header map.
func (hw *HeaderWriter) Header() http.Header { return hw.w.Header() }

// WriteHeader runs the hook, unless the final header has already been
// written, and then writes the header with status code.
func (hw *HeaderWriter) WriteHeader(code int) {
	if !hw.wrote {
		hw.runHook()
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

// Finish runs the hook if it has not run for the final header, and removes
// the TrailerPrefix keys of the owned names. Call it after the handler
// returns: a handler that writes nothing leaves net/http to send the header
// map as it is, without a call through the HeaderWriter, and net/http sends
// the trailers only then. Finish writes nothing and may be called more than
// once.
func (hw *HeaderWriter) Finish() {
	if !hw.hooked {
		hw.hooked = true
		hw.runHook()
	}
	stripTrailers(hw.w.Header(), hw.owned)
}

// runHook runs the hook on the header about to be written, then keeps the
// owned names out of its trailers.
func (hw *HeaderWriter) runHook() {
	h := hw.w.Header()
	hw.hook(h)
	stripTrailers(h, hw.owned)
}

func (hw *HeaderWriter) beforeFinal() {
	if !hw.wrote {
		hw.wrote = true
		hw.Finish()
	}
}
