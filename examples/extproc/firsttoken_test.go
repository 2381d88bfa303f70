package extproc_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/gatetest"
)

// The adapter reports the response headers as the first token: a gate that
// learns from time to first token hears the time from admission to them.
func TestResponseHeadersReportTheFirstToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatetest.UsageGate{}
		h := newHarness(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g}, nil)
		es := h.open()
		es.admit()
		time.Sleep(250 * time.Millisecond) // the model server's time to first token, on the bubble's clock
		es.responseHeaders(false)
		time.Sleep(time.Second) // the body streams on
		es.close()
		synctest.Wait()
		returned := g.Returns()
		if len(returned) != 1 {
			t.Fatalf("gate heard %d returns, want 1", len(returned))
		}
		u := returned[0]
		if u.FirstToken != 250*time.Millisecond || u.Held < 1250*time.Millisecond {
			t.Fatalf("usage %+v: want FirstToken 250ms and Held at least 1.25s", u)
		}
	})
}
