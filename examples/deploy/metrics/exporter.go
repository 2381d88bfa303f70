package metrics

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// SaturationGate makes every later scrape report g's saturation as
// llm-d-router's utilization-detector computes it, from the queue depth and
// the KV cache against their thresholds ([gate.SaturationGate.DetectorSaturation],
// [Metrics.PoolSaturation]: 1 where the gate closes), and the endpoints it
// counts as saturated for want of fresh metrics ([Metrics.StaleEndpoints]),
// under llm-d-router's name of the saturation gate, utilization-detector.
func (m *Metrics) SaturationGate(g *gate.SaturationGate) {
	m.PoolSaturation(g.DetectorSaturation)
	m.StaleEndpoints("utilization-detector", func() int {
		st := g.Status()
		return st.Endpoints - st.Fresh
	})
}

// Exporter is what a Sluice binary serves on /metrics: its [Metrics], the
// reload counters and build_info under the binary's prefix, the Go
// runtime's and the process's collectors, and the binary's own.
type Exporter struct {
	Registry *prometheus.Registry
	// Reloads counts the binary's configuration reloads.
	Reloads *Reloads
}

// NewExporter registers m, the [Reloads] and the build_info
// ([NewBuildInfo]: version, revision and goVersion) of the binary whose
// metric names start with prefix, the Go and process collectors, and more.
func NewExporter(prefix string, m *Metrics, version, revision, goVersion string, more ...prometheus.Collector) *Exporter {
	e := &Exporter{Registry: prometheus.NewRegistry(), Reloads: NewReloads(prefix)}
	e.Registry.MustRegister(append([]prometheus.Collector{m, e.Reloads, NewBuildInfo(prefix, version, revision, goVersion),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}, more...)...)
	return e
}

// Handler serves the registry's metrics; an error gathering them is logged
// to log at ERROR.
func (e *Exporter) Handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(e.Registry, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
	})
}
