package main

import (
	"io"
	"net/http"

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
