package main

import (
	"io"
	"net/http"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
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
	if err != nil {
		return class, err
	}
	class.Tag = modelLabels(r.Header.Get(flowhttp.ModelNameHeader))
	if r.Body == nil {
		return class, nil
	}
	body, err := io.ReadAll(r.Body) // the Handler's replay of a body it has read
	if err != nil {
		return class, nil
	}
	cost, model := flowhttp.EstimateTokensAndModel(body, c.maxTokens)
	class.Cost = cost
	if model != "" {
		class.Tag = modelLabels(model)
	}
	return class, nil
}

// headerModels returns classify, labelling each request's metrics with the
// model its x-gateway-model-name header names: the classifier of a
// gateway that does not read bodies before queueing.
func headerModels(classify flowhttp.ClassifyFunc) flowhttp.ClassifyFunc {
	return func(r *http.Request) (flowhttp.Classification, error) {
		class, err := classify(r)
		class.Tag = modelLabels(r.Header.Get(flowhttp.ModelNameHeader))
		return class, err
	}
}

// modelLabels returns the metric labels of a request for model: the
// gateway rewrites no model, so the target is the model asked for, as
// llm-d-router labels a request its model rewrite leaves alone. (The
// backend's answer names the model too, but only once the request has
// been dispatched, and only in a body the gateway streams through
// unread; the queue's series need the labels before that.)
func modelLabels(model string) any {
	if model == "" {
		return nil
	}
	return metrics.RequestLabels{ModelName: model, TargetModelName: model}
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
