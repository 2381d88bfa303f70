package extproc_test

// Trailers, the provisional headroom name, the TTL header, and answers for
// requests that can never fit or that the classifier refuses.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/internal/testhttp"
)

// responseTrailers sends response_trailers holding kv and returns the
// mutation the adapter answers with.
func (es *envoyStream) responseTrailers(kv ...string) *extprocv3.HeaderMutation {
	es.t.Helper()
	err := es.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
		ResponseTrailers: &extprocv3.HttpTrailers{Trailers: headerMap(kv...)},
	}})
	require.NoError(es.t, err)
	rt := es.recv().GetResponseTrailers()
	require.NotNil(es.t, rt, "want a response_trailers reply")
	return rt.GetHeaderMutation()
}

func TestResponseTrailersCannotCarryRouterHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, s := admitOne(t)
		s.responseHeaders(false)
		trailers := []header{
			{"grpc-status", "0"},
			{"x-llm-d-flow-band-headroom-requests", "999"},
			{"X-LLM-D-Flow-Band-Headroom", "998"},
			{"x-llm-d-flow-queue-duration-ms", "1"},
			{"X-Llm-D-Flow-Queue-Duration-Ms", "2"},
		}
		var kv []string
		for _, tr := range trailers {
			kv = append(kv, tr.name, tr.value)
		}
		m := s.responseTrailers(kv...)
		assert.Empty(t, m.GetSetHeaders(), "the router sets nothing in trailers")
		got := applyMutation(trailers, m)
		if diff := cmp.Diff([]header{{"grpc-status", "0"}}, got, cmp.AllowUnexported(header{})); diff != "" {
			t.Errorf("trailers after the mutation (-want +got):\n%s", diff)
		}
		// The trailers end the response: the slot is free.
		synctest.Wait()
		assert.Zero(t, h.fc.InFlight())
		s.close()
	})
}

func TestEmitProvisionalHeadroom(t *testing.T) {
	for _, emit := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, oneSlot(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(10)}),
				func(c *extproc.Config) { c.EmitProvisionalHeadroom = emit })
			s := h.open()
			s.admit()
			got := applyMutation(pairs(spoofed...), s.responseHeaders(true, spoofed...))
			assert.Equal(t, []string{"10"}, values(got, headroom.HeaderName))
			if emit {
				assert.Equal(t, []string{"10"}, values(got, headroom.ProvisionalHeaderName))
			} else {
				assert.Empty(t, values(got, headroom.ProvisionalHeaderName))
			}
			assert.Equal(t, []string{"0"}, values(got, flowhttp.QueueDurationHeader))
			assert.Equal(t, []string{"text/event-stream"}, values(got, "content-type"))
			s.close()
		})
	}
}

// TestTTLHeaderBoundsTheWait: x-llm-d-inference-ttl shortens the queue wait
// to exactly its value, never lengthens the band's.
func TestTTLHeaderBoundsTheWait(t *testing.T) {
	cases := []struct {
		bandTTL time.Duration
		header  string
		want    time.Duration
	}{
		{0, "2s", 2 * time.Second},
		{5 * time.Second, "750ms", 750 * time.Millisecond},
		{time.Second, "1h", time.Second},
	}
	for _, c := range cases {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, oneSlot(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(10), TTL: c.bandTTL}), nil)
			a := h.open()
			a.admit()
			start := time.Now()
			ir := h.open().requestHeaders(flowhttp.TTLHeader, c.header).GetImmediateResponse()
			require.NotNil(t, ir, "want an ImmediateResponse")
			assert.Equal(t, c.want, time.Since(start), "ttl header %q, band TTL %v", c.header, c.bandTTL)
			assert.EqualValues(t, http.StatusTooManyRequests, ir.GetStatus().GetCode())
			v, _ := setValue(t, ir.GetHeaders(), flowcontrol.DroppedReasonHeader)
			assert.Equal(t, "rejected-ttl-expired", v)
			a.close()
		})
	}
}

// TestClassifierErrorAnswered400: a malformed, zero or negative TTL is
// refused with 400 before flow control sees the request.
func TestClassifierErrorAnswered400(t *testing.T) {
	for _, value := range []string{"soon", "0s", "-1s", "10"} {
		synctest.Test(t, func(t *testing.T) {
			var events []flowcontrol.Event
			cfg := oneSlot(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(10)})
			cfg.Observer = func(e flowcontrol.Event) { events = append(events, e) }
			h := newHarness(t, cfg, nil)
			s := h.open()
			ir := s.requestHeaders(flowhttp.TTLHeader, value).GetImmediateResponse()
			require.NotNil(t, ir, "ttl %q: want an ImmediateResponse", value)
			assert.EqualValues(t, http.StatusBadRequest, ir.GetStatus().GetCode(), "ttl %q", value)
			_, ok := setValue(t, ir.GetHeaders(), flowcontrol.DroppedReasonHeader)
			assert.False(t, ok, "ttl %q: a dropped reason for a request flow control never saw", value)
			var body testhttp.OpenAIError
			require.NoError(t, json.Unmarshal(ir.GetBody(), &body))
			assert.Equal(t, "invalid_request_error", body.Error.Type)
			assert.Nil(t, body.Error.Code)
			assert.Contains(t, body.Error.Message, flowhttp.TTLHeader)
			if _, err := s.s.Recv(); !errors.Is(err, io.EOF) {
				t.Errorf("after the ImmediateResponse: %v, want io.EOF", err)
			}
			synctest.Wait()
			assert.Empty(t, events, "ttl %q", value)
		})
	}
}

// TestTooLargeAnswered413: a request whose declared length exceeds the
// band's byte capacity can never fit: 413, rejected-saturated, no
// Retry-After.
func TestTooLargeAnswered413(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, oneSlot(flowcontrol.BandConfig{Priority: 0, ByteCapacity: capacity.Bounded(10)}), nil)
		ir := h.open().requestHeaders("content-length", "11").GetImmediateResponse()
		require.NotNil(t, ir, "want an ImmediateResponse")
		assert.EqualValues(t, http.StatusRequestEntityTooLarge, ir.GetStatus().GetCode())
		v, _ := setValue(t, ir.GetHeaders(), flowcontrol.DroppedReasonHeader)
		assert.Equal(t, "rejected-saturated", v)
		_, ok := setValue(t, ir.GetHeaders(), "retry-after")
		assert.False(t, ok, "Retry-After on a request that can never fit")
		var body testhttp.OpenAIError
		require.NoError(t, json.Unmarshal(ir.GetBody(), &body))
		require.NotNil(t, body.Error.Code)
		assert.Equal(t, "rejected-saturated", *body.Error.Code)
		assert.Equal(t, "invalid_request_error", body.Error.Type)

		// One that fits is admitted.
		s := h.open()
		s.admit("content-length", "10")
		s.close()
	})
}
