package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
)

// modelLabels labels a request with the model it names, whatever the
// name, and makes the labels of a model seen before without allocating;
// its cache of them stops growing at its bound, however many names
// clients send.
func TestModelLabels(t *testing.T) {
	if got := modelLabels(""); got != nil {
		t.Errorf("modelLabels(\"\") = %v, want nil", got)
	}
	names := []string{"llama", strings.Repeat("m", maxCachedModelLen+1)}
	for i := range 3 * maxCachedLabels {
		names = append(names, fmt.Sprintf("model-%d", i))
	}
	for range 2 {
		for _, name := range names {
			want := metrics.RequestLabels{ModelName: name, TargetModelName: name}
			if got := modelLabels(name); got != want {
				t.Fatalf("modelLabels(%.20q) = %v, want %v", name, got, want)
			}
		}
	}
	if n := len(*labelCache.Load()); n > maxCachedLabels {
		t.Errorf("%d labels cached, more than the bound of %d", n, maxCachedLabels)
	}
	if allocs := testing.AllocsPerRun(100, func() { modelLabels("llama") }); allocs != 0 {
		t.Errorf("the labels of a model seen before allocate %v times, want 0", allocs)
	}
}
