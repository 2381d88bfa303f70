package extproc

import (
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
)

// responseHeadersReply is the reply to a response-headers message whose
// headers are backend: CONTINUE with a header mutation that removes every
// router-owned name (flowhttp.RouterOwnedHeaders: the headroom under both
// names, the queue duration and the dropped reason), then sets the
// router's values of x-llm-d-flow-band-headroom-requests (and of the
// provisional name with Config.EmitProvisionalHeadroom) and
// x-llm-d-flow-queue-duration-ms. It samples the effective band now;
// nothing read at admission is reported except the queue time, which is
// the admission's own fact. The dropped reason is never set here: a
// response that reaches this point was dispatched.
//
// Envoy applies a HeaderMutation's remove_headers before its set_headers, and
// matches names without regard to case (its header maps hold lowercase keys:
// HTTP/2 requires them and its HTTP/1 codec lowercases on input). So one
// lowercase name in remove_headers deletes every copy the backend sent,
// whatever the case it used and however many lines it sent; the set that
// follows leaves exactly one copy, the router's. A set alone would not do:
// when the router has no value to advertise the backend's copy must still go.
//
// A backend's Trailer header that declares a router-owned name is rewritten
// without it (or removed, when it declares nothing else), so that no
// client is told to expect a router-owned trailer; the trailers
// themselves are stripped by trailerMutation.
//
// The reply, with its first two set_headers entries, is one allocation
// (headersReply); the removed names are a list every reply shares.
func (s *Server) responseHeadersReply(st *stream, backend *corev3.HeaderMap) *extprocv3.ProcessingResponse {
	r := new(headersReply)
	r.resp.Response = &r.oneof
	r.oneof.ResponseHeaders = &r.headers
	r.headers.Response = &r.common
	r.common.HeaderMutation = &r.mutation
	m := &r.mutation
	m.RemoveHeaders = routerOwned
	m.SetHeaders = r.set[:0]
	var band headroom.Band
	if st.admitted {
		band = headroom.Admitted(st.effective.Priority)
	}
	digits := r.digits[:0]
	if requests, ok := sampleHeadroom(s.capacity, band); ok {
		digits = strconv.AppendInt(digits, requests, 10)
		value := digits[:len(digits):len(digits)]
		r.add(headroom.HeaderName, value)
		if s.provisional {
			r.add(headroom.ProvisionalHeaderName, value)
		}
	}
	if st.admitted {
		ms := st.queueTime / time.Millisecond
		start := len(digits)
		digits = strconv.AppendInt(digits, int64(ms), 10)
		r.add(flowhttp.QueueDurationHeader, digits[start:len(digits):len(digits)])
	}
	if declared, changed := undeclareOwned(backend); changed {
		m.RemoveHeaders = append(m.RemoveHeaders, "trailer")
		if declared != "" {
			r.add("trailer", []byte(declared))
		}
	}
	return &r.resp
}

// headersReply holds a response-headers reply and every message inside
// it, so that responseHeadersReply allocates them at once. Nothing in it
// is copied once built: the messages are reached through pointers only.
type headersReply struct {
	resp     extprocv3.ProcessingResponse
	oneof    extprocv3.ProcessingResponse_ResponseHeaders
	headers  extprocv3.HeadersResponse
	common   extprocv3.CommonResponse
	mutation extprocv3.HeaderMutation
	// set backs mutation.SetHeaders; opts and values back its first two
	// entries, the headroom and the queue duration of an admitted request
	// without Config.EmitProvisionalHeadroom. Further entries (the
	// provisional name, a rewritten Trailer) are allocated on their own.
	set    [3]*corev3.HeaderValueOption
	opts   [2]corev3.HeaderValueOption
	values [2]corev3.HeaderValue
	// digits holds the headroom and the queue duration in decimal.
	digits [40]byte
}

// add appends a set_headers entry that replaces every existing copy of
// name with value, in raw_value, as setHeader does.
func (r *headersReply) add(name string, value []byte) {
	i := len(r.mutation.SetHeaders)
	if i >= len(r.opts) {
		r.mutation.SetHeaders = append(r.mutation.SetHeaders, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: name, RawValue: value},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		})
		return
	}
	r.values[i].Key, r.values[i].RawValue = name, value
	r.opts[i].Header = &r.values[i]
	r.opts[i].AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	r.mutation.SetHeaders = append(r.mutation.SetHeaders, &r.opts[i])
}

// routerOwned is flowhttp.RouterOwnedHeaders, read once and shared by
// every mutation: nothing writes to it, and it is clipped, so that an
// append makes a copy.
var routerOwned = slices.Clip(flowhttp.RouterOwnedHeaders())

// sampleHeadroom is headroom.Sample with a Reader's panic taken as a
// failed read, as headroom.MutationFor does: the header is advisory, and a
// bug in reading it must not cost the response it rides on.
func sampleHeadroom(r capacity.Reader, b headroom.Band) (requests int64, ok bool) {
	defer func() {
		if recover() != nil {
			requests, ok = 0, false
		}
	}()
	return headroom.Sample(r, b)
}

// undeclareOwned returns the trailer names the backend's Trailer headers
// declare, every line joined, without the router-owned ones, and whether
// it dropped any.
func undeclareOwned(backend *corev3.HeaderMap) (string, bool) {
	var kept []string
	changed := false
	for _, hv := range backend.GetHeaders() {
		if !strings.EqualFold(hv.GetKey(), "trailer") {
			continue
		}
		for elem := range strings.SplitSeq(headerValue(hv), ",") {
			elem = strings.Trim(elem, " \t")
			switch {
			case elem == "":
			case flowhttp.IsRouterOwned(elem):
				changed = true
			default:
				kept = append(kept, elem)
			}
		}
	}
	return strings.Join(kept, ", "), changed
}

// trailerMutation is the header mutation for a response-trailers message:
// remove every router-owned name (flowhttp.RouterOwnedHeaders), so that a
// backend cannot send one as a trailer (declared or not, in any letter
// case: Envoy matches names without regard to case). The router sets
// nothing in trailers.
func trailerMutation() *extprocv3.HeaderMutation {
	return &extprocv3.HeaderMutation{RemoveHeaders: routerOwned}
}
