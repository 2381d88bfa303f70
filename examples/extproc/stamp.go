package extproc

import (
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
)

// responseMutation is the header mutation for a response-headers message
// whose headers are backend: remove every router-owned name
// (flowhttp.RouterOwnedHeaders: the headroom under both names, the queue
// duration and the dropped reason), then set the router's values of
// x-llm-d-flow-band-headroom-requests (and of the provisional name with
// Config.EmitProvisionalHeadroom) and x-llm-d-flow-queue-duration-ms. It
// samples the effective band now; nothing read at admission is reported
// except the queue time, which is the admission's own fact. The dropped
// reason is never set here: a response that reaches this point was
// dispatched.
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
func (s *Server) responseMutation(st *stream, backend *corev3.HeaderMap) *extprocv3.HeaderMutation {
	var band headroom.Band
	if st.admitted {
		band = headroom.Admitted(st.effective.Priority)
	}
	stamp := headroom.MutationFor(s.capacity, band, s.stampOpts...)
	m := &extprocv3.HeaderMutation{RemoveHeaders: flowhttp.RouterOwnedHeaders()}
	if stamp.Set {
		m.SetHeaders = append(m.SetHeaders, setHeader(headroom.HeaderName, stamp.Value))
	}
	if stamp.SetProvisional {
		m.SetHeaders = append(m.SetHeaders, setHeader(headroom.ProvisionalHeaderName, stamp.Value))
	}
	if st.admitted {
		ms := st.queueTime / time.Millisecond
		m.SetHeaders = append(m.SetHeaders, setHeader(flowhttp.QueueDurationHeader, strconv.FormatInt(int64(ms), 10)))
	}
	if declared, changed := undeclareOwned(backend); changed {
		m.RemoveHeaders = append(m.RemoveHeaders, "trailer")
		if declared != "" {
			m.SetHeaders = append(m.SetHeaders, setHeader("trailer", declared))
		}
	}
	return m
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
	return &extprocv3.HeaderMutation{RemoveHeaders: flowhttp.RouterOwnedHeaders()}
}
