package flowhttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"time"
)

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
	buf, err := readAtMost(r.Body, limit, r.ContentLength)
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

// presizeLimit bounds the buffer readAtMost allocates from a declared
// length before any of it arrives: a client that declares a large body
// and sends none of it holds no more than this. A longer body grows the
// buffer as it arrives.
const presizeLimit = 64 << 10

// readAtMost reads r to its end, or until it has read limit bytes, as
// io.ReadAll(io.LimitReader(r, limit)) does, into a buffer sized for a
// body of length bytes (the declared length, or -1 if unknown) up to
// presizeLimit: a body of declared length takes one allocation, where
// io.ReadAll's buffer starts at 512 bytes and grows by copies.
func readAtMost(r io.Reader, limit, length int64) ([]byte, error) {
	size := int64(512)
	if length >= 0 {
		// One byte more than the body: the read that finds its end needs
		// room.
		size = min(length, presizeLimit) + 1
	}
	buf := make([]byte, 0, min(size, limit))
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		room := buf[len(buf):cap(buf)]
		if left := limit - int64(len(buf)); int64(len(room)) > left {
			room = room[:left]
		}
		n, err := r.Read(room)
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// classifiedRequest is the copy of a request the Handler gives its
// classifier, and the body that copy replays, allocated together.
type classifiedRequest struct {
	req  http.Request
	body replayBody
}

// replayBody replays a body the Handler has read into memory.
type replayBody struct {
	bytes.Reader
	data []byte
}

// Close does nothing: the bytes are the Handler's.
func (*replayBody) Close() error { return nil }

// BodyBytes returns the whole body of r, without copying it, when r is the
// request the Handler passes its classifier (see [ClassifyFunc]), whose
// body the Handler has read into memory; ok is false for any other
// request, whose body the caller reads as usual. The bytes are shared with
// the body the wrapped handler receives: do not modify them. What has been
// read of r.Body does not change what BodyBytes returns.
//
// A classifier that estimates a request's cost from its body reads it so
// without an allocation or a copy:
//
//	body, ok := flowhttp.BodyBytes(r)
//	if !ok {
//		body, err = io.ReadAll(r.Body)
//	}
func BodyBytes(r *http.Request) (body []byte, ok bool) {
	if rb, ok := r.Body.(*replayBody); ok {
		return rb.data, true
	}
	return nil, false
}
