package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// Config configures a [Server].
type Config struct {
	// Controller admits requests. Required.
	Controller *flowcontrol.FlowController
	// Capacity is read for the headroom header when response headers pass
	// through. Nil means Controller, which is what a router normally wants;
	// a router that keeps its own registry passes that instead.
	Capacity capacity.Reader
	// Classify classifies a request by its headers (pseudo-headers such as
	// ":path" included): its flow key and its own queue-wait TTL. An error
	// refuses the request with an ImmediateResponse 400 Bad Request
	// (flowhttp.ClassifyRejection) before flow control sees it. Nil means
	// flowhttp.HeaderClassifier{}.ClassifyHeader: the fairness ID from
	// x-llm-d-inference-fairness-id (alias x-gateway-inference-fairness-id,
	// default "default-flow"), priority 0, and the TTL of
	// x-llm-d-inference-ttl. Set a flowhttp.HeaderClassifier's
	// PriorityHeader or Objectives to take the priority from a header or an
	// objective map (x-llm-d-inference-objective, alias
	// x-gateway-inference-objective), the same rules Sluice's net/http
	// middleware uses.
	Classify func(http.Header) (flowhttp.Classification, error)
	// IsInference reports whether a request, by its headers (":method" and
	// ":path" among them), goes through flow control. One that does not is
	// answered CONTINUE at once, neither classified nor queued nor counted
	// by the gate, and its response gets no headroom or queue duration (the
	// router-owned names are still removed from it): a model list or a
	// health check must answer while the model servers are saturated. Nil
	// means every request is an inference request.
	IsInference func(http.Header) bool
	// EmitProvisionalHeadroom sets the headroom under the provisional name
	// x-llm-d-flow-band-headroom too (which llm-d-async's AIMD gate reads),
	// beside x-llm-d-flow-band-headroom-requests. Both names are removed
	// from the backend's response either way.
	EmitProvisionalHeadroom bool
	// PriorityHandoff, when Enabled, hands each admitted request's
	// effective band to the model server as its JSON body's top-level
	// priority (vLLM's), replacing the client's own, by the mapping of
	// [flowhttp.PriorityHandoff]; a body that is not a JSON object passes
	// unchanged, and one vLLM's lenient parser could read as an object
	// anyway is answered 400 ([flowhttp.PriorityHandoff.Rewrite]). It needs the request body, so it works only when Envoy's
	// filter sends it whole: processing_mode.request_body_mode BUFFERED
	// (the body, up to Envoy's buffer limit, sent once the request headers
	// are answered; the reply carries the rewritten body and sets
	// content-length), or BUFFERED_PARTIAL for a body that fits the buffer
	// (a longer one arrives cut short and is answered 413, since it
	// cannot be rewritten). In NONE, STREAMED and the other modes bodies
	// pass as they are, with a warning logged once (see
	// [HandoffWarning]). Keep failure_mode_allow false, or a request whose
	// processing fails would reach the model server with the client's own
	// priority. The body's size is bounded by the gRPC server's largest
	// message (grpc-go's default: 4 MiB, flowhttp.DefaultMaxBodyBytes)
	// and Envoy's buffer limit.
	PriorityHandoff flowhttp.PriorityHandoff
	// RequestBodyMode is the filter's request_body_mode, for a stream
	// whose first message does not say (Envoy sends it in that message's
	// protocol_config, which wins): what the hand-off expects. The zero
	// value is NONE, Envoy's default.
	RequestBodyMode BodyMode
	// Logger receives one debug record per stream outcome and warnings for
	// protocol errors. Nil discards.
	Logger *slog.Logger
}

// Server is an Envoy external processor (envoy.service.ext_proc.v3) that
// puts every HTTP request through a [flowcontrol.FlowController].
//
// On request headers of an inference request ([Config.IsInference]; every
// request by default) it classifies the request, waits in
// [flowcontrol.FlowController.EnqueueAndWait] for as long as the gRPC stream
// lives, and answers CONTINUE once dispatched or an ImmediateResponse when
// rejected (the same status, headers and OpenAI-shaped body as
// [flowhttp.RejectionFor]; 400 when the classifier fails). On response
// headers it answers with a header mutation that drops every copy of the
// router-owned headers the backend sent and sets
// x-llm-d-flow-band-headroom-requests (sampled at that moment, for the band
// that admitted the request; also x-llm-d-flow-band-headroom with
// [Config.EmitProvisionalHeadroom]) and x-llm-d-flow-queue-duration-ms, with
// the meaning and absence rules of [flowhttp]'s response-header contract. On
// response trailers it answers with a mutation that removes the
// router-owned names, so a backend cannot send them as trailers either;
// Envoy asks only with response_trailer_mode SEND (with SKIP, the default,
// it does not consult the processor and backend trailers pass as they
// are). The router-owned names are [flowhttp.RouterOwnedHeaders], the
// dropped reason included, and a backend's Trailer header is rewritten
// without them. Envoy never consults an ext_proc filter on informational
// (1xx) responses, so those are Envoy's to forward or drop: leave
// proxy_100_continue off (as envoy.yaml does) and Envoy answers an
// Expect: 100-continue itself instead of forwarding a backend's 100. The
// request's slot is released exactly once: when Envoy reports the response
// complete or ends the stream, or when the stream fails or is cancelled.
// When the controller revokes an admission ([flowcontrol.Eviction], a
// band's [flowcontrol.BandConfig.Guarantee]) before the response is
// complete, the stream is answered with an ImmediateResponse, the answer
// [flowhttp.RejectionFor] gives [flowcontrol.Admission.Err] (429, the
// dropped reason evicted-priority or evicted, Retry-After), so that Envoy
// resets the request to the model server; then the slot is released and
// the stream ends. A revocation after the response is complete changes
// nothing. A request's byte size is its Content-Length: admission happens
// on the request headers, before any body. With [Config.PriorityHandoff],
// a request body Envoy sends whole (BUFFERED) is answered with a body
// mutation that sets its priority field for the band that admitted it.
//
// Register it with extprocv3.RegisterExternalProcessorServer. A Server is
// safe for concurrent use; each stream's state belongs to that stream.
// gRPC runs each stream on a goroutine of its own unless the server has
// stream workers (grpc.NumStreamWorkers, which sluice-extproc sets): with
// them a stream that finds a worker free runs on a stack already grown,
// which saves a share of the CPU a short request costs.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	controller *flowcontrol.FlowController
	capacity   capacity.Reader
	classify   func(http.Header) (flowhttp.Classification, error)
	inference  func(http.Header) bool
	// provisional is Config.EmitProvisionalHeadroom.
	provisional bool
	log         *slog.Logger

	handoff  flowhttp.PriorityHandoff
	bodyMode BodyMode
	warnMode sync.Once // the hand-off's warning about a stream's body mode
}

// NewServer returns a Server for cfg. It fails if cfg.Controller is nil or
// cfg.PriorityHandoff is not valid ([flowhttp.PriorityHandoff.Validate]).
func NewServer(cfg Config) (*Server, error) {
	if cfg.Controller == nil {
		return nil, errors.New("extproc: Config.Controller is nil")
	}
	if err := cfg.PriorityHandoff.Validate(); err != nil {
		return nil, fmt.Errorf("extproc: Config.PriorityHandoff: %w", err)
	}
	s := &Server{
		controller: cfg.Controller,
		capacity:   cfg.Capacity,
		classify:   cfg.Classify,
		inference:  cfg.IsInference,
		log:        cfg.Logger,
		bodyMode:   cfg.RequestBodyMode,
	}
	if cfg.PriorityHandoff.Enabled {
		s.handoff = cfg.PriorityHandoff
		s.handoff.Map = maps.Clone(cfg.PriorityHandoff.Map)
	}
	if s.capacity == nil {
		s.capacity = cfg.Controller
	}
	if s.classify == nil {
		s.classify = flowhttp.HeaderClassifier{}.ClassifyHeader
	}
	s.provisional = cfg.EmitProvisionalHeadroom
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// stream is the state of one ext_proc stream, that is of one HTTP request.
// Only the goroutine running Process touches it.
type stream struct {
	seenRequestHeaders bool
	// admission is non-nil from dispatch until release; revoked is its
	// Revoked channel until then (nil when it can never be revoked).
	admission *flowcontrol.Admission
	revoked   <-chan struct{}
	// effective and queueTime outlive release: a late response-headers
	// message (after a response body end, say) still reports the band that
	// handled the request.
	admitted  bool
	effective flowcontrol.FlowKey
	queueTime time.Duration
	// bodyMode is how Envoy sends this request's body: the first
	// message's protocol_config, else Config.RequestBodyMode. bodySeen is
	// set once a request_body message has come; declaredLength when the
	// request headers carried a content-length.
	bodyMode       BodyMode
	bodySeen       bool
	declaredLength bool
}

// release returns the request's slot to the controller, once.
func (st *stream) release() {
	if st.admission != nil {
		st.admission.Done()
		st.admission = nil
		st.revoked = nil
	}
}

// Process serves one ext_proc stream: one HTTP request as Envoy sees it.
// While the stream holds an admission that can be revoked, a goroutine
// reads the stream for it; that goroutine ends when the stream's context
// is cancelled, which gRPC does once Process returns.
//
// Process's own frame is kept small, the work on each message being in
// handle: gRPC runs each stream on a new goroutine, whose stack starts
// small and is copied each time it doubles, and Process's frame is under
// every call the stream makes (Recv and Send among them).
func (s *Server) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	st := stream{bodyMode: s.bodyMode}
	// Stream error, cancellation, end of stream and a panic in a handler all
	// leave through here.
	defer st.release()
	in := inbox{srv: srv}
	for {
		req, revoked, err := in.next(st.revoked)
		if revoked {
			// Once the response is complete the slot is released and
			// revoked is nil, so a revocation that comes later is never
			// seen (llm-d ignores it likewise): an ImmediateResponse then
			// would break a response the client already has.
			return s.evict(srv, &st)
		}
		if errors.Is(err, io.EOF) {
			// Envoy closed its side: there is nothing more to process.
			return nil
		}
		if err != nil {
			// The stream failed or was cancelled; gRPC already knows why.
			return err
		}
		resp, last, err := s.handle(srv.Context(), &st, req)
		if err != nil {
			return err
		}
		if err := srv.Send(resp); err != nil {
			return err
		}
		if endsResponse(req) {
			// The headers (sampled above) are on their way; the model server
			// has finished with this request.
			st.release()
		}
		if last {
			return nil
		}
	}
}

// handle returns the reply to req, whether the stream is finished once it
// is sent, or an error that ends the stream without a reply.
func (s *Server) handle(ctx context.Context, st *stream, req *extprocv3.ProcessingRequest) (resp *extprocv3.ProcessingResponse, last bool, err error) {
	if pc := req.GetProtocolConfig(); pc != nil {
		st.bodyMode = pc.GetRequestBodyMode()
	}
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		if st.seenRequestHeaders {
			s.log.Warn("ext_proc protocol error", "error", "request_headers received twice")
			return nil, true, status.Error(codes.FailedPrecondition, "extproc: request_headers received twice on one stream")
		}
		st.seenRequestHeaders = true
		return s.admit(ctx, st, r.RequestHeaders)
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		if st.admission != nil {
			// The closest an ext_proc filter without bodies sees to
			// the first token: a gate that learns from time to first
			// token hears it (flowcontrol.Admission.FirstToken).
			st.admission.FirstToken()
		}
		return s.responseHeadersReply(st, r.ResponseHeaders.GetHeaders()), false, nil
	case *extprocv3.ProcessingRequest_RequestBody:
		resp, last = s.requestBody(st, r.RequestBody)
		return resp, last, nil
	case *extprocv3.ProcessingRequest_ResponseBody:
		return continueResponseBody, false, nil
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return continueRequestTrailers, false, nil
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return stripResponseTrailers, false, nil
	default:
		s.log.Warn("ext_proc protocol error", "error", fmt.Sprintf("unsupported message %T", r))
		return nil, true, status.Errorf(codes.InvalidArgument, "extproc: unsupported processing request %T", r)
	}
}

// admit runs admission for a request-headers message. It returns the reply,
// whether the stream ends with it (a rejection), or an error that ends the
// stream without a reply (the stream itself was cancelled).
func (s *Server) admit(ctx context.Context, st *stream, msg *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, bool, error) {
	header := toHTTPHeader(msg.GetHeaders())
	if s.inference != nil && !s.inference(header) {
		return continueRequestHeaders, false, nil
	}
	class, err := s.classify(header)
	if err != nil {
		s.log.Debug("request refused by the classifier", "error", err)
		return immediate(flowhttp.ClassifyRejection(err)), true, nil
	}
	req := flowcontrol.Request{
		Key:    class.Key,
		Header: header,
		TTL:    class.TTL,
		Cost:   class.Cost,
	}
	// Admission comes before any body, so the declared length is all
	// there is to book.
	if n, err := strconv.ParseInt(header.Get("Content-Length"), 10, 64); err == nil && n > 0 {
		req.ByteSize = n
	}
	_, st.declaredLength = header["Content-Length"]
	adm, err := s.controller.EnqueueAndWait(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			// Envoy is gone (client reset, timeout): nobody reads a reply.
			s.log.Debug("stream cancelled while queued", "flow", req.Key.ID, "priority", req.Key.Priority)
			return nil, true, status.FromContextError(ctx.Err()).Err()
		}
		s.log.Debug("request rejected", "flow", req.Key.ID, "priority", req.Key.Priority, "error", err)
		return rejection(err), true, nil
	}
	st.admission = adm
	st.revoked = adm.Revoked()
	st.admitted = true
	st.effective = adm.Effective()
	st.queueTime = adm.QueueTime()
	if s.debug() {
		s.log.Debug("request admitted", "flow", req.Key.ID,
			"requested_priority", req.Key.Priority, "effective_priority", st.effective.Priority,
			"queue_time", st.queueTime)
	}
	return continueRequestHeaders, false, nil
}

// debug reports whether the logger keeps debug records, as Logger.Debug
// asks it; asking first spares an admitted request the record's arguments
// when it does not.
func (s *Server) debug() bool {
	return s.log.Enabled(context.Background(), slog.LevelDebug)
}

// The replies that carry nothing of their stream's own are built once and
// shared by every stream: gRPC only reads a reply, to marshal it on Send,
// and protobuf messages are safe to marshal concurrently.
var (
	// continueRequestHeaders is CONTINUE for request headers: admitted, or
	// not an inference request.
	continueRequestHeaders = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{}},
	}}
	continueRequestBody = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{},
	}}
	continueResponseBody = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{},
	}}
	continueRequestTrailers = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
		RequestTrailers: &extprocv3.TrailersResponse{},
	}}
	// stripResponseTrailers answers response trailers with trailerMutation.
	stripResponseTrailers = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
		ResponseTrailers: &extprocv3.TrailersResponse{HeaderMutation: trailerMutation()},
	}}
)

// evict answers a revoked admission with its ImmediateResponse, confirms
// the revocation with Done (which returns the slot) and ends the stream.
func (s *Server) evict(srv extprocv3.ExternalProcessor_ProcessServer, st *stream) error {
	resp := evicted(st)
	s.log.Debug("admission revoked", "flow", st.effective.ID, "priority", st.effective.Priority,
		"reason", resp.GetImmediateResponse().GetDetails())
	err := srv.Send(resp)
	// Done once the answer is on its way: Envoy resets the request to the
	// model server when it reads it. If Send failed, the stream is gone
	// and so is the request.
	st.release()
	return err
}

// rejection builds the ImmediateResponse for an EnqueueAndWait error: the
// same status, headers and body flowhttp answers with.
func rejection(err error) *extprocv3.ProcessingResponse {
	return immediate(flowhttp.RejectionFor(err))
}

// immediate builds the ImmediateResponse that sends r to the client.
func immediate(r flowhttp.Rejection) *extprocv3.ProcessingResponse {
	headers := &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
		setHeader("content-type", "application/json"),
	}}
	if r.DroppedReason != "" {
		headers.SetHeaders = append(headers.SetHeaders, setHeader(flowcontrol.DroppedReasonHeader, r.DroppedReason))
	}
	if r.QueueDuration != "" {
		headers.SetHeaders = append(headers.SetHeaders, setHeader(flowhttp.QueueDurationHeader, r.QueueDuration))
	}
	if r.RetryAfter != "" {
		headers.SetHeaders = append(headers.SetHeaders, setHeader("retry-after", r.RetryAfter))
	}
	details := r.DroppedReason
	if details == "" {
		details = "sluice_rejected"
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(r.Status)},
			Headers: headers,
			Body:    r.Body,
			Details: details,
		},
	}}
}
