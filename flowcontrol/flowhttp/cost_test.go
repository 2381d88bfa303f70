package flowhttp_test

// Cost, cost capacities and fair admission seen through the Handler. Each
// test calls the Handler directly in a synctest bubble, so that
// synctest.Wait tells when every request is parked in the controller.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// tokenEstimate is the classifier of these tests: the fairness flow from
// the headers, and as cost the prompt's bytes / 4 plus max_tokens, read
// from the body.
func tokenEstimate(r *http.Request) (flowhttp.Classification, error) {
	class, err := flowhttp.HeaderClassifier{}.Classify(r)
	if err != nil {
		return class, err
	}
	var body struct {
		Prompt    string `json:"prompt"`
		MaxTokens int64  `json:"max_tokens"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return class, err
	}
	class.Cost = int64(len(body.Prompt))/4 + body.MaxTokens
	return class, nil
}

// completion returns a completion request body whose tokenEstimate is
// cost (cost >= 1): a prompt of 4 × (cost−1) bytes and max_tokens 1.
func completion(cost int) string {
	return `{"prompt":"` + strings.Repeat("x", 4*(cost-1)) + `","max_tokens":1}`
}

// served records what the wrapped handler received.
type served struct {
	mu     sync.Mutex
	bodies []string
	hold   chan struct{} // a request with holdHeader waits for it to close
}

func (s *served) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	s.mu.Unlock()
	if r.Header.Get(holdHeader) != "" {
		<-s.hold
	}
	io.WriteString(w, "tokens")
}

// call is one request in flight through h.
type call struct {
	rec  *httptest.ResponseRecorder
	done chan struct{}
}

// serve sends a request of flow with body to h on a new goroutine.
func serve(ctx context.Context, h http.Handler, flow, body string, headers ...string) *call {
	c := &call{rec: httptest.NewRecorder(), done: make(chan struct{})}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/completions", strings.NewReader(body))
	r.Header.Set(flowhttp.FairnessIDHeader, flow)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	go func() {
		defer close(c.done)
		h.ServeHTTP(c.rec, r)
	}()
	return c
}

func (c *call) result() *http.Response {
	<-c.done
	return c.rec.Result()
}

// TestClassifierCostReachesController: the cost a classifier computes from
// the body is the request's cost in the controller — in the band's and the
// flow's snapshots — and the wrapped handler still receives the whole body.
func TestClassifierCostReachesController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := newController(t, oneSlot(flowcontrol.BandConfig{Priority: 0, CostCapacity: capacity.Bounded(10_000)}))
		backend := &served{hold: make(chan struct{})}
		h := mustHandler(t, flowhttp.Config{Controller: fc, Classify: tokenEstimate}, backend)
		first := serve(t.Context(), h, "a", completion(5), holdHeader, "1")
		synctest.Wait()
		calls := []*call{
			serve(t.Context(), h, "a", completion(100)),
			serve(t.Context(), h, "a", completion(250)),
			serve(t.Context(), h, "b", completion(40)),
		}
		synctest.Wait()

		band, err := fc.CapacitySnapshot(0)
		if err != nil {
			t.Fatal(err)
		}
		if band.QueuedRequests != 3 || band.QueuedCost != 390 {
			t.Errorf("band: %d queued at cost %d, want 3 at 100+250+40 = 390", band.QueuedRequests, band.QueuedCost)
		}
		for flow, want := range map[string]int64{"a": 350, "b": 40} {
			s, err := fc.FlowSnapshot(0, flow)
			if err != nil {
				t.Fatal(err)
			}
			if s.QueuedCost != want {
				t.Errorf("flow %s: queued cost %d, want %d", flow, s.QueuedCost, want)
			}
		}

		close(backend.hold)
		for _, c := range append(calls, first) {
			if res := c.result(); res.StatusCode != http.StatusOK {
				t.Errorf("status %d, want 200", res.StatusCode)
			}
		}
		want := []string{completion(5), completion(100), completion(250), completion(40)}
		slices.Sort(want)
		slices.Sort(backend.bodies)
		if !slices.Equal(backend.bodies, want) {
			t.Errorf("the wrapped handler received bodies of lengths %d, want the %d whole bodies", lengths(backend.bodies), len(want))
		}
	})
}

func lengths(ss []string) []int {
	var n []int
	for _, s := range ss {
		n = append(n, len(s))
	}
	return n
}

// TestCostCapacityOverHTTP: a request that does not fit the band's cost
// capacity now is answered 429 rejected-saturated; one whose cost alone
// exceeds it, 413 with no Retry-After, whatever the queue holds.
func TestCostCapacityOverHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := newController(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, CostCapacity: capacity.Bounded(100)}},
			Gate:  gate.MaxInFlight(0),
		})
		h := mustHandler(t, flowhttp.Config{Controller: fc, Classify: tokenEstimate}, okHandler)
		ctx, cancel := context.WithCancel(t.Context())
		queued := serve(ctx, h, "a", completion(60))
		synctest.Wait()

		for _, c := range []struct {
			name   string
			cost   int
			status int
		}{
			{"over the room left", 60, http.StatusTooManyRequests},
			{"over the capacity", 101, http.StatusRequestEntityTooLarge},
		} {
			res := serve(t.Context(), h, "a", completion(c.cost)).result()
			body, _ := io.ReadAll(res.Body)
			e := decodeError(t, string(body))
			if res.StatusCode != c.status || res.Header.Get(flowcontrol.DroppedReasonHeader) != "rejected-saturated" ||
				e.code() != "rejected-saturated" || e.Error.Type != wantType[c.status] {
				t.Errorf("%s: %d %q %+v, want %d rejected-saturated", c.name, res.StatusCode,
					res.Header.Get(flowcontrol.DroppedReasonHeader), e, c.status)
			}
			if !strings.Contains(e.Error.Message, "band 0 cost capacity 100 exceeded") {
				t.Errorf("%s: message %q does not name the cost capacity", c.name, e.Error.Message)
			}
			// No drain rate is measured: a request that can fit gets the
			// prior's (one in flight, a place per PriorServiceTime); one
			// that never can gets none.
			want := ""
			if c.status == http.StatusTooManyRequests {
				want = "1"
			}
			if got := res.Header.Get("Retry-After"); got != want {
				t.Errorf("%s: Retry-After %q without a measured drain rate, want %q", c.name, got, want)
			}
		}
		cancel()
		if res := queued.result(); res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("queued request: %d after its client left, want 503", res.StatusCode)
		}
	})
}

// TestDisplacedAnswered429: with fair admission, a request of a flow that
// holds nothing of a full band displaces the newest request of the flow
// holding it all; the displaced request, which never reached a server, is
// answered 429 with dropped reason rejected-saturated (llm-d's rejected-*:
// not evicted-*), the time it queued, the OpenAI-shaped body saying it was
// displaced, and the band's Retry-After (30 s: the band was busy a second
// and a half without draining), and never reaches the wrapped handler.
func TestDisplacedAnswered429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := newController(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{band(0, 2)},
			Gate:  gate.MaxInFlight(0),
		})
		called := false
		h := newHandler(t, fc, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
		ctx, cancel := context.WithCancel(t.Context())
		older := serve(ctx, h, "heavy", "")
		synctest.Wait()
		newer := serve(ctx, h, "heavy", "")
		synctest.Wait()
		time.Sleep(1500 * time.Millisecond)
		light := serve(ctx, h, "light", "")

		res := newer.result()
		body, _ := io.ReadAll(res.Body)
		e := decodeError(t, string(body))
		if res.StatusCode != http.StatusTooManyRequests ||
			res.Header.Get(flowcontrol.DroppedReasonHeader) != "rejected-saturated" ||
			res.Header.Get("Retry-After") != "30" ||
			res.Header.Get(flowhttp.QueueDurationHeader) != "1500" {
			t.Errorf("displaced: %d dropped %q Retry-After %q queued %q ms, want 429 rejected-saturated 30 1500", res.StatusCode,
				res.Header.Get(flowcontrol.DroppedReasonHeader), res.Header.Get("Retry-After"), res.Header.Get(flowhttp.QueueDurationHeader))
		}
		if e.code() != "rejected-saturated" || e.Error.Type != "rate_limit_exceeded" ||
			!strings.Contains(e.Error.Message, "rejected-saturated: displaced from its queue by a fairer flow") ||
			strings.Contains(e.Error.Message, "evicted") {
			t.Errorf("displaced: body %+v", e)
		}
		synctest.Wait()
		for flow, want := range map[string]int64{"heavy": 1, "light": 1} {
			if s, _ := fc.FlowSnapshot(0, flow); s.QueuedRequests != want {
				t.Errorf("flow %s: %d queued, want %d", flow, s.QueuedRequests, want)
			}
		}
		cancel()
		for _, c := range []*call{older, light} {
			if res := c.result(); res.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("queued request: %d after its client left, want 503", res.StatusCode)
			}
		}
		if called {
			t.Error("the wrapped handler ran, but nothing was dispatched")
		}
	})
}
