package metrics

import "github.com/prometheus/client_golang/prometheus"

// Reloads exports a binary's configuration reloads:
//
//	<prefix>_config_reloads_total          counter  result  reloads by result: success, or failure (the running configuration stayed)
//	<prefix>_config_last_reload_successful gauge            1 if the last reload succeeded (or none was tried), 0 if it failed
//
// It is a prometheus.Collector.
type Reloads struct {
	total *prometheus.CounterVec
	ok    prometheus.Gauge
}

// NewReloads returns the reload metrics of the binary whose metric names
// start with prefix, such as "sluice_gateway".
func NewReloads(prefix string) *Reloads {
	r := &Reloads{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_config_reloads_total",
			Help: "Configuration reloads on SIGHUP, by result: success, or failure (the running configuration stayed).",
		}, []string{"result"}),
		ok: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: prefix + "_config_last_reload_successful",
			Help: "1 if the last configuration reload succeeded (or none was tried), 0 if it failed.",
		}),
	}
	r.total.WithLabelValues("success")
	r.total.WithLabelValues("failure")
	r.ok.Set(1)
	return r
}

// Record counts one reload, failed if err is not nil.
func (r *Reloads) Record(err error) {
	if err != nil {
		r.total.WithLabelValues("failure").Inc()
		r.ok.Set(0)
		return
	}
	r.total.WithLabelValues("success").Inc()
	r.ok.Set(1)
}

// Describe implements prometheus.Collector.
func (r *Reloads) Describe(ch chan<- *prometheus.Desc) {
	r.total.Describe(ch)
	r.ok.Describe(ch)
}

// Collect implements prometheus.Collector.
func (r *Reloads) Collect(ch chan<- prometheus.Metric) {
	r.total.Collect(ch)
	r.ok.Collect(ch)
}
