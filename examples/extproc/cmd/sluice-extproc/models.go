package main

import (
	"net/http"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// headerModels returns classify, labelling each request's metrics with the
// model its x-gateway-model-name header names (flowhttp.ModelNameHeader,
// which llm-d's body-based routing sets from the body upstream of this
// filter). Envoy sends an ext_proc filter the request headers only (in
// envoy.yaml's processing mode, and by default), and admission answers at
// the headers, so the body's "model" is not there to read; without the
// header, the model labels are empty. Sluice rewrites no model, so the
// target is the model asked for.
func headerModels(classify func(http.Header) (flowhttp.Classification, error)) func(http.Header) (flowhttp.Classification, error) {
	return func(h http.Header) (flowhttp.Classification, error) {
		class, err := classify(h)
		if model := h.Get(modelNameKey); model != "" {
			class.Tag = metrics.RequestLabels{ModelName: model, TargetModelName: model}
		}
		return class, err
	}
}

// modelNameKey is flowhttp.ModelNameHeader in canonical form, the key
// http.Header.Get looks up: given it, Get has nothing to rewrite, and so
// nothing to allocate.
var modelNameKey = http.CanonicalHeaderKey(flowhttp.ModelNameHeader)
