package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// The gateway's classifiers label a request with the model its body
// names, else with its x-gateway-model-name header, else with none; the
// target is the same model, since the gateway rewrites none.
func TestClassifiersLabelTheModel(t *testing.T) {
	body := costClassifier{maxTokens: 1000}.classify
	headers := headerModels(flowhttp.HeaderClassifier{}.Classify)
	for _, tc := range []struct {
		name     string
		classify flowhttp.ClassifyFunc
		body     string
		header   string
		want     any
	}{
		{"body", body, `{"model":"llama-3","max_tokens":4}`, "", metrics.RequestLabels{ModelName: "llama-3", TargetModelName: "llama-3"}},
		{"body over header", body, `{"model":"llama-3"}`, "qwen", metrics.RequestLabels{ModelName: "llama-3", TargetModelName: "llama-3"}},
		{"header when the body names none", body, `{"prompt":"hi"}`, "qwen", metrics.RequestLabels{ModelName: "qwen", TargetModelName: "qwen"}},
		{"none", body, `not json`, "", nil},
		{"headers only", headers, `{"model":"unread"}`, "qwen", metrics.RequestLabels{ModelName: "qwen", TargetModelName: "qwen"}},
		{"headers only, none", headers, `{"model":"unread"}`, "", nil},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(tc.body))
		if tc.header != "" {
			r.Header.Set(flowhttp.ModelNameHeader, tc.header)
		}
		class, err := tc.classify(r)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if class.Tag != tc.want {
			t.Errorf("%s: Tag %#v, want %#v", tc.name, class.Tag, tc.want)
		}
	}
}
