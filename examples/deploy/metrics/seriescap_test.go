package metrics_test

// A client chooses several labels of one series at once (the fairness id
// header, the body's model, a priority under NeverPromote): capping each
// label's values left their product unbounded, and 300 × 300 pairs made
// 90,000 series (issue 31, item 1). Each family whose labels a client
// chooses holds at most MaxSeries series; new label sets past it fold
// into the overflow series.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// gathered returns the families of m by name, read with the registry's
// Gather: what a scrape holds, whatever the heap.
func gathered(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	families, err := reg.Gather()
	require.NoError(t, err)
	by := map[string]*dto.MetricFamily{}
	for _, f := range families {
		by[f.GetName()] = f
	}
	return by
}

// histogramCount returns the observations of every series of a histogram
// family, summed.
func histogramCount(f *dto.MetricFamily) uint64 {
	var n uint64
	for _, s := range f.GetMetric() {
		n += s.GetHistogram().GetSampleCount()
	}
	return n
}

// 300 fairness ids × 300 models, each pair refused once, as the review
// drove them: each family stays within its series cap, no request is
// lost, and the pairs past the cap are counted under the overflow series.
func TestClientCannotMultiplyLabelCaps(t *testing.T) {
	m := metrics.New(metrics.Options{})
	const n = 300
	for i := range n {
		for j := range n {
			k := flowcontrol.FlowKey{ID: fmt.Sprintf("tenant-%d", i)}
			model := fmt.Sprintf("model-%d", j)
			m.Observe(flowcontrol.Event{Requested: k, Effective: k, Outcome: flowcontrol.OutcomeRejectedSaturated,
				Tag: metrics.RequestLabels{ModelName: model, TargetModelName: model}})
		}
	}
	families := gathered(t, m)
	for _, name := range []string{queueDuration, enqueueDuration, requestsTotal} {
		f := families[name]
		require.NotNil(t, f, name)
		require.LessOrEqual(t, len(f.GetMetric()), metrics.DefaultMaxSeries, "series of %s", name)
	}
	require.Equal(t, uint64(n*n), histogramCount(families[queueDuration]), "every request observed once")
	require.Equal(t, uint64(n*n), histogramCount(families[enqueueDuration]), "every enqueue observed once")
	q := counts(t, m, queueDuration)
	require.Greater(t, len(q), metrics.DefaultMaxSeries-16, "the pairs within the cap keep their series")
	require.Positive(t, q["fairness_id=other,model_name=other,outcome=RejectedCapacity,priority=other,target_model_name=other"],
		"the pairs past the cap are counted under the overflow series")
	require.Equal(t, float64(n*n), counts(t, m, requestsTotal)["outcome=RejectedCapacity,priority=0"],
		"the requests counter keeps its band")
}

// The class property over small caps: whatever fairness ids, models and
// priorities arrive, each family a client chooses labels of holds at most
// MaxSeries series, in both outcome sets, and no event is lost.
func TestSeriesCapHolds(t *testing.T) {
	// The outcomes that end a request, each observed in both histograms
	// (a revocation comes after its request's dispatch).
	ends := []flowcontrol.Outcome{flowcontrol.OutcomeDispatched, flowcontrol.OutcomeRejectedSaturated,
		flowcontrol.OutcomeRejectedTTLExpired, flowcontrol.OutcomeRejectedContextCancelled,
		flowcontrol.OutcomeRejectedShuttingDown, flowcontrol.OutcomeRejectedNoEndpoints}
	for _, outcomes := range []metrics.OutcomeLabels{metrics.LLMDOutcomes, metrics.DroppedReasons} {
		for _, limit := range []int{16, 20, 37, 100} {
			m := metrics.New(metrics.Options{MaxSeries: limit, Outcomes: outcomes, QueueDurationBuckets: []float64{1}})
			events := 0
			for i := range 12 {
				for j := range 12 {
					k := flowcontrol.FlowKey{ID: fmt.Sprintf("f%d", i), Priority: j % 5}
					model := fmt.Sprintf("m%d", j)
					ev := flowcontrol.Event{Requested: k, Effective: k, Outcome: ends[j%len(ends)],
						Tag: metrics.RequestLabels{ModelName: model, TargetModelName: model}}
					m.Observe(ev)
					ev.Queued = true
					m.Waiting(ev)
					m.Observe(ev)
					events += 2
				}
			}
			families := gathered(t, m)
			for _, name := range []string{queueDuration, enqueueDuration} {
				require.LessOrEqual(t, len(families[name].GetMetric()), limit, "%s, MaxSeries %d, outcomes %d", name, limit, outcomes)
			}
			require.Equal(t, uint64(events), histogramCount(families[queueDuration]), "MaxSeries %d", limit)
			require.Equal(t, uint64(events), histogramCount(families[enqueueDuration]), "MaxSeries %d", limit)
		}
	}
}

// The queue gauges of a watched controller: 20 flows × 20 models waiting
// hold at most MaxSeries series of flows and models, plus the band's two
// under fairness_id "other", and the band's total is kept.
func TestQueueGaugesBounded(t *testing.T) {
	const limit = 30
	m := metrics.New(metrics.Options{MaxSeries: limit})
	c, _ := hooked(t, m, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(0)})
	const n = 20
	for i := range n {
		for j := range n {
			key := flowcontrol.FlowKey{ID: fmt.Sprintf("f%d", i)}
			m.Enqueued(key)
			model := fmt.Sprintf("m%d", j)
			c.Submit(context.Background(), flowcontrol.Request{Key: key, ByteSize: 1,
				Tag: metrics.RequestLabels{ModelName: model, TargetModelName: model}}, func(*flowcontrol.Admission, error) {})
		}
	}
	for _, name := range []string{"flow_control_queue_size", "flow_control_queue_bytes"} {
		got := counts(t, m, metrics.Prefix+name)
		own, total := 0, 0.0
		for series, v := range got {
			total += v
			if !strings.HasPrefix(series, "fairness_id=other,") {
				own++
			}
		}
		require.LessOrEqual(t, own, limit, "%s: series of flows and models", name)
		require.LessOrEqual(t, len(got), limit+2, name)
		require.Equal(t, float64(n*n), total, "%s: the band's total", name)
		require.Positive(t, got["fairness_id=other,model_name=other,priority=0,target_model_name=other"], "%s: the folded models", name)
	}
}
