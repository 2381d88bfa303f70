package main

import (
	"net/http"
	"testing"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// Envoy sends the adapter headers only: the model labels come from
// x-gateway-model-name, and are empty without it.
func TestHeaderModels(t *testing.T) {
	classify := headerModels(flowhttp.HeaderClassifier{}.ClassifyHeader)
	h := http.Header{}
	h.Set(flowhttp.ModelNameHeader, "llama-3")
	class, err := classify(h)
	if err != nil {
		t.Fatal(err)
	}
	if want := (metrics.RequestLabels{ModelName: "llama-3", TargetModelName: "llama-3"}); class.Tag != want {
		t.Errorf("Tag %#v, want %#v", class.Tag, want)
	}
	if class, _ := classify(http.Header{}); class.Tag != nil {
		t.Errorf("Tag %#v without the header, want none", class.Tag)
	}
}
