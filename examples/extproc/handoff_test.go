package extproc_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

const (
	buffered        = extprocfilterv3.ProcessingMode_BUFFERED
	bufferedPartial = extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL
	streamed        = extprocfilterv3.ProcessingMode_STREAMED
	noBody          = extprocfilterv3.ProcessingMode_NONE
)

// threeBands has bands 10, 0 and -1, fallback 0, and no gate.
func threeBands() flowcontrol.Config {
	return flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}, {Priority: -1}}}
}

// handoffHarness is a harness whose Server hands bands off with the
// default mapping, expecting mode, classifies by x-priority, and logs to
// logs.
func handoffHarness(t *testing.T, handoff flowhttp.PriorityHandoff, mode extproc.BodyMode, logs *bytes.Buffer) *harness {
	return newHarness(t, threeBands(), func(c *extproc.Config) {
		c.PriorityHandoff = handoff
		c.RequestBodyMode = mode
		c.Classify = flowhttp.HeaderClassifier{PriorityHeader: "x-priority"}.ClassifyHeader
		if logs != nil {
			c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	})
}

// sendFirst sends the request_headers message, with protocol_config when
// mode is not nil, as Envoy's first message of a stream.
func (es *envoyStream) sendFirst(mode *extproc.BodyMode, kv ...string) {
	es.t.Helper()
	base := []string{":method", "POST", ":path", "/v1/completions", ":authority", "pool.example"}
	req := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(append(base, kv...)...)},
	}}
	if mode != nil {
		req.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: *mode}
	}
	if err := es.s.Send(req); err != nil {
		es.t.Fatalf("send request_headers: %v", err)
	}
	if rh := es.recv().GetRequestHeaders(); rh == nil || rh.GetResponse().GetStatus() != extprocv3.CommonResponse_CONTINUE {
		es.t.Fatalf("request_headers: want CONTINUE")
	}
}

// requestBody sends a request_body message and returns the reply.
func (es *envoyStream) requestBody(body string, endOfStream bool) *extprocv3.ProcessingResponse {
	es.t.Helper()
	err := es.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: endOfStream},
	}})
	if err != nil {
		es.t.Fatalf("send request_body: %v", err)
	}
	return es.recv()
}

// bodyReply returns the body mutation of a request_body reply (nil for
// none) and the content-length its header mutation sets ("" for none).
func bodyReply(t *testing.T, resp *extprocv3.ProcessingResponse) (body []byte, contentLength string) {
	t.Helper()
	rb := resp.GetRequestBody()
	if rb == nil {
		t.Fatalf("request_body reply = %v, want request_body", resp)
	}
	common := rb.GetResponse()
	if len(common.GetHeaderMutation().GetRemoveHeaders()) != 0 {
		t.Errorf("the reply removes headers: %v", common.GetHeaderMutation())
	}
	contentLength, _ = setValue(t, common.GetHeaderMutation(), "content-length")
	if m := common.GetBodyMutation(); m != nil {
		body = m.GetBody()
		if body == nil {
			t.Errorf("the body mutation %v does not replace the body", m)
		}
	}
	return body, contentLength
}

// Over the ext_proc protocol, in BUFFERED mode, each request's body comes
// back with the priority of the band that admitted it, the fallback
// band's for a priority without one, whatever the client wrote, and a
// content-length that matches when the request declared one.
func TestHandoffRewritesBufferedBodies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := handoffHarness(t, flowhttp.PriorityHandoff{Enabled: true}, buffered, nil)
		const client = `{"priority":-1000,"model":"m","priority":"x"}`
		for _, tc := range []struct {
			priority string
			want     string
		}{{"10", "-10"}, {"0", "0"}, {"-1", "1"}, {"5", "0"}, {"-7", "0"}} {
			es := h.open()
			es.sendFirst(nil, "x-priority", tc.priority, "content-length", strconv.Itoa(len(client)))
			body, length := bodyReply(t, es.requestBody(client, true))
			want := `{"model":"m","priority":` + tc.want + `}`
			if string(body) != want || length != strconv.Itoa(len(want)) {
				t.Errorf("priority %s: body %s, content-length %q; want %s, %d", tc.priority, body, length, want, len(want))
			}
			es.responseHeaders(true)
			es.close()
		}
		// Without a declared length (a chunked request), no content-length.
		es := h.open()
		es.sendFirst(nil, "x-priority", "10")
		if body, length := bodyReply(t, es.requestBody(client, true)); string(body) != `{"model":"m","priority":-10}` || length != "" {
			t.Errorf("chunked: body %s, content-length %q; want the rewritten body and none", body, length)
		}
		es.responseHeaders(true)
		es.close()
		// A body vLLM's parser could read as an object, though it is not
		// JSON, is refused 400 and its slot released.
		es = h.open()
		es.sendFirst(nil, "x-priority", "10")
		resp := es.requestBody(`{"priority":-1000,"temperature":NaN}`, true)
		if ir := resp.GetImmediateResponse(); ir == nil || ir.GetStatus().GetCode() != http.StatusBadRequest ||
			!strings.Contains(string(ir.GetBody()), "a lenient JSON parser could read it as one") {
			t.Errorf("a NaN body: %v, want an ImmediateResponse 400", resp)
		}
		synctest.Wait()
		if n := h.fc.InFlight(); n != 0 {
			t.Errorf("%d requests in flight after the 400, want its slot released", n)
		}
		// A body that is not a JSON object passes as it is.
		es = h.open()
		es.sendFirst(nil, "x-priority", "10", "content-length", "12")
		if body, length := bodyReply(t, es.requestBody("priority=-9", true)); body != nil || length != "" {
			t.Errorf("form body: mutation %q, content-length %q; want none", body, length)
		}
		es.responseHeaders(true)
		es.close()
		if n := h.fc.InFlight(); n != 0 {
			t.Errorf("%d requests in flight after every stream ended", n)
		}
	})
}

// Envoy's protocol_config says which mode the stream runs in, and wins
// over Config.RequestBodyMode: a BUFFERED stream is rewritten though the
// adapter was told NONE; a STREAMED one is left alone, with one warning.
func TestHandoffFollowsTheStreamsBodyMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		h := handoffHarness(t, flowhttp.PriorityHandoff{Enabled: true}, noBody, &logs)
		const client = `{"priority":-1000}`

		es := h.open()
		mode := buffered
		es.sendFirst(&mode, "x-priority", "10")
		if body, _ := bodyReply(t, es.requestBody(client, true)); string(body) != `{"priority":-10}` {
			t.Errorf("protocol_config BUFFERED: body %s, want it rewritten", body)
		}
		es.responseHeaders(true)
		es.close()

		for range 2 {
			es := h.open()
			mode := streamed
			es.sendFirst(&mode, "x-priority", "10")
			for _, chunk := range []string{`{"priority":`, `-1000}`} {
				if body, length := bodyReply(t, es.requestBody(chunk, chunk != `{"priority":`)); body != nil || length != "" {
					t.Errorf("STREAMED chunk %s: mutation %q, content-length %q; want none", chunk, body, length)
				}
			}
			es.responseHeaders(true)
			es.close()
		}
		if n := strings.Count(logs.String(), "the priority hand-off is on, but Envoy sends the request body in mode STREAMED"); n != 1 {
			t.Errorf("the mode's warning was logged %d times, want once:\n%s", n, logs.String())
		}
	})
}

// In BUFFERED_PARTIAL a body that fits is rewritten; one that did not fit
// Envoy's buffer comes cut short and is answered 413, its slot released,
// so a long body cannot carry a client's priority past the hand-off.
func TestHandoffBufferedPartial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := handoffHarness(t, flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: 0, 0: 5}}, bufferedPartial, nil)
		es := h.open()
		es.sendFirst(nil, "x-priority", "10")
		if body, _ := bodyReply(t, es.requestBody(`{"priority":-1}`, true)); string(body) != `{"priority":0}` {
			t.Errorf("a body that fits: %s, want it rewritten to priority 0", body)
		}
		es.responseHeaders(true)
		es.close()

		es = h.open()
		es.sendFirst(nil, "x-priority", "10")
		resp := es.requestBody(`{"priority":-1000,"prompt":"`+strings.Repeat("a", 100), false)
		ir := resp.GetImmediateResponse()
		if ir == nil || ir.GetStatus().GetCode() != http.StatusRequestEntityTooLarge || !strings.Contains(string(ir.GetBody()), "larger than Envoy's buffer") {
			t.Fatalf("a body cut short: %v, want an ImmediateResponse 413", resp)
		}
		synctest.Wait()
		if n := h.fc.InFlight(); n != 0 {
			t.Errorf("%d requests in flight after the 413, want its slot released", n)
		}
	})
}

// Off, bodies pass as they are, whatever the mode.
func TestHandoffOffLeavesBodies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := handoffHarness(t, flowhttp.PriorityHandoff{}, buffered, nil)
		es := h.open()
		es.sendFirst(nil, "x-priority", "10", "content-length", "18")
		if body, length := bodyReply(t, es.requestBody(`{"priority":-1000}`, true)); body != nil || length != "" {
			t.Errorf("off: mutation %q, content-length %q; want none", body, length)
		}
		es.responseHeaders(true)
		es.close()
	})
}

func TestNewServerRefusesABadHandoff(t *testing.T) {
	fc, err := flowcontrol.New(threeBands())
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	_, err = extproc.NewServer(extproc.Config{Controller: fc, PriorityHandoff: flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: 1, 0: 0}}})
	if err == nil || !strings.Contains(err.Error(), "extproc: Config.PriorityHandoff: flowhttp: PriorityHandoff.Map is not monotone: band 10 maps to 1, above band 0's 0") {
		t.Errorf("NewServer: %v", err)
	}
}

func TestHandoffWarning(t *testing.T) {
	on := flowhttp.PriorityHandoff{Enabled: true}
	for _, tc := range []struct {
		handoff flowhttp.PriorityHandoff
		mode    extproc.BodyMode
		warns   bool
	}{
		{on, buffered, false}, {on, bufferedPartial, false}, {on, noBody, true}, {on, streamed, true},
		{on, extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED, true},
		{flowhttp.PriorityHandoff{}, noBody, false},
	} {
		w := extproc.HandoffWarning(tc.handoff, tc.mode)
		if (w != "") != tc.warns || (tc.warns && !strings.Contains(w, "mode "+tc.mode.String())) {
			t.Errorf("HandoffWarning(%v, %v) = %q", tc.handoff, tc.mode, w)
		}
	}
}
