// Package flowhttp puts a [flowcontrol.FlowController] in front of any
// net/http handler, typically an httputil.ReverseProxy to model servers:
// admission when the request arrives, the router's advisory headers when the
// response headers are written.
//
// For each request a [Handler] reads its body to size it, classifies the
// request (a flow key, an optional TTL and a cost), and waits in
// [flowcontrol.FlowController.EnqueueAndWait] for as long as the request's
// context lives: a client that goes away while queued leaves the queue,
// whatever its protocol and body framing. A rejected request is answered at once and
// never reaches the wrapped handler. A dispatched one is served by the
// wrapped handler, and its admission is released when that handler returns or
// the client goes away, whichever comes first.
//
// # Response-header contract
//
//	header                                meaning                                    absent when
//	x-llm-d-flow-band-headroom-requests   request capacity − length of the band      not admitted; revoked; band
//	                                      that admitted the request, read when the   unbounded, unresolved or
//	                                      response headers are written               unreadable
//	x-llm-d-flow-band-headroom            the same value, under the provisional      as above; and unless
//	                                      name llm-d-async's AIMD gate reads         Config.EmitProvisionalHeadroom
//	x-llm-d-flow-queue-duration-ms        whole milliseconds the request waited in   refused before flow
//	                                      EnqueueAndWait (0: no measurable wait),    control (400, 408, and
//	                                      admitted or dropped                        413 for the body)
//	x-llm-d-request-dropped-reason        why flow control dropped the request:      served; refused before
//	                                      rejected-saturated, rejected-ttl-expired,  flow control (400 from the
//	                                      rejected-context-cancelled,                classifier or a body that
//	                                      rejected-shutting-down,                    cannot be read, 413 for a
//	                                      rejected-no-endpoints; or why it revoked   body over MaxBodyBytes); a
//	                                      a dispatched one before its response       stream revoked once begun
//	                                      began: evicted-priority, evicted (see      (it is cut, see Revocation)
//	                                      Revocation)
//	Retry-After                           whole seconds, rounded up, after which     served; 413;
//	                                      the band should have room again (see       cancellation and
//	                                      flowcontrol's Retry-After section): on     shutdown
//	                                      capacity rejections, displacements,
//	                                      expiries, rejected-no-endpoints and
//	                                      revocations
//
// Statuses of a request that is not dispatched, or is revoked before its
// response began:
//
//	status                    when                                           dropped reason
//	400 Bad Request           the classifier fails (a bad                    —
//	                          x-llm-d-inference-ttl), or the body cannot
//	                          be read; or, dispatched with the priority
//	                          hand-off on, the body is not JSON but a
//	                          lenient parser could read it as an object
//	                          (ErrHandoffBody)
//	408 Request Timeout       the body did not arrive within                 —
//	                          Config.BodyReadTimeout: refused before
//	                          queueing
//	413 Content Too Large     the body is longer than Config.MaxBodyBytes    —
//	                          (declared or read): refused before queueing
//	413 Content Too Large     the request's size or cost exceeds a byte or   rejected-saturated
//	                          cost capacity, so it can never fit
//	                          (flowcontrol.ErrTooLarge); no Retry-After
//	429 Too Many Requests     the band (or the controller) is full, by       rejected-saturated
//	                          requests, bytes or cost, and the request's
//	                          flow holds its share already
//	429 Too Many Requests     while queued, displaced by a request of a      rejected-saturated
//	                          flow holding less than its share of the full
//	                          band (fair admission; flowcontrol.ErrDisplaced
//	                          beside ErrRejectedSaturated): it never
//	                          reached a server; Retry-After as for a full
//	                          band
//	429 Too Many Requests     the queue-wait TTL expired; Retry-After as     rejected-ttl-expired
//	                          for the full band
//	429 Too Many Requests     dispatched, then revoked before the wrapped    evicted-priority, evicted
//	                          handler wrote a status or a byte of the body
//	                          (see Revocation)
//	503 Service Unavailable   the client went away while queued              rejected-context-cancelled
//	503 Service Unavailable   the controller shut down                       rejected-shutting-down
//
// Every such answer has an OpenAI-shaped JSON body, which OpenAI SDKs
// surface as the error's message, type and code:
//
//	{"error":{"message":"...","type":"rate_limit_exceeded","param":null,"code":"rejected-saturated"}}
//
// type is invalid_request_error (400, 408, 413), rate_limit_exceeded (429) or
// service_unavailable (503); code is the dropped reason, or null when flow
// control never saw the request.
//
// The router owns every name of [RouterOwnedHeaders]:
// x-llm-d-flow-band-headroom-requests, x-llm-d-flow-band-headroom,
// x-llm-d-request-dropped-reason and x-llm-d-flow-queue-duration-ms. On a
// dispatched request every copy a backend sends, in any letter case and
// with any number of values, is removed before the router's own values are
// set — from the header, from each informational (1xx) header, and from
// the trailers (declared in a Trailer header or set through
// http.TrailerPrefix, before or after the body). A backend cannot spoof
// them; in particular a response the backend answered never carries a dropped
// reason.
//
// # Priority hand-off
//
// With [Config.PriorityHandoff] on, the router owns one request field too:
// the JSON body's top-level "priority", which vLLM run with
// --scheduling-policy priority orders its waiting and running requests by
// (lower first, preempting by recompute). Each dispatched request's body
// gets the value [PriorityHandoff] maps its effective band to (−band by
// default), every copy the client wrote removed, and a Content-Length that
// matches; a body that is not a JSON object passes unchanged (one a
// lenient parser could read as an object is refused 400). So the
// model server serves the bands in the router's order, and no client jumps
// its queue by writing the field.
//
// # Revocation
//
// A controller with in-flight eviction ([flowcontrol.Config.Eviction]) or
// a guaranteed share ([flowcontrol.BandConfig.Guarantee]) may revoke a
// request it dispatched, to give its slot to a request of a higher band
// ([flowcontrol.Admission.Revoked]). The Handler then stops the request:
//
//   - It cancels the context the wrapped handler runs with, with a cause
//     ([context.Cause]) wrapping [ErrRevoked] and the admission's error
//     ([flowcontrol.Admission.Err]), so that a proxy's call to the model
//     server is cancelled and upstream code can tell why:
//     errors.Is(cause, flowcontrol.ErrEvictedPriority) for an eviction,
//     flowcontrol.ErrEvicted for a guarantee taken back. From then on,
//     nothing the wrapped handler writes reaches the client: its writes
//     and flushes return the cause.
//   - If the wrapped handler had not yet written a final status, a byte
//     of the body or a flush, the client is answered as for a request
//     flow control drops ([RejectionFor] of the admission's error): 429,
//     x-llm-d-request-dropped-reason evicted-priority (or evicted),
//     Retry-After from the victim band's drain, the time the request
//     queued, and the OpenAI-shaped body; none of the headers the wrapped
//     handler set, and no headroom (the request was dropped, as for any
//     rejection). llm-d-router answers an evicted request 429 too.
//   - If the response had begun (a streamed completion, most often), its
//     status cannot change: the Handler cuts it once the wrapped handler
//     returns, with panic(http.ErrAbortHandler), which net/http turns into
//     a broken-off response, never a clean end: an HTTP/1 body short of
//     its Content-Length or its last chunk (the client reads
//     io.ErrUnexpectedEOF), an HTTP/2 stream reset. What the client
//     received is a prefix of the answer, and it must treat it as failed.
//     A server other than net/http's that serves the Handler must recover
//     http.ErrAbortHandler the same way.
//   - The admission is released when the wrapped handler returns, which
//     confirms the revocation to the controller: the model server's work
//     has stopped then, as far as the proxy can tell. The wrapped handler
//     must therefore return once its context is done (an
//     httputil.ReverseProxy does); until it does the slot stays held and
//     the client waits (the controller stops waiting for the confirmation
//     after [flowcontrol.Eviction.Timeout], but the slot still returns
//     only then). A client that goes away releases it at once, as always.
//
// A revocation that comes after the wrapped handler returned changes
// nothing: the response it wrote goes out whole. A watcher goroutine
// waits for the revocation while the wrapped handler runs, only for an
// admission that may be revoked; it ends before ServeHTTP returns.
//
// # Threat model
//
// Clients and backends are both untrusted: nothing either sends may cost
// the router more than a bound named here, take a slot it does not give
// back, or change what the router tells other clients.
//
// A client sends a request line and headers, a body, and the time it takes
// to send them. The headers are bounded by the http.Server (MaxHeaderBytes,
// net/http's 1 MB by default, and ReadHeaderTimeout, which the server that
// runs the Handler must set: sluice-gateway does). The body is read before
// queueing, at most [Config.MaxBodyBytes] ([DefaultMaxBodyBytes], 4 MiB;
// 413 beyond, unread when its Content-Length says so) within
// [Config.BodyReadTimeout] ([DefaultBodyReadTimeout], 30 s; 408 beyond),
// so a queued request holds at most one body's bytes, and a client that
// stalls is cut before it queues. What the classifier reads is the
// client's too: a priority outside the provisioned bands falls back (or,
// with NeverPromote, is refused); a fairness id is any string, which the
// controller keys flows by while they wait and a metrics exporter must
// bound (examples/deploy/metrics does, in count and length); a TTL can only
// shorten the wait; with the priority hand-off on, a priority field in the
// body is replaced, whatever its type or spelling or how often it repeats
// (and a body only a lenient parser reads as an object is refused; see
// [PriorityHandoff.Rewrite]). A cost estimated from the body must be clamped:
// [EstimateTokens] clamps to the model's context ([DefaultMaxTokens],
// 128 Ki tokens, by default) and saturates, whatever max_tokens says. A
// client that goes away while queued leaves the queue at once; one that
// goes away while served releases its slot at once.
//
// A backend sends a status, headers, 1xx headers, a body and trailers. The
// router-owned names are stripped from all of them, as above, so a backend
// cannot advertise room that is not there, claim a queue time, or make a
// dispatched request look dropped. The body and the rest are passed on
// unread: the Handler buffers nothing of a response. A backend that never
// answers holds its slot until the client goes away or the wrapped handler
// (the proxy's transport) gives up; bounding that is the proxy's.
//
// What the router answers itself (rejections, classifier errors, the
// limits above) is the OpenAI-shaped body of [Rejection], of bounded size:
// its message names the limit, or quotes the header value the classifier
// could not read (itself bounded by MaxHeaderBytes), never the body.
//
// The band reported is the effective one: a request for a band that is not
// provisioned is admitted in the fallback band, and its headroom is that
// band's, whatever is provisioned while it runs.
package flowhttp
