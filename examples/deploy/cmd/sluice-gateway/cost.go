package main

import (
	"io"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"

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
	class.Tag = modelLabels(r.Header.Get(modelNameKey))
	if r.Body == nil {
		return class, nil
	}
	body, ok := flowhttp.BodyBytes(r) // the body the Handler has read, not copied
	if !ok {
		if body, err = io.ReadAll(r.Body); err != nil {
			return class, nil
		}
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
		class.Tag = modelLabels(r.Header.Get(modelNameKey))
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
	if tag, ok := (*labelCache.Load())[model]; ok {
		return tag
	}
	tag := any(metrics.RequestLabels{ModelName: model, TargetModelName: model})
	labelMu.Lock()
	defer labelMu.Unlock()
	if old := *labelCache.Load(); len(old) < maxCachedLabels && len(model) <= maxCachedModelLen {
		m := make(map[string]any, len(old)+1)
		maps.Copy(m, old)
		m[model] = tag
		labelCache.Store(&m)
	}
	return tag
}

// The labels of the models seen, made once each, so that the request for
// a model seen before allocates none (a value in an interface is
// allocated). Clients name the models: the cache stops growing at
// maxCachedLabels names of at most maxCachedModelLen bytes, past which a
// request's labels are made anew, as the metrics bound them anyway
// (metrics.Options.MaxModels). It is replaced whole on each addition, so
// a lookup takes no lock.
const (
	maxCachedLabels   = 64
	maxCachedModelLen = 256
)

var (
	labelMu    sync.Mutex // serializes additions
	labelCache atomic.Pointer[map[string]any]
)

func init() { labelCache.Store(&map[string]any{}) }

// modelNameKey is flowhttp.ModelNameHeader in canonical form, which
// http.Header.Get looks up without converting it first.
var modelNameKey = http.CanonicalHeaderKey(flowhttp.ModelNameHeader)

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
