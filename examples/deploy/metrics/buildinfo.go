package metrics

import "github.com/prometheus/client_golang/prometheus"

// NewBuildInfo returns the build_info gauge of the binary whose metric
// names start with prefix, such as "sluice_gateway": one series,
// prefix_build_info{version, revision, goversion} 1, the convention of
// prometheus_build_info and node_exporter_build_info, so that a query can
// join a binary's other series to the build that exports them
// (`... * on(instance) group_left(version) sluice_gateway_build_info`).
// The values are the binary's -version (config.ReadBuildInfo).
func NewBuildInfo(prefix, version, revision, goVersion string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: prefix + "_build_info",
		Help: "1, labelled with the version, VCS revision and Go version this binary was built from.",
		ConstLabels: prometheus.Labels{
			"version":   version,
			"revision":  revision,
			"goversion": goVersion,
		},
	})
	g.Set(1)
	return g
}
