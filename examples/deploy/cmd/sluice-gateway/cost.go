package main

import (
	"encoding/json"
	"io"
	"math"
	"net/http"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// costClassifier classifies a request by its headers (the flow, the band,
// the TTL) and estimates its cost in tokens from its body, without a
// tokenizer: a quarter of the body's bytes for the prompt (roughly right
// for English text and the common BPE tokenizers; the JSON around it adds
// little) plus the output it may generate, its max_completion_tokens or
// max_tokens. The cost is what a concurrency gate in tokens mode, a cost
// capacity and deficit round robin count; it has to rank demands, not bill
// them.
//
// A body that is not a JSON object still costs its bytes ÷ 4, at least 1:
// whether the request is valid is the backend's to say.
type costClassifier struct {
	headers flowhttp.HeaderClassifier
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
	class.Cost = estimateTokens(body)
	return class, nil
}

// estimateTokens returns the cost of an OpenAI request body; see
// costClassifier.
func estimateTokens(body []byte) int64 {
	cost := (int64(len(body)) + 3) / 4
	var limits struct {
		MaxTokens           *int64 `json:"max_tokens"`
		MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	}
	if json.Unmarshal(body, &limits) == nil {
		output := limits.MaxTokens
		if limits.MaxCompletionTokens != nil {
			output = limits.MaxCompletionTokens
		}
		if output != nil && *output > 0 {
			cost += min(*output, math.MaxInt64-cost)
		}
	}
	return max(cost, 1)
}
