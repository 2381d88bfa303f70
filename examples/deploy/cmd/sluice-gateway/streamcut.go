package main

import (
	"context"
	"log/slog"
	"mime"
	"net/http"

	"github.com/sluicegate/sluice/internal/openaierror"
)

// streamGuard is the pool as the router and flow control call it: it
// answers a backend response that is cut off after its header was sent —
// the backend crashed or reset its connection mid-body — and names the
// backend in the log.
//
// The reverse proxy can then only abort the client's response
// (panic(http.ErrAbortHandler): an HTTP/1 body short of its last chunk, an
// HTTP/2 stream reset), which the OpenAI SDK reports as a TypeError
// "terminated", no API error, and its log line ("ReverseProxy read error
// during body copy") names no backend. For a streamed response
// (text/event-stream), where nothing but events can still be sent, the
// guard ends the stream instead with an OpenAI-style error event,
//
//	data: {"error":{"message":"...","type":"server_error","param":null,"code":null}}
//
// which the SDK raises as an APIError, as vLLM ends a stream that fails.
// The event starts on an event boundary: the guard holds back a line of
// the stream until its end has arrived (see sseWriter), and ends an event
// the backend left open. Any other response is aborted as before. A
// request whose client went away, or whose admission was revoked (its
// context is done), is aborted as before and not answered: nobody reads
// it, or flowhttp cuts it on purpose.
type streamGuard struct {
	next http.Handler
	log  *slog.Logger
}

func (g streamGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &sseWriter{ResponseWriter: w}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v != http.ErrAbortHandler {
			panic(v)
		}
		switch {
		case r.Context().Err() != nil || sw.failed:
			// The client went away (a write to it failed), or flowhttp
			// revoked the request and cuts its response on purpose.
			g.log.Debug("response abandoned: the client went away or the request was revoked", "backend", sw.backend, "path", r.URL.Path,
				"cause", context.Cause(r.Context()))
			panic(v)
		case sw.closeWithError(streamCutMessage):
			g.log.Warn("backend stream cut off: ended with an error event", "backend", sw.backend, "path", r.URL.Path)
		default:
			g.log.Warn("backend response cut off: the client's response is aborted", "backend", sw.backend, "path", r.URL.Path,
				"content_type", sw.Header().Get("Content-Type"))
			panic(v)
		}
	}()
	g.next.ServeHTTP(sw, r)
	sw.finish()
}

// streamCutMessage is the error event's message: the client learns that
// the model server failed, not which one (the log says).
const streamCutMessage = "sluice-gateway: the model server's stream was cut off before its end"

// maxHeldLine bounds the part of a stream line held back: a longer line
// is passed on as it comes, and a cut inside it aborts the response.
const maxHeldLine = 1 << 20

// sseWriter passes a response on; for a streamed one (text/event-stream)
// it passes on whole lines only, holding back the start of a line until
// its end arrives, and keeps track of whether an event is open (lines
// sent since the last blank line), so that closeWithError can end the
// stream on an event boundary. Lines end with CR, LF or CRLF, as
// server-sent events define them.
type sseWriter struct {
	http.ResponseWriter
	wroteHeader bool
	stream      bool   // the final header says text/event-stream
	held        []byte // the start of the current line, not passed on yet
	passedLong  bool   // a part of the current line was passed on: it was too long to hold
	eventOpen   bool   // lines of an event were passed on, and no blank line after them
	lineEmpty   bool   // nothing of the current line was seen yet
	afterCR     bool   // the last byte seen was a CR: an LF now completes its line end
	failed      bool   // a write to the client failed
	// backend is the name of the backend the pool sent the request to,
	// for the log; the pool sets it (see pool.ServeHTTP).
	backend string
}

func (sw *sseWriter) WriteHeader(code int) {
	if !sw.wroteHeader && code >= 200 {
		sw.wroteHeader = true
		sw.stream = isEventStream(sw.Header().Get("Content-Type"))
		sw.lineEmpty = true
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *sseWriter) Write(p []byte) (int, error) {
	if !sw.wroteHeader {
		sw.WriteHeader(http.StatusOK)
	}
	if !sw.stream {
		n, err := sw.ResponseWriter.Write(p)
		sw.failed = sw.failed || err != nil
		return n, err
	}
	// Pass on the line held and p up to its last line end; hold the
	// rest, unless the line is too long to hold, or was passed on in part
	// already.
	end := -1
	for i, c := range p {
		switch {
		case c == '\n' && sw.afterCR:
			end = i // the LF of a CRLF: its line ended at the CR
		case c == '\n' || c == '\r':
			sw.eventOpen = !sw.lineEmpty // a blank line ends the event
			sw.lineEmpty = true
			end = i
		default:
			sw.lineEmpty = false
		}
		sw.afterCR = c == '\r'
	}
	head, tail := p[:end+1], p[end+1:]
	if len(head) > 0 {
		if err := sw.pass(sw.held, head); err != nil {
			return 0, err
		}
		sw.held, sw.passedLong = sw.held[:0], false
	}
	if sw.passedLong || len(sw.held)+len(tail) > maxHeldLine {
		if err := sw.pass(sw.held, tail); err != nil {
			return 0, err
		}
		sw.held, sw.passedLong = sw.held[:0], sw.passedLong || len(tail) > 0
		return len(p), nil
	}
	sw.held = append(sw.held, tail...)
	return len(p), nil
}

// pass writes a then b to the client.
func (sw *sseWriter) pass(a, b []byte) error {
	for _, part := range [][]byte{a, b} {
		if len(part) == 0 {
			continue
		}
		if _, err := sw.ResponseWriter.Write(part); err != nil {
			sw.failed = true
			return err
		}
	}
	return nil
}

// finish passes on what is held: the stream ended on a line without an
// end, which the client gets as the backend sent it.
func (sw *sseWriter) finish() {
	if !sw.failed {
		_ = sw.pass(sw.held, nil)
	}
	sw.held = nil
}

// closeWithError ends a streamed response whose backend cut it off with
// an error event of message, dropping the unfinished line held back and
// ending an event left open first, and flushes it. It reports false, and
// writes nothing, when it cannot: the response is not a stream, its
// header was not sent (then the proxy answers 502 itself), part of a line
// too long to hold was passed on, or the client cannot be written to.
func (sw *sseWriter) closeWithError(message string) bool {
	if !sw.wroteHeader || !sw.stream || sw.passedLong || sw.failed {
		return false
	}
	sw.held = nil
	var event []byte
	if sw.eventOpen {
		event = append(event, '\n')
	}
	event = append(event, "data: "...)
	event = append(event, streamErrorJSON(message)...)
	event = append(event, "\n\n"...)
	if _, err := sw.ResponseWriter.Write(event); err != nil {
		sw.failed = true
		return false
	}
	_ = http.NewResponseController(sw.ResponseWriter).Flush()
	return true
}

// streamErrorJSON is the body of an OpenAI error with message, of type
// server_error, as one line.
func streamErrorJSON(message string) []byte {
	return openaierror.JSON("server_error", message, "", "")
}

// Flush passes on what is whole and flushes it.
func (sw *sseWriter) Flush() { _ = sw.FlushError() }

// FlushError flushes, for http.ResponseController (the proxy flushes
// each write of a stream through it).
func (sw *sseWriter) FlushError() error {
	if !sw.wroteHeader {
		sw.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(sw.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (sw *sseWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// isEventStream reports whether a response of Content-Type ct is a
// stream of server-sent events. The common answers are told without
// parsing: a completion that is not streamed is application/json.
func isEventStream(ct string) bool {
	switch ct {
	case "application/json", "":
		return false
	case "text/event-stream":
		return true
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}
