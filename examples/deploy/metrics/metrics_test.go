package metrics_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	queueDuration = metrics.Prefix + "flow_control_request_queue_duration_seconds"
	requestsTotal = metrics.Prefix + "flow_control_requests_total"
)

func event(id string, priority int, o flowcontrol.Outcome, queued time.Duration) flowcontrol.Event {
	k := flowcontrol.FlowKey{ID: id, Priority: priority}
	return flowcontrol.Event{Requested: k, Effective: k, Outcome: o, QueueTime: queued}
}

// The histogram and the counter under llm-d-router's names, label names
// and buckets, with the pool as a constant label.
func TestObserveExposition(t *testing.T) {
	m := metrics.New(metrics.Options{InferencePool: "pool-a"})
	m.Observe(event("a", 10, flowcontrol.OutcomeDispatched, 0))
	m.Observe(event("a", 10, flowcontrol.OutcomeDispatched, 30*time.Millisecond))
	m.Observe(event("b", 0, flowcontrol.OutcomeRejectedSaturated, 0))
	m.Observe(event("b", 0, flowcontrol.OutcomeRejectedTTLExpired, 2*time.Second))

	const want = `
# HELP llm_d_epp_flow_control_request_enqueue_duration_seconds Time the controller took over a request's enqueue (capacity checks, the gate's first answer, the insert), by the outcome reached within it, or NotYetFinalized for a request left waiting.
# TYPE llm_d_epp_flow_control_request_enqueue_duration_seconds histogram
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="0.0001"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="0.0002"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="0.0005"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="0.001"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="0.002"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="0.005"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="0.01"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="0.02"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="0.05"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="0.1"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10",le="+Inf"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_sum{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10"} 0
llm_d_epp_flow_control_request_enqueue_duration_seconds_count{fairness_id="a",inference_pool="pool-a",outcome="Dispatched",priority="10"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="0.0001"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="0.0002"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="0.0005"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="0.001"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="0.002"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="0.005"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="0.01"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="0.02"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="0.05"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="0.1"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0",le="+Inf"} 1
llm_d_epp_flow_control_request_enqueue_duration_seconds_sum{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0"} 0
llm_d_epp_flow_control_request_enqueue_duration_seconds_count{fairness_id="b",inference_pool="pool-a",outcome="RejectedCapacity",priority="0"} 1
# HELP llm_d_epp_flow_control_request_queue_duration_seconds Time requests spent in flow control, from enqueue to their outcome; 0 for a request dispatched or refused at once.
# TYPE llm_d_epp_flow_control_request_queue_duration_seconds histogram
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.0001"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.0005"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.001"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.005"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.01"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.025"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.05"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.1"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.25"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.5"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="1"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="2.5"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="5"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="10"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="30"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="60"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="+Inf"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_sum{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name=""} 0.03
llm_d_epp_flow_control_request_queue_duration_seconds_count{fairness_id="a",inference_pool="pool-a",model_name="",outcome="Dispatched",priority="10",target_model_name=""} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="0.0001"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="0.0005"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="0.001"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="0.005"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="0.01"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="0.025"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="0.05"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="0.1"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="0.25"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="0.5"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="1"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="2.5"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="5"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="10"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="30"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="60"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name="",le="+Inf"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_sum{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name=""} 2
llm_d_epp_flow_control_request_queue_duration_seconds_count{fairness_id="b",inference_pool="pool-a",model_name="",outcome="EvictedTTL",priority="0",target_model_name=""} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="0.0001"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="0.0005"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="0.001"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="0.005"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="0.01"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="0.025"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="0.05"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="0.1"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="0.25"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="0.5"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="1"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="2.5"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="5"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="10"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="30"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="60"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name="",le="+Inf"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_sum{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name=""} 0
llm_d_epp_flow_control_request_queue_duration_seconds_count{fairness_id="b",inference_pool="pool-a",model_name="",outcome="RejectedCapacity",priority="0",target_model_name=""} 1
# HELP llm_d_epp_flow_control_requests_total Requests that reached an outcome in flow control, one count each, by outcome and the band that handled them.
# TYPE llm_d_epp_flow_control_requests_total counter
llm_d_epp_flow_control_requests_total{inference_pool="pool-a",outcome="Dispatched",priority="10"} 2
llm_d_epp_flow_control_requests_total{inference_pool="pool-a",outcome="EvictedTTL",priority="0"} 1
llm_d_epp_flow_control_requests_total{inference_pool="pool-a",outcome="RejectedCapacity",priority="0"} 1
`
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(want)))
	// Nothing else is exported without Watch or a registered func: the
	// three queue-duration series, three counters, and the enqueue
	// durations of the two requests that did not queue.
	require.Equal(t, 8, testutil.CollectAndCount(m))
}

// wantCounts fails the test unless counts(t, c, name) is want.
func wantCounts(t *testing.T, c prometheus.Collector, name string, want map[string]float64, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want, counts(t, c, name), msgAndArgs...)
}

// counts returns the value of every series of the counter or histogram
// family name (a histogram's sample count), keyed by its labels in the
// form a=x,b=y.
func counts(t *testing.T, c prometheus.Collector, name string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			got[labelString(s)] = value(s)
		}
	}
	return got
}

func labelString(s *dto.Metric) string {
	var parts []string
	for _, l := range s.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	}
	return 0
}

// Every outcome, queued or not, gets the label llm-d-router gives it; an
// outcome unknown to the mapping is Rejected/EvictedOther; DroppedReasons
// gives the outcome's own name. The outcomes of a request revoked after
// its dispatch, which llm-d-router's outcome set has no value for, add no
// llm-d series: the request was counted Dispatched.
func TestOutcomeLabels(t *testing.T) {
	afterDispatch := map[string]bool{"evicted": true, "evicted-priority": true}
	llmd := map[string][2]string{ // reason: never queued, queued
		"dispatched":                 {"Dispatched", "Dispatched"},
		"rejected-saturated":         {"RejectedCapacity", "RejectedCapacity"},
		"rejected-no-endpoints":      {"RejectedNoEndpoints", "EvictedNoEndpoints"},
		"rejected-ttl-expired":       {"RejectedOther", "EvictedTTL"},
		"rejected-context-cancelled": {"RejectedOther", "EvictedContextCancelled"},
		"rejected-shutting-down":     {"RejectedOther", "EvictedOther"},
	}
	// llm-d-router's QueueOutcome names (pkg/epp/flowcontrol/types,
	// outcomes.go), but its internal NotYetFinalized: no other value may
	// appear.
	llmdSet := map[string]bool{
		"Dispatched": true, "RejectedCapacity": true, "RejectedNoEndpoints": true, "RejectedOther": true,
		"EvictedTTL": true, "EvictedNoEndpoints": true, "EvictedContextCancelled": true, "EvictedOther": true,
	}
	for reason, labels := range llmd {
		for _, l := range labels {
			require.True(t, llmdSet[l], "%s is labelled %q, not one of llm-d's outcomes", reason, l)
		}
	}
	seen := map[string]bool{}
	for o := flowcontrol.Outcome(0); o < 32; o++ {
		reason := o.String()
		if afterDispatch[reason] {
			seen[reason] = true
			m := metrics.New(metrics.Options{})
			m.Observe(event("f", 3, o, 0))
			require.Empty(t, counts(t, m, requestsTotal), "%s", reason)
			require.Empty(t, counts(t, m, queueDuration), "%s", reason)
			m = metrics.New(metrics.Options{Outcomes: metrics.DroppedReasons})
			m.Observe(event("f", 3, o, 0))
			wantCounts(t, m, requestsTotal, map[string]float64{"outcome=" + reason + ",priority=3": 1})
			require.Empty(t, counts(t, m, queueDuration), "%s", reason)
			continue
		}
		want, known := llmd[reason]
		if !known {
			require.True(t, strings.HasPrefix(reason, "Outcome("), "outcome %d (%s) is missing from the table", int(o), reason)
			want = [2]string{"RejectedOther", "EvictedOther"}
		}
		seen[reason] = known
		for i, queued := range []time.Duration{0, time.Second} {
			m := metrics.New(metrics.Options{})
			m.Observe(event("f", 3, o, queued))
			wantCounts(t, m, requestsTotal, map[string]float64{"outcome=" + want[i] + ",priority=3": 1}, "%s queued %v", reason, queued)

			m = metrics.New(metrics.Options{Outcomes: metrics.DroppedReasons})
			m.Observe(event("f", 3, o, queued))
			wantCounts(t, m, requestsTotal, map[string]float64{"outcome=" + reason + ",priority=3": 1})
		}
	}
	for _, reason := range []string{"dispatched", "rejected-saturated", "rejected-ttl-expired",
		"rejected-context-cancelled", "rejected-shutting-down", "rejected-no-endpoints", "evicted", "evicted-priority"} {
		require.True(t, seen[reason], "flowcontrol has no outcome %q", reason)
	}
}

// The first MaxFairnessIDs ids keep their label for good; the rest, and
// "other" itself, share "other"; the empty id takes no place under the cap.
func TestFairnessIDCap(t *testing.T) {
	m := metrics.New(metrics.Options{MaxFairnessIDs: 3, QueueDurationBuckets: []float64{1}})
	m.Observe(event("", 0, flowcontrol.OutcomeDispatched, 0))
	m.Observe(event("other", 0, flowcontrol.OutcomeDispatched, 0))
	for i := range 10 {
		m.Observe(event(fmt.Sprintf("f%d", i), 0, flowcontrol.OutcomeDispatched, 0))
	}
	m.Observe(event("f1", 0, flowcontrol.OutcomeDispatched, 0)) // admitted before the cap was reached
	m.Observe(event("f7", 0, flowcontrol.OutcomeDispatched, 0)) // past the cap

	wantCounts(t, m, queueDuration, map[string]float64{
		"fairness_id=,model_name=,outcome=Dispatched,priority=0,target_model_name=":      1,
		"fairness_id=f0,model_name=,outcome=Dispatched,priority=0,target_model_name=":    1,
		"fairness_id=f1,model_name=,outcome=Dispatched,priority=0,target_model_name=":    2,
		"fairness_id=f2,model_name=,outcome=Dispatched,priority=0,target_model_name=":    1,
		"fairness_id=other,model_name=,outcome=Dispatched,priority=0,target_model_name=": 1 + 7 + 1,
	})

	none := metrics.New(metrics.Options{MaxFairnessIDs: -1})
	none.Observe(event("a", 0, flowcontrol.OutcomeDispatched, 0))
	none.Observe(event("b", 0, flowcontrol.OutcomeDispatched, 0))
	wantCounts(t, none, queueDuration, map[string]float64{"fairness_id=other,model_name=,outcome=Dispatched,priority=0,target_model_name=": 2})

	def := metrics.New(metrics.Options{})
	for i := range metrics.DefaultMaxFairnessIDs + 5 {
		def.Observe(event(fmt.Sprintf("f%d", i), 0, flowcontrol.OutcomeDispatched, 0))
	}
	got := counts(t, def, queueDuration)
	require.Len(t, got, metrics.DefaultMaxFairnessIDs+1)
	require.Equal(t, 5.0, got["fairness_id=other,model_name=,outcome=Dispatched,priority=0,target_model_name="])
}

// Goroutines racing on new ids admit exactly the cap, and lose no count.
func TestFairnessIDCapConcurrent(t *testing.T) {
	const goroutines, ids, limit = 8, 300, 100
	m := metrics.New(metrics.Options{MaxFairnessIDs: limit})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range ids {
				m.Observe(event(fmt.Sprintf("f%d", (i*7+g)%ids), 0, flowcontrol.OutcomeDispatched, 0))
			}
		})
	}
	wg.Wait()
	got := counts(t, m, queueDuration)
	require.Len(t, got, limit+1)
	var total float64
	for _, n := range got {
		total += n
	}
	require.Equal(t, float64(goroutines*ids), total)
	wantCounts(t, m, requestsTotal, map[string]float64{"outcome=Dispatched,priority=0": goroutines * ids})
}

// Priority labels are bounded too: a NeverPromote rejection reports the
// priority the client asked for, whatever it is.
func TestPriorityCap(t *testing.T) {
	m := metrics.New(metrics.Options{})
	for p := range 300 {
		m.Observe(event("f", -p, flowcontrol.OutcomeRejectedSaturated, 0))
	}
	m.Observe(event("f", -5, flowcontrol.OutcomeRejectedSaturated, 0))
	got := counts(t, m, requestsTotal)
	require.Len(t, got, 257)
	require.Equal(t, 44.0, got["outcome=RejectedCapacity,priority=other"])
	require.Equal(t, 2.0, got["outcome=RejectedCapacity,priority=-5"])
	require.Equal(t, 1.0, got["outcome=RejectedCapacity,priority=-255"])
}

// Buckets that do not increase are refused at New, not at the first
// Observe of a new series.
func TestBadBuckets(t *testing.T) {
	require.PanicsWithValue(t, "metrics: QueueDurationBuckets [1 0.5] do not increase strictly", func() {
		metrics.New(metrics.Options{QueueDurationBuckets: []float64{1, 0.5}})
	})
}
