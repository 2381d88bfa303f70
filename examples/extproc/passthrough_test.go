package extproc_test

import (
	"net/http"
	"testing"
	"testing/synctest"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// With Config.IsInference, a request that is not inference gets CONTINUE
// at once while the band is full and the gate is shut, takes no slot, and
// its response gets no headroom; the router-owned names are still removed.
func TestNonInferencePassesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, oneSlot(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(1)}), func(c *extproc.Config) {
			c.IsInference = func(hd http.Header) bool { return hd.Get(":method") == "POST" }
		})
		a := h.open()
		a.admit()
		b := h.queueOne()
		if resp := h.open().requestHeaders(); resp.GetImmediateResponse().GetStatus().GetCode() != http.StatusTooManyRequests {
			t.Fatalf("a third completion: %v, want 429", resp)
		}

		models := h.open()
		err := models.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
			RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(":method", "GET", ":path", "/v1/models", ":authority", "pool.example")},
		}})
		if err != nil {
			t.Fatal(err)
		}
		resp := models.recv()
		if rh := resp.GetRequestHeaders(); rh == nil || rh.GetResponse().GetStatus() != extprocv3.CommonResponse_CONTINUE {
			t.Fatalf("GET /v1/models under saturation: %v, want CONTINUE", resp)
		}
		if n := h.fc.InFlight(); n != 1 {
			t.Errorf("in flight %d, want 1: what passes through takes no slot", n)
		}
		m := models.responseHeaders(true, "x-llm-d-flow-band-headroom-requests", "99")
		if len(m.GetSetHeaders()) != 0 {
			t.Errorf("the response of a request that was not admitted sets %v", m.GetSetHeaders())
		}
		got := applyMutation([]header{{"x-llm-d-flow-band-headroom-requests", "99"}}, m)
		for _, name := range flowhttp.RouterOwnedHeaders() {
			if vs := values(got, name); len(vs) > 0 {
				t.Errorf("%s %q reaches the client", name, vs)
			}
		}
		models.close()
		b.cancel()
		a.close()
	})
}
