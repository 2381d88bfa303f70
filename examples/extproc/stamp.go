package extproc

import (
	"strconv"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
)

// responseMutation is the header mutation for a response-headers message:
// remove x-llm-d-flow-band-headroom-requests, its provisional name
// x-llm-d-flow-band-headroom and x-llm-d-flow-queue-duration-ms, then set the
// router's values of the first (and of the second with
// Config.EmitProvisionalHeadroom) and the last. It
// samples the effective band now; nothing read at admission is reported
// except the queue time, which is the admission's own fact.
//
// Envoy applies a HeaderMutation's remove_headers before its set_headers, and
// matches names without regard to case (its header maps hold lowercase keys:
// HTTP/2 requires them and its HTTP/1 codec lowercases on input). So one
// lowercase name in remove_headers deletes every copy the backend sent,
// whatever the case it used and however many lines it sent; the set that
// follows leaves exactly one copy, the router's. A set alone would not do:
// when the router has no value to advertise the backend's copy must still go.
func (s *Server) responseMutation(st *stream) *extprocv3.HeaderMutation {
	var band headroom.Band
	if st.admitted {
		band = headroom.Admitted(st.effective.Priority)
	}
	stamp := headroom.MutationFor(s.capacity, band, s.stampOpts...)
	m := &extprocv3.HeaderMutation{RemoveHeaders: append(stamp.Remove, flowhttp.QueueDurationHeader)}
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
	return m
}

// trailerMutation is the header mutation for a response-trailers message:
// remove every router-owned name, so that a backend cannot send one as a
// trailer (declared or not, in any letter case: Envoy matches names without
// regard to case). The router sets nothing in trailers.
func trailerMutation() *extprocv3.HeaderMutation {
	return &extprocv3.HeaderMutation{RemoveHeaders: []string{
		headroom.HeaderName, headroom.ProvisionalHeaderName, flowhttp.QueueDurationHeader,
	}}
}
