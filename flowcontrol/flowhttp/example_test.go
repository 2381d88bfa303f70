package flowhttp_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/ordering"
)

// A gateway: flow control in front of a reverse proxy to a model server.
// Priority 5 has no band, so it is served by the fallback band 0 and
// reports that band's headroom; band -10 is closed and sheds everything.
func Example() {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(headroom.HeaderName, "1000") // a backend's copy never reaches the client
		fmt.Fprint(w, "tokens")
	}))
	defer model.Close()
	target, _ := url.Parse(model.URL)

	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 10, RequestCapacity: capacity.Bounded(20), Policy: ordering.SLODeadline()},
			{Priority: 0, RequestCapacity: capacity.Bounded(50)},
			{Priority: -10, RequestCapacity: capacity.Bounded(0)},
		},
		Gate: gate.MaxInFlight(8),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	gateway, err := flowhttp.New(flowhttp.Config{
		Controller: fc,
		Headers:    flowhttp.HeaderClassifier{PriorityHeader: "x-llm-d-priority"},
	}, httputil.NewSingleHostReverseProxy(target))
	if err != nil {
		panic(err)
	}

	for _, priority := range []string{"10", "5", "-10"} {
		req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"prompt":"hi"}`))
		req.Header.Set("x-llm-d-priority", priority)
		rec := httptest.NewRecorder()
		gateway.ServeHTTP(rec, req)
		res := rec.Result()
		fmt.Printf("priority %3s: %d headroom=%q queue-ms=%q dropped=%q\n", priority, res.StatusCode,
			res.Header.Get(headroom.HeaderName), res.Header.Get(flowhttp.QueueDurationHeader),
			res.Header.Get(flowcontrol.DroppedReasonHeader))
	}
	// Output:
	// priority  10: 200 headroom="20" queue-ms="0" dropped=""
	// priority   5: 200 headroom="50" queue-ms="0" dropped=""
	// priority -10: 429 headroom="" queue-ms="0" dropped="rejected-saturated"
}

func ExampleHeaderClassifier() {
	c := flowhttp.HeaderClassifier{
		PriorityHeader: "x-llm-d-priority",
		Objectives:     map[string]int{"chat": 10, "batch": -10},
	}
	for _, h := range []http.Header{
		{"X-Llm-D-Inference-Fairness-Id": {"tenant-a"}, "X-Llm-D-Priority": {"5"}},
		{"X-Gateway-Inference-Fairness-Id": {"tenant-b"}, "X-Llm-D-Inference-Objective": {"batch"}},
		{"X-Gateway-Inference-Objective": {"chat"}, "X-Llm-D-Inference-Ttl": {"30s"}}, // deprecated alias
		{"X-Llm-D-Inference-Ttl": {"0s"}},
		{},
	} {
		class, err := c.ClassifyHeader(h)
		if err != nil {
			fmt.Println("400:", err)
			continue
		}
		fmt.Printf("%+v\n", class)
	}
	// Output:
	// {Key:{ID:tenant-a Priority:5} TTL:0s Cost:0 Tag:<nil>}
	// {Key:{ID:tenant-b Priority:-10} TTL:0s Cost:0 Tag:<nil>}
	// {Key:{ID:default-flow Priority:10} TTL:30s Cost:0 Tag:<nil>}
	// 400: flowhttp: x-llm-d-inference-ttl "0s": not positive
	// {Key:{ID:default-flow Priority:0} TTL:0s Cost:0 Tag:<nil>}
}

// A classifier that sets each request's cost to its estimated tokens
// ([flowhttp.EstimateTokens]: the body's bytes / 4 plus max_tokens,
// clamped to a model's context) read from the body the Handler has
// already read (flowhttp.BodyBytes), so that the band's cost capacity and deficit round robin
// count tokens, not requests. A request estimated above the band's cost
// capacity can never fit: 413.
func ExampleClassifyFunc() {
	const contextLength = 8192 // the model's: no request can use more
	estimate := func(r *http.Request) (flowhttp.Classification, error) {
		class, err := flowhttp.HeaderClassifier{}.Classify(r) // flow key and TTL from the headers
		if err != nil {
			return class, err
		}
		body, ok := flowhttp.BodyBytes(r) // the body the Handler read, without a copy
		if !ok {
			return class, nil // not read beforehand (a negative MaxBodyBytes): no cost
		}
		class.Cost = flowhttp.EstimateTokens(body, contextLength)
		return class, nil
	}

	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{
			Priority:     0,
			CostCapacity: capacity.Bounded(4096), // tokens waiting
			Fairness:     flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{}),
		}},
		Gate: gate.MaxInFlight(8),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	model := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body) // the whole body, replayed
		fmt.Fprintf(w, "model read %d bytes", n)
	})
	gateway, err := flowhttp.New(flowhttp.Config{Controller: fc, Classify: estimate}, model)
	if err != nil {
		panic(err)
	}

	for _, req := range []struct{ promptBytes, maxTokens int }{{2000, 256}, {16000, 512}, {100, math.MaxInt64}} {
		body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d}`, strings.Repeat("a", req.promptBytes), req.maxTokens)
		r := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(body))
		r.Header.Set(flowhttp.FairnessIDHeader, "tenant-a")
		rec := httptest.NewRecorder()
		gateway.ServeHTTP(rec, r)
		fmt.Printf("cost %d: %d %s\n", flowhttp.EstimateTokens([]byte(body), contextLength), rec.Code, firstLine(rec.Body.String()))
	}
	// Output:
	// cost 764: 200 model read 2030 bytes
	// cost 4520: 413 {"error":{"message":"flowcontrol: priority 0: rejected-saturated: band 0 cost capacity 4096 exceeded by the request alone: it can never fit","type":"invalid_request_error","param":null,"code":"rejected-saturated"}}
	// cost 8192: 413 {"error":{"message":"flowcontrol: priority 0: rejected-saturated: band 0 cost capacity 4096 exceeded by the request alone: it can never fit","type":"invalid_request_error","param":null,"code":"rejected-saturated"}}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// The priority hand-off: the model server (vLLM run with
// --scheduling-policy priority) reads each request's band from the body's
// priority field, lower served first. The band that admits a request is
// what counts: priority 5 has no band and is admitted by the fallback band
// 0. A client's own priority is replaced.
func ExamplePriorityHandoff() {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s (Content-Length %d)", body, r.ContentLength)
	}))
	defer model.Close()
	target, _ := url.Parse(model.URL)

	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}, {Priority: -1}},
		Gate:  gate.MaxInFlight(8),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	handoff := flowhttp.PriorityHandoff{Enabled: true} // vLLM priority = -band
	gateway, err := flowhttp.New(flowhttp.Config{
		Controller:      fc,
		Headers:         flowhttp.HeaderClassifier{PriorityHeader: "x-llm-d-priority"},
		PriorityHandoff: handoff,
	}, httputil.NewSingleHostReverseProxy(target))
	if err != nil {
		panic(err)
	}
	fmt.Println("mapping:", handoff)

	for _, priority := range []string{"10", "5", "-1"} {
		req := httptest.NewRequest(http.MethodPost, "/v1/completions",
			strings.NewReader(`{"model":"m","priority":-100,"prompt":"hi"}`))
		req.Header.Set("x-llm-d-priority", priority)
		rec := httptest.NewRecorder()
		gateway.ServeHTTP(rec, req)
		fmt.Printf("priority %2s: %s\n", priority, rec.Body)
	}

	table := flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: 0, 0: 1, -1: 2}}
	fmt.Println("table:", table)
	fmt.Println("not monotone:", flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: 3, 0: 1}}.Validate())
	// Output:
	// mapping: priority = -band, clamped to [-2147483648, 2147483647]
	// priority 10: {"model":"m","prompt":"hi","priority":-10} (Content-Length 42)
	// priority  5: {"model":"m","prompt":"hi","priority":0} (Content-Length 40)
	// priority -1: {"model":"m","prompt":"hi","priority":1} (Content-Length 40)
	// table: band 10 → 0, band 0 → 1, band -1 → 2 (an unlisted band: the nearest listed band below, else the lowest)
	// not monotone: flowhttp: PriorityHandoff.Map is not monotone: band 10 maps to 3, above band 0's 1; the model server serves the lower value first, so a higher band must map to a value no greater than a lower band's
}
