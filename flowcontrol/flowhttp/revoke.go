package flowhttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/headroom"
)

// ErrRevoked is wrapped by the cause of the context the wrapped handler
// runs with ([context.Cause]) when the controller revokes the request's
// admission (in-flight eviction, or a band taking back its guaranteed
// share), beside the admission's own error
// ([flowcontrol.Admission.Err]): errors.Is(context.Cause(ctx),
// flowcontrol.ErrEvictedPriority) tells an eviction for a higher band,
// flowcontrol.ErrEvicted a guarantee taken back. Write, Flush and Hijack
// on the wrapped handler's ResponseWriter return the same cause once the
// revocation has been seen.
var ErrRevoked = errors.New("flowhttp: the request's admission was revoked")

// serveRevocable serves r with the wrapped handler for an admission that
// may be revoked (revoked is adm.Revoked(), not nil), and answers a
// revocation: see [Handler]. hw is the writer the wrapped handler would
// write to otherwise, w the client's.
//
// A watcher goroutine waits for the revocation or the end of the request,
// whichever is first, and has ended before serveRevocable returns. On a
// revocation it first closes the response to the wrapped handler, then
// cancels the handler's context: in that order, what the handler writes
// on noticing the cancellation (a proxy's 502) is discarded, never sent.
func (h *Handler) serveRevocable(w http.ResponseWriter, hw *headroom.HeaderWriter, r *http.Request, adm *flowcontrol.Admission, revoked <-chan struct{}, queueMillis string) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	rw := &revocableWriter{next: hw}
	ended := make(chan struct{})
	var watcher sync.WaitGroup
	defer watcher.Wait()
	defer close(ended)
	watcher.Go(func() {
		select {
		case <-revoked:
		case <-ended:
			return
		}
		err := adm.Err()
		if err == nil {
			return // a closed channel with no revocation: nothing to answer
		}
		cause := fmt.Errorf("%w: %w", ErrRevoked, err)
		if rw.revoke(cause) {
			cancel(cause)
		}
	})

	serveNext(h.next, rw, r.WithContext(ctx))

	cause, committed := rw.finish()
	switch {
	case cause == nil:
		// Not revoked, or revoked once the handler had returned: the
		// response it wrote is whole, and goes out as it is.
		hw.Finish()
	case !committed:
		// Nothing of the backend's answer reached the client: answer as
		// for any request flow control drops, from a clean header map
		// (the handler may have set headers it never wrote).
		clear(w.Header())
		rej := RejectionFor(cause)
		rej.QueueDuration = queueMillis // the time it waited in the queue, before it ran
		rej.Write(w)
	default:
		// The status, and maybe part of the body, are the client's
		// already: cut the response, so that the client sees it broken
		// off (an HTTP/1 body short of its length or its last chunk, an
		// HTTP/2 stream reset), never a clean end. net/http recovers
		// this panic without logging it; the deferred Done still runs.
		panic(http.ErrAbortHandler)
	}
}

// serveNext runs next, and recovers one panic only: http.ErrAbortHandler
// from a handler whose response was revoked before anything of it was
// passed on. A reverse proxy aborts so when it cannot write the body,
// which it cannot once the response is closed; the client is then
// answered as for a revocation, not cut off. Any other panic goes on.
func serveNext(next http.Handler, rw *revocableWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler && rw.revokedUnwritten() {
				return
			}
			panic(v)
		}
	}()
	next.ServeHTTP(rw, r)
}

// revocableWriter is the ResponseWriter of a wrapped handler whose
// admission may be revoked. It passes everything on to next until the
// revocation, and nothing after it, and it remembers whether anything
// that commits the response (a final status, a body byte, a flush, a
// hijack) was passed on before: that decides whether the client can
// still be answered 429, or must see the response cut.
//
// Its lock orders the revocation against each write. It is not held while
// a write is passed on, so a client slow to read never holds up the
// revocation: a write that has started goes out whole, and the next one
// is refused.
type revocableWriter struct {
	next http.ResponseWriter

	mu        sync.Mutex
	committed bool  // something that commits the response was passed on
	cause     error // set by revoke: nothing more is passed on
	finished  bool  // set by finish: a revocation no longer changes the response
}

// revoke closes the response with cause and reports whether it did: it
// does not once the handler has finished.
func (rw *revocableWriter) revoke(cause error) bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.finished {
		return false
	}
	rw.cause = cause
	return true
}

// finish marks the handler's end and returns the revocation's cause (nil
// if none came first) and whether the response was committed before it.
func (rw *revocableWriter) finish() (cause error, committed bool) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.finished = true
	return rw.cause, rw.committed
}

// revokedUnwritten reports whether the response was revoked before
// anything committed it.
func (rw *revocableWriter) revokedUnwritten() bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.cause != nil && !rw.committed
}

// pass reports whether a write may be passed on, and counts it as
// committing the response when commits is true; err is the revocation's
// cause when it may not.
func (rw *revocableWriter) pass(commits bool) error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.cause != nil {
		return rw.cause
	}
	if commits {
		rw.committed = true
	}
	return nil
}

// Header returns the response's header map.
func (rw *revocableWriter) Header() http.Header { return rw.next.Header() }

// WriteHeader passes the status on unless the response was revoked. An
// informational (1xx) status does not commit the response: a final 429
// may still follow it.
func (rw *revocableWriter) WriteHeader(code int) {
	informational := code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols
	if rw.pass(!informational) == nil {
		rw.next.WriteHeader(code)
	}
}

// Write passes p on, or returns the revocation's cause.
func (rw *revocableWriter) Write(p []byte) (int, error) {
	if err := rw.pass(true); err != nil {
		return 0, err
	}
	return rw.next.Write(p)
}

// Flush flushes unless the response was revoked.
func (rw *revocableWriter) Flush() { _ = rw.FlushError() }

// FlushError flushes, for http.ResponseController, or returns the
// revocation's cause.
func (rw *revocableWriter) FlushError() error {
	if err := rw.pass(true); err != nil {
		return err
	}
	return http.NewResponseController(rw.next).Flush()
}

// Hijack takes the connection over, for http.ResponseController (a
// reverse proxy's protocol upgrade), or returns the revocation's cause.
// The lock is held across it, so that a revocation either comes first or
// finds the response committed.
func (rw *revocableWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.cause != nil {
		return nil, nil, rw.cause
	}
	conn, brw, err := http.NewResponseController(rw.next).Hijack()
	if err == nil {
		rw.committed = true
	}
	return conn, brw, err
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (rw *revocableWriter) Unwrap() http.ResponseWriter { return rw.next }
