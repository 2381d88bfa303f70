package extproc

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// BodyMode is the request_body_mode of Envoy's ext_proc filter
// (envoy.extensions.filters.http.ext_proc.v3.ProcessingMode): how, if at
// all, Envoy sends the adapter a request's body.
type BodyMode = extprocfilterv3.ProcessingMode_BodySendMode

// HandoffWorks reports whether the priority hand-off can rewrite request
// bodies sent in mode: only BUFFERED, and BUFFERED_PARTIAL for a body
// that fits Envoy's buffer, send the whole body in one message before the
// request goes upstream. In NONE no body is sent; in STREAMED,
// FULL_DUPLEX_STREAMED and GRPC it comes in pieces the client chooses, so
// a client could keep its own priority by splitting its body.
func HandoffWorks(mode BodyMode) bool {
	return mode == extprocfilterv3.ProcessingMode_BUFFERED || mode == extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL
}

// HandoffWarning returns the warning a binary prints at start (and in its
// configuration check) when the hand-off is on and Envoy's filter sends
// the request body in mode, where it cannot work; "" when it can, or the
// hand-off is off.
func HandoffWarning(handoff flowhttp.PriorityHandoff, mode BodyMode) string {
	if !handoff.Enabled || HandoffWorks(mode) {
		return ""
	}
	return fmt.Sprintf("the priority hand-off is on, but Envoy sends the request body in mode %s: bodies reach the model server "+
		"with the client's own priority field; set the ext_proc filter's processing_mode.request_body_mode to BUFFERED", mode)
}

// requestBody answers a request_body message. With the hand-off on, in a
// mode where it works, the first body message of an admitted request is
// the whole body: its priority member is set for the effective band, and
// the reply carries the new body and, if the request declared one, its
// new content-length. A BUFFERED_PARTIAL body that did not fit Envoy's
// buffer arrives cut short (end_of_stream false): it cannot be rewritten,
// and letting it pass would let any client keep its own priority by
// sending a long body, so it is answered 413, as flowhttp answers a body
// over its bound; last is then true. A body the hand-off refuses
// (flowhttp.ErrHandoffBody: not JSON, but readable as an object by
// vLLM's parser) is answered 400 likewise. Everything else is answered
// with no mutation.
func (s *Server) requestBody(st *stream, msg *extprocv3.HttpBody) (resp *extprocv3.ProcessingResponse, last bool) {
	first := !st.bodySeen
	st.bodySeen = true
	none := continueRequestBody // shared by every stream: never modified
	if !s.handoff.Enabled || !st.admitted || !first {
		return none, false
	}
	if !HandoffWorks(st.bodyMode) {
		s.warnMode.Do(func() {
			s.log.Warn("configuration", "warning", HandoffWarning(s.handoff, st.bodyMode))
		})
		return none, false
	}
	if st.bodyMode == extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL && !msg.GetEndOfStream() {
		s.log.Debug("request body over Envoy's buffer refused: the priority hand-off needs it whole",
			"flow", st.effective.ID, "bytes", len(msg.GetBody()))
		return immediate(flowhttp.ErrorRejection(http.StatusRequestEntityTooLarge,
			"extproc: the request body is larger than Envoy's buffer (BUFFERED_PARTIAL), and the priority hand-off needs it whole")), true
	}
	body, err := s.handoff.Rewrite(msg.GetBody(), st.effective.Priority)
	switch {
	case err != nil:
		// Not JSON, but vLLM's parser could read it as an object with
		// the client's priority: refused, as flowhttp refuses it.
		s.log.Debug("request body refused by the priority hand-off", "flow", st.effective.ID, "error", err)
		return immediate(flowhttp.ErrorRejection(http.StatusBadRequest, err.Error())), true
	case bytes.Equal(body, msg.GetBody()):
		return none, false // not a JSON object: it passes as it is
	}
	common := &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
		Mutation: &extprocv3.BodyMutation_Body{Body: body},
	}}
	if st.declaredLength {
		// In BUFFERED mode Envoy leaves content-length to the processor
		// and refuses a body whose length does not match it; in
		// BUFFERED_PARTIAL it removes the header itself and ignores this.
		common.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			setHeader("content-length", strconv.Itoa(len(body))),
		}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{Response: common},
	}}, false
}
