package gate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// A router gates its model servers on their own metrics AND on a budget of
// estimated tokens in flight. A scraper feeds the saturation gate; each
// refresh sets how many requests may start before the next one, and nudges
// the controller so waiting requests start at once. The servers run 16
// requests each (vLLM's --max-num-seqs 16), so the gate's saturation is
// the share of their 32 slots in use; llm-d-router's own, from the queue
// depth, is its DetectorSaturation.
func Example() {
	saturation, err := gate.Saturation(gate.SaturationConfig{
		QueueDepthThreshold:       5,                // llm-d queueDepthThreshold
		KVCacheUtilThreshold:      0.8,              // llm-d kvCacheUtilThreshold
		MetricsStalenessThreshold: 10 * time.Second, // llm-d metricsStalenessThreshold (200ms by default)
		SlotsPerEndpoint:          16,               // each server's slots, for the share of the pool in use
	})
	if err != nil {
		panic(err)
	}
	tokens, err := gate.Concurrency(gate.ConcurrencyConfig{Mode: gate.ModeTokens, MaxTokenConcurrency: 8000})
	if err != nil {
		panic(err)
	}
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{{Priority: 0}},
		Gate:           gate.All(saturation, tokens),
		NoEndpointsTTL: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()

	// The scraper's first round: vllm-0 has 3 requests waiting (room for
	// 2 more); vllm-1's KV cache is 85% full (no room).
	saturation.Update("vllm-0", gate.Metrics{Waiting: 3, Running: 16, KVCache: 0.62})
	saturation.Update("vllm-1", gate.Metrics{Waiting: 0, Running: 9, KVCache: 0.85})
	fmt.Printf("%+v\n", saturation.Status())

	// Three requests of 1,500 tokens each: two start, the third waits.
	var admissions []*flowcontrol.Admission
	for i := range 3 {
		fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "chat"}, Cost: 1500},
			func(a *flowcontrol.Admission, err error) {
				if err != nil {
					fmt.Println("request", i, err)
					return
				}
				fmt.Println("request", i, "started")
				admissions = append(admissions, a)
			})
	}
	fmt.Println("waiting:", fc.InFlight(), "in flight")

	// The next scrape shows room at vllm-1: the waiting request starts.
	saturation.Update("vllm-0", gate.Metrics{Waiting: 5, Running: 16, KVCache: 0.64})
	saturation.Update("vllm-1", gate.Metrics{Waiting: 0, Running: 9, KVCache: 0.70})
	// vllm-0 uses all its slots (16 running, 5 queued), vllm-1 70% (its KV
	// cache, fuller than its 9 of 16 slots), and the request just started
	// is in no reading yet: (16 + 11.2 + 1) ÷ 32.
	fmt.Printf("slots in use %.3f, llm-d saturation %.3f\n", saturation.Saturation(), saturation.DetectorSaturation())
	for _, a := range admissions {
		a.Done()
	}
	// Output:
	// {Endpoints:2 Fresh:2 Saturated:1 Room:2 Budget:2}
	// request 0 started
	// request 1 started
	// waiting: 2 in flight
	// request 2 started
	// slots in use 0.881, llm-d saturation 0.938
}

// An adaptive gate starts from the limit it replaces and learns from the
// time to first token the caller reports: responses later than the target
// lower the limit, clearly timely ones raise it while it is in use.
func ExampleAdaptive() {
	g, err := gate.Adaptive(gate.AdaptiveConfig{TargetFirstToken: 1500 * time.Millisecond, InitialLimit: 64})
	if err != nil {
		panic(err)
	}
	fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	adm, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "chat"}})
	if err != nil {
		panic(err)
	}
	adm.FirstToken() // when the first byte of the response body reaches the router
	adm.Done()       // the gate hears the first token's latency now
	fmt.Println("limit", g.Limit())
	// Output:
	// limit 64
}

// A router that has lost every model server says so to an endpoints gate,
// composed first with the gate that limits what runs: requests then end
// rejected-no-endpoints (503) after NoEndpointsTTL instead of waiting out
// their TTL, and a waiting request starts as soon as a server is back.
func ExampleEndpoints() {
	endpoints := gate.Endpoints(0) // nothing reached yet
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{{Priority: 0}},
		Gate:           gate.All(endpoints, gate.MaxInFlight(64)),
		DefaultTTL:     time.Minute,
		NoEndpointsTTL: 20 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()

	_, err = fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "chat"}})
	fmt.Println("rejected-no-endpoints:", errors.Is(err, flowcontrol.ErrRejectedNoEndpoints))

	started := make(chan error)
	go func() {
		adm, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "chat"}})
		if err == nil {
			adm.Done()
		}
		started <- err
	}()
	endpoints.SetAvailable(1) // a connection to a server succeeded
	fmt.Println("started:", <-started == nil)
	// Output:
	// rejected-no-endpoints: true
	// started: true
}

// Servers that schedule by the priority the router hands them (vLLM with
// --scheduling-policy priority, the hand-off on) preempt batch for chat
// themselves, if the router sends them chat: PriorityMaxInFlight lets the
// higher band pass the slots while a lower one runs.
func ExamplePriorityMaxInFlight() {
	const chat, batch = 10, -1
	g := gate.PriorityMaxInFlight(2) // two servers of one slot each
	fmt.Println("batch:", g.TryAcquire(batch), g.TryAcquire(batch), g.TryAcquire(batch))
	fmt.Println("chat past the slots:", g.TryAcquire(chat), g.TryAcquire(chat), g.TryAcquire(chat))
	g.Release(batch)
	g.Release(batch)
	fmt.Println("chat with no batch running, the slots full:", g.TryAcquire(chat))
	// Output:
	// batch: true true false
	// chat past the slots: true true false
	// chat with no batch running, the slots full: false
}
