package flowhttp

import (
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
