// Package extproc puts Sluice's flow control behind Envoy: it implements the
// external processing service (envoy.service.ext_proc.v3.ExternalProcessor)
// over a [flowcontrol.FlowController].
//
// Envoy's ext_proc filter opens one gRPC stream per HTTP request. The request
// headers are where admission happens: the stream waits in the controller's
// queue, then Envoy either forwards the request (CONTINUE) or answers the
// client itself (ImmediateResponse: 429, 503, 413 for a request that can
// never fit, or 400 when the classifier refuses it; x-llm-d-request-dropped-reason,
// Retry-After and an OpenAI-shaped body as [flowhttp.RejectionFor] gives).
// The response headers are where the headroom is read: at that moment, from
// the band that really handled the request, which may not be the band it
// asked for. The response trailers are where router-owned names a backend
// sends as trailers are removed. A request whose admission the controller
// revokes while it runs (in-flight eviction) is answered with an
// ImmediateResponse 429 carrying the evicted reason, which makes Envoy
// reset it. The filter must send the request and response headers, and
// should send the response trailers; it need not send bodies (a streamed
// response body only moves the release to the body's end), unless the
// priority hand-off ([Config.PriorityHandoff]) is on: that sets the request
// body's priority field (vLLM's) from the band that admitted the request,
// and works only with request_body_mode BUFFERED, or BUFFERED_PARTIAL for
// a body that fits Envoy's buffer; in NONE and STREAMED bodies pass as
// they are ([HandoffWorks], [HandoffWarning]). envoy.yaml in
// this module's directory is a complete example.
//
// Header case. Envoy keeps header names in lowercase (HTTP/2 requires it and
// its HTTP/1 codec lowercases what it reads), sends them to the processor in
// lowercase, and lowercases the names in a mutation's remove_headers and
// set_headers before applying them. So a backend's
// "X-LLM-D-Flow-Band-Headroom-Requests" is the same header as the router's,
// and one remove_headers entry deletes every copy of it. Envoy applies
// remove_headers before set_headers, so removing a name and setting it in the
// same mutation leaves exactly one copy: the router's.
//
// This package lives in its own module so that importing Sluice never drags
// in gRPC or the Envoy protos.
package extproc
