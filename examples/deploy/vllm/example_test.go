package vllm_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/sluicegate/sluice/examples/deploy/vllm"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// A page of a vLLM server running two data-parallel engines.
const page = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 14.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.41
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.47
`

// firstReading passes readings on to a saturation gate and closes ready at
// the first one.
type firstReading struct {
	*gate.SaturationGate
	once  sync.Once
	ready chan struct{}
}

func (s *firstReading) Update(endpoint string, m vllm.Metrics) {
	s.SaturationGate.Update(endpoint, m)
	s.once.Do(func() { close(s.ready) })
}

// A scraper feeds a saturation gate the load of a vLLM server. A
// *gate.SaturationGate is a Sink by itself; this one is wrapped only to see
// the first reading arrive.
func Example() {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		fmt.Fprint(w, page)
	}))
	defer server.Close()

	saturation, err := gate.Saturation(gate.SaturationConfig{
		// llm-d's default is 200ms; this example must not depend on how
		// fast the machine runs it.
		MetricsStalenessThreshold: 10 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	sink := &firstReading{SaturationGate: saturation, ready: make(chan struct{})}
	scraper, err := vllm.New(vllm.Config{
		Targets: []string{server.URL},
		Sink:    sink,
		OnError: func(endpoint string, err error) { fmt.Println(err) },
	})
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- scraper.Run(ctx) }()
	<-sink.ready
	stop()
	if err := <-done; err != nil {
		panic(err)
	}

	last := scraper.Stats()[0].Last
	fmt.Printf("waiting %d, running %d, KV cache %.2f\n", last.Waiting, last.Running, last.KVCache)
	fmt.Printf("%+v\n", saturation.Status())
	// Output:
	// waiting 3, running 26, KV cache 0.47
	// {Endpoints:1 Fresh:1 Saturated:0 Room:2 Budget:2}
}

// Parse reads one page: counts are summed over the engines, the KV-cache
// usage is the fuller engine's.
func ExampleParse() {
	m, err := vllm.Parse(strings.NewReader(page), expfmt.FmtText)
	if err != nil {
		panic(err)
	}
	fmt.Printf("waiting %d, running %d, KV cache %.2f\n", m.Waiting, m.Running, m.KVCache)

	_, err = vllm.Parse(strings.NewReader("# TYPE up gauge\nup 1\n"), expfmt.FmtText)
	fmt.Println(err)
	// Output:
	// waiting 3, running 26, KV cache 0.47
	// vllm: metric missing from page: vllm:num_requests_waiting
}
