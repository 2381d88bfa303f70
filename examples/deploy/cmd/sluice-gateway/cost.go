package main

import (
	"io"
	"net/http"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// costClassifier classifies a request by its headers (the flow, the band,
// the TTL) and estimates its cost in tokens from its body with
// flowhttp.EstimateTokens: the body's bytes ÷ 4 plus its
// max_completion_tokens or max_tokens, clamped to [1, maxTokens]
// (-max-tokens, the model's context length). The cost is what a
// concurrency gate in tokens mode, a cost capacity and deficit round robin
// count; it has to rank demands, not bill them, and no client can claim
// more than maxTokens with it, however large a max_tokens it sends.
type costClassifier struct {
	headers   flowhttp.HeaderClassifier
	maxTokens int64
}

func (c costClassifier) classify(r *http.Request) (flowhttp.Classification, error) {
	class, err := c.headers.Classify(r)
	if err != nil || r.Body == nil {
		return class, err
	}
	body, err := io.ReadAll(r.Body) // the Handler's replay of a body it has read
	if err != nil {
		return class, nil
	}
	class.Cost = flowhttp.EstimateTokens(body, c.maxTokens)
	return class, nil
}

// announced returns classify, telling enqueued of each request's flow key
// once it is classified, just before the request is enqueued: the metrics
// then have the flow's queue gauges from its first request
// (metrics.Metrics.Enqueued).
func announced(classify flowhttp.ClassifyFunc, enqueued func(flowcontrol.FlowKey)) flowhttp.ClassifyFunc {
	return func(r *http.Request) (flowhttp.Classification, error) {
		class, err := classify(r)
		if err == nil {
			enqueued(class.Key)
		}
		return class, err
	}
}
