package extproc_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"

	"github.com/sluicegate/sluice/flowcontrol"
)

// usageGate is a MeteredGate with unlimited slots that keeps what it hears.
type usageGate struct {
	mu       sync.Mutex
	returned []gate.Usage
}

func (*usageGate) TryAcquire(int) bool { return true }
func (*usageGate) Release(int)         {}
func (*usageGate) Took(gate.Slot)      {}
func (g *usageGate) Returned(u gate.Usage) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.returned = append(g.returned, u)
}

// The adapter reports the response headers as the first token: a gate that
// learns from time to first token hears the time from admission to them.
func TestResponseHeadersReportTheFirstToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &usageGate{}
		h := newHarness(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g}, nil)
		es := h.open()
		es.admit()
		time.Sleep(250 * time.Millisecond) // the model server's time to first token, on the bubble's clock
		es.responseHeaders(false)
		time.Sleep(time.Second) // the body streams on
		es.close()
		synctest.Wait()
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.returned) != 1 {
			t.Fatalf("gate heard %d returns, want 1", len(g.returned))
		}
		u := g.returned[0]
		if u.FirstToken != 250*time.Millisecond || u.Held < 1250*time.Millisecond {
			t.Fatalf("usage %+v: want FirstToken 250ms and Held at least 1.25s", u)
		}
	})
}
