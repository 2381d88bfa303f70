package extproc

import (
	"context"
	"strconv"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/status"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// inbox hands Process the stream's messages and, while the stream holds an
// admission the controller may revoke, the revocation too.
//
// Until then Process reads the stream itself: an admission that can never
// be revoked (Revoked returns nil) costs no goroutine. From the first
// revocable admission on, a reader goroutine calls Recv and Process
// selects on its messages and the revocation; it never calls Recv again,
// since gRPC allows only one receiver at a time. The reader cannot be
// stopped while it waits in Recv, so it ends with the stream instead:
// gRPC cancels the stream's context once Process returns, which ends the
// Recv in progress, and the reader leaves without delivering.
type inbox struct {
	srv  extprocv3.ExternalProcessor_ProcessServer
	msgs chan received // nil until the reader starts
}

// received is what one Recv returned.
type received struct {
	req *extprocv3.ProcessingRequest
	err error
}

// next returns the stream's next message, or revoked true when the
// admission behind revoked (nil: none, or one that can never be revoked)
// was revoked first. Of a message and a revocation that are both there,
// the message wins if it ends the response or the stream: the model
// server has finished, or Envoy has, so the revocation came too late to
// matter and Done will confirm it. Any other message loses: the
// ImmediateResponse answers for it.
//
// The common case, no revocable admission and so no reader, calls Recv
// from a frame of a few words, wait's being larger: Recv's stack sits on
// it (see Process).
func (in *inbox) next(revoked <-chan struct{}) (req *extprocv3.ProcessingRequest, isRevoked bool, err error) {
	if in.msgs == nil && revoked == nil {
		req, err = in.srv.Recv()
		return req, false, err
	}
	return in.wait(in.srv.Context(), revoked)
}

// wait is next once a revocable admission is held: it starts the reader
// if it has not started yet and waits for a message or the revocation.
func (in *inbox) wait(ctx context.Context, revoked <-chan struct{}) (req *extprocv3.ProcessingRequest, isRevoked bool, err error) {
	if in.msgs == nil {
		in.msgs = make(chan received)
		// The reader gets a copy of the inbox, so that the inbox of a
		// stream that never starts one stays on Process's stack.
		reader := &inbox{srv: in.srv, msgs: in.msgs}
		go reader.read(ctx)
	}
	var m received
	select {
	case m = <-in.msgs:
	case <-revoked:
		select {
		case m = <-in.msgs:
		default:
			return nil, true, nil
		}
	case <-ctx.Done():
		// The reader may have left without delivering: the stream is
		// gone, and so is whatever it carried.
		return nil, false, status.FromContextError(ctx.Err()).Err()
	}
	if m.err == nil && !endsResponse(m.req) && closed(revoked) {
		return nil, true, nil
	}
	return m.req, false, m.err
}

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// read is the reader goroutine: it passes on every message until Recv
// fails (io.EOF included) or the stream's context is done.
func (in *inbox) read(ctx context.Context) {
	for {
		req, err := in.srv.Recv()
		select {
		case in.msgs <- received{req, err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// endsResponse reports whether req tells that the HTTP response is
// complete: response headers or body with end_of_stream, or response
// trailers.
func endsResponse(req *extprocv3.ProcessingRequest) bool {
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return r.ResponseHeaders.GetEndOfStream()
	case *extprocv3.ProcessingRequest_ResponseBody:
		return r.ResponseBody.GetEndOfStream()
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return true
	}
	return false
}

// evicted is the ImmediateResponse for a revoked admission: the answer
// flowhttp.RejectionFor gives its Err (429, the dropped reason
// evicted-priority or evicted, Retry-After, the OpenAI-shaped body), with
// the time the request waited before it was dispatched as its queue
// duration, as its response headers would have carried. Envoy sends it to
// the client and resets the request to the model server, which is what
// stops the work.
func evicted(st *stream) *extprocv3.ProcessingResponse {
	err := st.admission.Err()
	if err == nil {
		// Revoked is closed only once Err is set; should that ever fail,
		// the request is still answered as evicted, not with a panic.
		err = &flowcontrol.RejectionError{Outcome: flowcontrol.OutcomeEvicted, Effective: st.effective}
	}
	r := flowhttp.RejectionFor(err)
	r.QueueDuration = strconv.FormatInt(int64(st.queueTime/time.Millisecond), 10)
	return immediate(r)
}
