package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
)

// results collects what Submit delivers.
type results struct {
	mu   sync.Mutex
	adms []*flowcontrol.Admission
	errs []error
}

func (r *results) done(a *flowcontrol.Admission, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a != nil {
		r.adms = append(r.adms, a)
	} else {
		r.errs = append(r.errs, err)
	}
}

// hooked makes a controller of cfg that reports its outcomes and waits to
// m, and that m watches; it closes when the test ends. It returns cfg as
// the controller was made with it.
func hooked(t *testing.T, m *metrics.Metrics, cfg flowcontrol.Config) (*flowcontrol.FlowController, flowcontrol.Config) {
	t.Helper()
	cfg.Observer, cfg.Waiting = m.Observe, m.Waiting
	c, err := flowcontrol.New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	m.Watch(c, cfg)
	return c, cfg
}

// testController is a controller whose one in-flight slot is taken, with
// band 10 (3 requests, 1000 bytes) full and two requests waiting in band 0
// (cost capacity 100); the global capacities are 10 requests, 10,000 bytes
// and a cost of 1,000.
func testController(t *testing.T, m *metrics.Metrics, clock *clocktest.Clock) (*flowcontrol.FlowController, flowcontrol.Config, *results) {
	t.Helper()
	// Watched before the requests, so that Enqueued knows the bands.
	c, cfg := hooked(t, m, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 0, CostCapacity: capacity.Bounded(100)},
			{Priority: 10, RequestCapacity: capacity.Bounded(3), ByteCapacity: capacity.Bounded(1000)},
		},
		RequestCapacity: capacity.Bounded(10),
		ByteCapacity:    capacity.Bounded(10_000),
		CostCapacity:    capacity.Bounded(1000),
		NoDisplacement:  true,
		Gate:            gate.MaxInFlight(1),
		Clock:           clock,
	})
	r := &results{}
	submit := func(id string, prio int, size, cost int64) {
		m.Enqueued(flowcontrol.FlowKey{ID: id, Priority: prio}) // as a binary's classifier does
		c.Submit(context.Background(), flowcontrol.Request{
			Key: flowcontrol.FlowKey{ID: id, Priority: prio}, ByteSize: size, Cost: cost,
		}, r.done)
	}
	submit("tenant-a", 10, 100, 0) // dispatched at once
	submit("tenant-a", 10, 100, 0) // queued
	submit("tenant-b", 10, 100, 0)
	submit("tenant-b", 10, 100, 0)
	submit("tenant-c", 10, 100, 0) // band 10 full: rejected
	submit("tenant-c", 0, 0, 10)
	submit("tenant-c", 0, 0, 10)
	require.Len(t, r.adms, 1)
	require.Len(t, r.errs, 1)
	return c, cfg, r
}

// A scrape reads the watched controller's bands, global utilisation and
// in-flight count; the observer counts each outcome with its queue time.
func TestWatch(t *testing.T) {
	m := metrics.New(metrics.Options{QueueDurationBuckets: []float64{0.1, 1}})
	clock := clocktest.New(time.Unix(1_000_000, 0))
	c, cfg, r := testController(t, m, clock)
	m.Watch(c, cfg)

	const state = `
# HELP llm_d_epp_flow_control_capacity_utilization_bytes Bytes waiting in a band over its byte capacity; above 1 after the capacity shrank. Absent for an unbounded capacity.
# TYPE llm_d_epp_flow_control_capacity_utilization_bytes gauge
llm_d_epp_flow_control_capacity_utilization_bytes{priority="10"} 0.3
# HELP llm_d_epp_flow_control_capacity_utilization_cost Cost waiting in a band over its cost capacity; above 1 after the capacity shrank. Absent for an unbounded capacity.
# TYPE llm_d_epp_flow_control_capacity_utilization_cost gauge
llm_d_epp_flow_control_capacity_utilization_cost{priority="0"} 0.2
# HELP llm_d_epp_flow_control_capacity_utilization_requests Requests waiting in a band over its request capacity; above 1 after the capacity shrank. Absent for an unbounded capacity.
# TYPE llm_d_epp_flow_control_capacity_utilization_requests gauge
llm_d_epp_flow_control_capacity_utilization_requests{priority="10"} 1
# HELP llm_d_epp_flow_control_global_capacity_utilization_bytes Bytes waiting in all bands over the global byte capacity. Absent when it is unbounded.
# TYPE llm_d_epp_flow_control_global_capacity_utilization_bytes gauge
llm_d_epp_flow_control_global_capacity_utilization_bytes 0.03
# HELP llm_d_epp_flow_control_global_capacity_utilization_cost Cost waiting in all bands over the global cost capacity. Absent when it is unbounded.
# TYPE llm_d_epp_flow_control_global_capacity_utilization_cost gauge
llm_d_epp_flow_control_global_capacity_utilization_cost 0.023
# HELP llm_d_epp_flow_control_global_capacity_utilization_requests Requests waiting in all bands over the global request capacity. Absent when it is unbounded.
# TYPE llm_d_epp_flow_control_global_capacity_utilization_requests gauge
llm_d_epp_flow_control_global_capacity_utilization_requests 0.5
# HELP llm_d_epp_flow_control_queue_bytes Bytes of the requests of a flow waiting in a priority band.
# TYPE llm_d_epp_flow_control_queue_bytes gauge
llm_d_epp_flow_control_queue_bytes{fairness_id="tenant-a",model_name="",priority="10",target_model_name=""} 100
llm_d_epp_flow_control_queue_bytes{fairness_id="tenant-b",model_name="",priority="10",target_model_name=""} 200
llm_d_epp_flow_control_queue_bytes{fairness_id="tenant-c",model_name="",priority="0",target_model_name=""} 0
# HELP llm_d_epp_flow_control_queue_cost Summed cost (estimated tokens) of the requests waiting in a priority band.
# TYPE llm_d_epp_flow_control_queue_cost gauge
llm_d_epp_flow_control_queue_cost{priority="0"} 20
llm_d_epp_flow_control_queue_cost{priority="10"} 3
# HELP llm_d_epp_flow_control_queue_size Requests of a flow waiting in a priority band.
# TYPE llm_d_epp_flow_control_queue_size gauge
llm_d_epp_flow_control_queue_size{fairness_id="tenant-a",model_name="",priority="10",target_model_name=""} 1
llm_d_epp_flow_control_queue_size{fairness_id="tenant-b",model_name="",priority="10",target_model_name=""} 2
llm_d_epp_flow_control_queue_size{fairness_id="tenant-c",model_name="",priority="0",target_model_name=""} 2
# HELP llm_d_epp_flow_control_requests_in_flight Requests dispatched by flow control and not yet done.
# TYPE llm_d_epp_flow_control_requests_in_flight gauge
llm_d_epp_flow_control_requests_in_flight 1
`
	gauges := []string{
		"flow_control_capacity_utilization_bytes", "flow_control_capacity_utilization_cost",
		"flow_control_capacity_utilization_requests", "flow_control_global_capacity_utilization_requests",
		"flow_control_global_capacity_utilization_bytes", "flow_control_global_capacity_utilization_cost",
		"flow_control_queue_bytes", "flow_control_queue_cost", "flow_control_queue_size",
		"flow_control_requests_in_flight",
	}
	for i, g := range gauges {
		gauges[i] = metrics.Prefix + g
	}
	// tenant-c's request for band 10 was refused: it never waited there,
	// so it has no series in band 10.
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(state), gauges...))
	// Requests waited, so the gate refused some offers; the counter reads
	// the controller's count.
	require.NotZero(t, c.GateRefusals())
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(fmt.Sprintf(`
# HELP llm_d_epp_flow_control_gate_refusals_total Times the gate refused the request flow control offered it; a waiting request is offered again at each event.
# TYPE llm_d_epp_flow_control_gate_refusals_total counter
llm_d_epp_flow_control_gate_refusals_total %d
`, c.GateRefusals())), metrics.Prefix+"flow_control_gate_refusals_total"))

	// The in-flight request ends 250ms later: the next in band 10 starts,
	// having waited 250ms. Close drops the other four, queued as long.
	clock.Advance(250 * time.Millisecond)
	r.adms[0].Done()
	require.Len(t, r.adms, 2)
	c.Close()
	r.adms[1].Done()
	require.Len(t, r.errs, 5)

	wantCounts(t, m, requestsTotal, map[string]float64{
		"outcome=Dispatched,priority=10":       2,
		"outcome=RejectedCapacity,priority=10": 1,
		"outcome=EvictedOther,priority=10":     2,
		"outcome=EvictedOther,priority=0":      2,
	})
	const waited = `
# HELP llm_d_epp_flow_control_request_queue_duration_seconds Time requests spent in flow control, from enqueue to their outcome; 0 for a request dispatched or refused at once.
# TYPE llm_d_epp_flow_control_request_queue_duration_seconds histogram
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="0.1"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="1"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-a",model_name="",outcome="Dispatched",priority="10",target_model_name="",le="+Inf"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_sum{fairness_id="tenant-a",model_name="",outcome="Dispatched",priority="10",target_model_name=""} 0.25
llm_d_epp_flow_control_request_queue_duration_seconds_count{fairness_id="tenant-a",model_name="",outcome="Dispatched",priority="10",target_model_name=""} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-b",model_name="",outcome="EvictedOther",priority="10",target_model_name="",le="0.1"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-b",model_name="",outcome="EvictedOther",priority="10",target_model_name="",le="1"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-b",model_name="",outcome="EvictedOther",priority="10",target_model_name="",le="+Inf"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_sum{fairness_id="tenant-b",model_name="",outcome="EvictedOther",priority="10",target_model_name=""} 0.5
llm_d_epp_flow_control_request_queue_duration_seconds_count{fairness_id="tenant-b",model_name="",outcome="EvictedOther",priority="10",target_model_name=""} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-c",model_name="",outcome="EvictedOther",priority="0",target_model_name="",le="0.1"} 0
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-c",model_name="",outcome="EvictedOther",priority="0",target_model_name="",le="1"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-c",model_name="",outcome="EvictedOther",priority="0",target_model_name="",le="+Inf"} 2
llm_d_epp_flow_control_request_queue_duration_seconds_sum{fairness_id="tenant-c",model_name="",outcome="EvictedOther",priority="0",target_model_name=""} 0.5
llm_d_epp_flow_control_request_queue_duration_seconds_count{fairness_id="tenant-c",model_name="",outcome="EvictedOther",priority="0",target_model_name=""} 2
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-c",model_name="",outcome="RejectedCapacity",priority="10",target_model_name="",le="0.1"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-c",model_name="",outcome="RejectedCapacity",priority="10",target_model_name="",le="1"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_bucket{fairness_id="tenant-c",model_name="",outcome="RejectedCapacity",priority="10",target_model_name="",le="+Inf"} 1
llm_d_epp_flow_control_request_queue_duration_seconds_sum{fairness_id="tenant-c",model_name="",outcome="RejectedCapacity",priority="10",target_model_name=""} 0
llm_d_epp_flow_control_request_queue_duration_seconds_count{fairness_id="tenant-c",model_name="",outcome="RejectedCapacity",priority="10",target_model_name=""} 1
`
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(waited), queueDuration))
	// With nothing left, the gauges read 0.
	require.Equal(t, 0.0, gaugeValue(t, m, "flow_control_queue_size", "fairness_id=tenant-b,model_name=,priority=10,target_model_name="))
	require.Equal(t, 0.0, gaugeValue(t, m, "flow_control_requests_in_flight", ""))
}

// gaugeValue returns the value of the series of gauge name with labels
// (as labelString writes them), failing if there is none.
func gaugeValue(t *testing.T, m *metrics.Metrics, name, labels string) float64 {
	t.Helper()
	got := counts(t, m, metrics.Prefix+name)
	v, ok := got[labels]
	require.True(t, ok, "no series %s{%s} in %v", name, labels, got)
	return v
}

// Bands provisioned later are read once WatchBand names them; a band that
// cannot be read is logged and left out; a capacity below what waits reads
// above 1, and a capacity of 0 reads 1 while requests wait in it.
func TestWatchBand(t *testing.T) {
	var logs bytes.Buffer
	m := metrics.New(metrics.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cfg := flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(4)}},
		Gate:  gate.MaxInFlight(0), // everything waits
	}
	c, err := flowcontrol.New(cfg)
	require.NoError(t, err)
	defer c.Close()
	m.Watch(c, cfg)
	// No Enqueued: a flow not seen yet is counted under "other".
	submit := func(prio int) {
		c.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "f", Priority: prio}},
			func(a *flowcontrol.Admission, _ error) { require.Nil(t, a) })
	}
	submit(0)
	submit(0)
	require.Equal(t, 0.5, gaugeValue(t, m, "flow_control_capacity_utilization_requests", "priority=0"))

	require.NoError(t, c.ProvisionBand(flowcontrol.BandConfig{Priority: 5, RequestCapacity: capacity.Bounded(2)}))
	submit(5)
	require.NotContains(t, counts(t, m, metrics.Prefix+"flow_control_queue_size"), "fairness_id=other,model_name=,priority=5,target_model_name=")
	m.WatchBand(5)
	m.WatchBand(5)
	require.Equal(t, map[string]float64{"fairness_id=other,model_name=,priority=0,target_model_name=": 2, "fairness_id=other,model_name=,priority=5,target_model_name=": 1},
		counts(t, m, metrics.Prefix+"flow_control_queue_size"))

	require.NoError(t, c.ProvisionBand(flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(1)}))
	require.NoError(t, c.ProvisionBand(flowcontrol.BandConfig{Priority: 5, RequestCapacity: capacity.Bounded(0)}))
	require.Equal(t, map[string]float64{"priority=0": 2, "priority=5": 1},
		counts(t, m, metrics.Prefix+"flow_control_capacity_utilization_requests"))

	require.Empty(t, logs.String())
	m.WatchBand(7) // never provisioned
	require.Equal(t, map[string]float64{"fairness_id=other,model_name=,priority=0,target_model_name=": 2, "fairness_id=other,model_name=,priority=5,target_model_name=": 1},
		counts(t, m, metrics.Prefix+"flow_control_queue_size"))
	require.Contains(t, logs.String(), "band left out of the scrape")
	require.Contains(t, logs.String(), "priority=7")

	// WatchBand before Watch does nothing.
	fresh := metrics.New(metrics.Options{})
	fresh.WatchBand(0)
	require.Equal(t, 0, testutil.CollectAndCount(fresh))
}

// The registered funcs are read at each scrape; one that panics is left
// out and logged, and the others are still sent.
func TestFuncs(t *testing.T) {
	var logs bytes.Buffer
	m := metrics.New(metrics.Options{InferencePool: "pool-a", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	saturation := 0.5
	m.PoolSaturation(func() float64 { return saturation })
	m.GateLimit(func() float64 { return 64 })
	m.StaleEndpoints("utilization-detector", func() int { return 2 })
	const want = `
# HELP llm_d_epp_flow_control_gate_limit Requests the gate lets be in flight at once now.
# TYPE llm_d_epp_flow_control_gate_limit gauge
llm_d_epp_flow_control_gate_limit{inference_pool="pool-a"} 64
# HELP llm_d_epp_flow_control_pool_saturation Saturation of the model-server pool that gates dispatch; 1 is the gating set point, above 1 oversubscribed.
# TYPE llm_d_epp_flow_control_pool_saturation gauge
llm_d_epp_flow_control_pool_saturation{inference_pool="pool-a",stage="effective"} 1.25
# HELP llm_d_epp_flow_control_stale_endpoints Endpoints whose metrics are missing or stale, which the saturation gate counts as saturated.
# TYPE llm_d_epp_flow_control_stale_endpoints gauge
llm_d_epp_flow_control_stale_endpoints{detector="utilization-detector",inference_pool="pool-a"} 2
`
	saturation = 1.25
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(want)))

	m.PoolSaturation(func() float64 { panic("no endpoints") })
	wantCounts(t, m, metrics.Prefix+"flow_control_pool_saturation", map[string]float64{})
	require.Equal(t, 64.0, gaugeValue(t, m, "flow_control_gate_limit", "inference_pool=pool-a"))
	require.Contains(t, logs.String(), "panicked")
	require.Contains(t, logs.String(), "llm_d_epp_flow_control_pool_saturation")
	require.Contains(t, logs.String(), "no endpoints")

	m.PoolSaturation(nil)
	m.GateLimit(nil)
	m.StaleEndpoints("utilization-detector", nil)
	require.Equal(t, 0, testutil.CollectAndCount(m))
}

// PollError counts by source type, under llm-d-router's data-layer name.
func TestPollError(t *testing.T) {
	m := metrics.New(metrics.Options{InferencePool: "pool-a"})
	m.PollError(metrics.SourceMetrics)
	m.PollError(metrics.SourceMetrics)
	const want = `
# HELP llm_d_epp_datalayer_poll_errors_total Failed polls of a model-server data source, by source type.
# TYPE llm_d_epp_datalayer_poll_errors_total counter
llm_d_epp_datalayer_poll_errors_total{source_type="metrics-data-source"} 2
`
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(want)))
}
