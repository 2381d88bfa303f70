package window_test

import (
	"net/http"
	"testing"

	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/headroom/window"
)

// The headroom header is the band's room only, so a router whose
// controller-wide capacity is full refuses with rejected-saturated while
// its band still advertises room (issue 21). The refusal wins: the window
// caps itself at what is in flight and shrinks, as for any refusal, even
// when the refusal carries a headroom header saying there was room.
func TestControllerWideSaturationShrinksDespiteBandHeadroom(t *testing.T) {
	w := newWindow(t, window.Config{Initial: 10, Share: 1})
	flight := fill(t, w, t0)
	w.Done(t0, flight[0], window.Feedback{Signal: window.Accepted, Headroom: 50, HeadroomKnown: true})
	before := w.State()

	h := http.Header{}
	h.Set(window.DroppedReasonHeader, window.ReasonSaturated)
	h.Set(headroom.HeaderName, "40") // the band had room; the controller had none
	fb := window.Read(http.StatusTooManyRequests, h, t0)
	if fb.Signal != window.Saturated || !fb.HeadroomKnown || fb.Headroom != 40 {
		t.Fatalf("Read = %+v, want Saturated with the band's headroom 40", fb)
	}
	w.Done(t0, flight[1], fb)

	st := w.State()
	if !st.Capped || st.HeadroomCap != 8 {
		t.Errorf("after the refusal with 8 in flight: %+v, want capped at 8, not 8 + 40", st)
	}
	if st.Decreases != before.Decreases+1 || !(st.CongestionWindow < before.CongestionWindow) {
		t.Errorf("window %v → %v, %d decreases: want one multiplicative decrease", before.CongestionWindow, st.CongestionWindow, st.Decreases)
	}
	if got := len(fill(t, w, t0)); got != 0 {
		t.Errorf("sent %d more with 8 in flight after the refusal, want 0", got)
	}
}
