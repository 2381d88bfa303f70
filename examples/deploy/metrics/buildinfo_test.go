package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
)

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewBuildInfo("sluice_gateway", "v1.2.3", "abc123", "go1.26.0"))
	want := `
# HELP sluice_gateway_build_info 1, labelled with the version, VCS revision and Go version this binary was built from.
# TYPE sluice_gateway_build_info gauge
sluice_gateway_build_info{goversion="go1.26.0",revision="abc123",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
