package flowhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/clocktest"
	"github.com/sluicegate/sluice/ordering"
)

// The Handler stamps a request's received time from the controller's
// clock, not from time.Now: on a controller whose clock stands in the year
// 2000, a request sent through the Handler with an SLO of 5 s has a
// deadline 5 s after the controller's now, so it leaves before one
// enqueued directly with an SLO of 10 s. With the wall clock its deadline
// would be decades later, and it would leave last.
func TestHandlerReadsTheControllersClock(t *testing.T) {
	synctest.Test(t, testHandlerReadsTheControllersClock)
}

func testHandlerReadsTheControllersClock(t *testing.T) {
	clock := clocktest.New(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) // it moves only when told
	gt := newCountingGate(1)
	fc := newController(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, Policy: ordering.SLODeadline(), Queue: ordering.QueueHeap}},
		Gate:  gt,
		Clock: clock,
	})
	holder, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "holder"}})
	require.NoError(t, err)

	order := make(chan string, 2)
	direct := make(chan error, 1)
	go func() {
		adm, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{
			Key:          flowcontrol.FlowKey{ID: "direct"},
			ReceivedTime: clock.Now(),
			Header:       http.Header{"X-Llm-D-Slo-Ttft-Ms": {"10000"}},
		})
		if err == nil {
			order <- "direct (10 s)"
			adm.Done()
		}
		direct <- err
	}()
	synctest.Wait()
	require.EqualValues(t, 1, queued(t, fc, 0))

	h := newHandler(t, fc, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		order <- "handler (5 s)"
	}))
	served := make(chan struct{})
	go func() {
		defer close(served)
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("x-llm-d-slo-ttft-ms", "5000")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	synctest.Wait()
	require.EqualValues(t, 2, queued(t, fc, 0))

	holder.Done()
	require.Equal(t, "handler (5 s)", <-order, "the earlier deadline on the controller's time line leaves first")
	<-served
	require.Equal(t, "direct (10 s)", <-order)
	require.NoError(t, <-direct)
}
