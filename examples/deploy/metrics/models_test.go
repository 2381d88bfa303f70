package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

const enqueueDuration = metrics.Prefix + "flow_control_request_enqueue_duration_seconds"

// modelController is a controller whose one slot is taken, hooked to m,
// watched by it; submit queues a request of flow id for model.
func modelController(t *testing.T, m *metrics.Metrics, bands ...flowcontrol.BandConfig) (*flowcontrol.FlowController, func(id, model string, size int64) *flowcontrol.Admission) {
	t.Helper()
	c, _ := hooked(t, m, flowcontrol.Config{Bands: bands, Gate: gate.MaxInFlight(1)})
	submit := func(id, model string, size int64) *flowcontrol.Admission {
		key := flowcontrol.FlowKey{ID: id}
		m.Enqueued(key)
		var adm *flowcontrol.Admission
		c.Submit(context.Background(), flowcontrol.Request{
			Key: key, ByteSize: size,
			Tag: metrics.RequestLabels{ModelName: model, TargetModelName: model},
		}, func(a *flowcontrol.Admission, _ error) { adm = a })
		return adm
	}
	return c, submit
}

// The queue-duration histogram and the queue gauges carry the model
// labels of each request's RequestLabels; a flow's queue is split by
// model, and what waits without labels has empty ones.
func TestModelLabels(t *testing.T) {
	m := metrics.New(metrics.Options{})
	c, submit := modelController(t, m, flowcontrol.BandConfig{Priority: 0})
	running := submit("a", "llama", 1) // dispatched at once
	require.NotNil(t, running)
	submit("a", "llama", 10)
	submit("a", "qwen", 20)
	submit("a", "qwen", 30)
	c.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "a"}, ByteSize: 5},
		func(*flowcontrol.Admission, error) {}) // no labels

	wantCounts(t, m, metrics.Prefix+"flow_control_queue_size", map[string]float64{
		"fairness_id=a,model_name=llama,priority=0,target_model_name=llama": 1,
		"fairness_id=a,model_name=qwen,priority=0,target_model_name=qwen":   2,
		"fairness_id=a,model_name=,priority=0,target_model_name=":           1,
	})
	wantCounts(t, m, metrics.Prefix+"flow_control_queue_bytes", map[string]float64{
		"fairness_id=a,model_name=llama,priority=0,target_model_name=llama": 10,
		"fairness_id=a,model_name=qwen,priority=0,target_model_name=qwen":   50,
		"fairness_id=a,model_name=,priority=0,target_model_name=":           5,
	})
	wantCounts(t, m, queueDuration, map[string]float64{
		"fairness_id=a,model_name=llama,outcome=Dispatched,priority=0,target_model_name=llama": 1,
	})

	// As each leaves, its model's series reads 0, as llm-d-router's do;
	// once the queue is empty each series the flow had reads 0, under its
	// own model labels.
	running.Done() // the llama request starts
	wantCounts(t, m, metrics.Prefix+"flow_control_queue_size", map[string]float64{
		"fairness_id=a,model_name=llama,priority=0,target_model_name=llama": 0,
		"fairness_id=a,model_name=qwen,priority=0,target_model_name=qwen":   2,
		"fairness_id=a,model_name=,priority=0,target_model_name=":           1,
	})
	c.Close()
	wantCounts(t, m, metrics.Prefix+"flow_control_queue_size", map[string]float64{
		"fairness_id=a,model_name=llama,priority=0,target_model_name=llama": 0,
		"fairness_id=a,model_name=qwen,priority=0,target_model_name=qwen":   0,
		"fairness_id=a,model_name=,priority=0,target_model_name=":           0,
	})
	q := counts(t, m, queueDuration)
	require.Equal(t, 2.0, q["fairness_id=a,model_name=llama,outcome=Dispatched,priority=0,target_model_name=llama"])
	require.Equal(t, 2.0, q["fairness_id=a,model_name=qwen,outcome=EvictedOther,priority=0,target_model_name=qwen"])
	require.Equal(t, 1.0, q["fairness_id=a,model_name=,outcome=EvictedOther,priority=0,target_model_name="])
}

// Model names are client-supplied: past MaxModelNames distinct names, or
// longer than MaxLabelLength, or not UTF-8, a name is counted as "other",
// so the series stay bounded whatever bodies say.
func TestModelLabelsBounded(t *testing.T) {
	m := metrics.New(metrics.Options{MaxModelNames: 2})
	observe := func(model string) {
		k := flowcontrol.FlowKey{ID: "f"}
		m.Observe(flowcontrol.Event{Requested: k, Effective: k, Outcome: flowcontrol.OutcomeDispatched,
			Tag: metrics.RequestLabels{ModelName: model, TargetModelName: model}})
	}
	observe(strings.Repeat("m", metrics.DefaultMaxLabelLength+1)) // too long: takes no place
	observe("bad\xff")                                            // not UTF-8: takes no place
	observe("a")
	observe("b")
	observe("c") // the third name: past the cap
	observe("a")
	for i := range 100 {
		observe("flood-" + strings.Repeat("x", i))
	}
	wantCounts(t, m, queueDuration, map[string]float64{
		"fairness_id=f,model_name=a,outcome=Dispatched,priority=0,target_model_name=a":         2,
		"fairness_id=f,model_name=b,outcome=Dispatched,priority=0,target_model_name=b":         1,
		"fairness_id=f,model_name=other,outcome=Dispatched,priority=0,target_model_name=other": 103,
	})

	none := metrics.New(metrics.Options{MaxModelNames: -1})
	k := flowcontrol.FlowKey{ID: "f"}
	none.Observe(flowcontrol.Event{Requested: k, Effective: k, Tag: metrics.RequestLabels{ModelName: "a"}})
	wantCounts(t, none, queueDuration, map[string]float64{
		"fairness_id=f,model_name=other,outcome=Dispatched,priority=0,target_model_name=": 1,
	})
}

// flow_control_request_enqueue_duration_seconds counts each request once:
// with the outcome its enqueue reached when it reached one, or
// NotYetFinalized when the request was left waiting — not again at that
// request's outcome.
func TestEnqueueDurationOncePerRequest(t *testing.T) {
	m := metrics.New(metrics.Options{})
	c, submit := modelController(t, m, flowcontrol.BandConfig{Priority: 0, RequestCapacity: capacity.Bounded(1)})
	running := submit("a", "llama", 0) // dispatched at once
	submit("a", "llama", 0)            // waits
	submit("b", "", 0)                 // the band is full: refused at once
	wantCounts(t, m, enqueueDuration, map[string]float64{
		"fairness_id=a,outcome=Dispatched,priority=0":       1,
		"fairness_id=a,outcome=NotYetFinalized,priority=0":  1,
		"fairness_id=b,outcome=RejectedCapacity,priority=0": 1,
	})

	running.Done() // the waiting one is dispatched
	c.Close()
	wantCounts(t, m, enqueueDuration, map[string]float64{
		"fairness_id=a,outcome=Dispatched,priority=0":       1,
		"fairness_id=a,outcome=NotYetFinalized,priority=0":  1,
		"fairness_id=b,outcome=RejectedCapacity,priority=0": 1,
	}, "an outcome after a wait adds no enqueue")
	total := 0.0
	for _, v := range counts(t, m, requestsTotal) {
		total += v
	}
	require.Equal(t, 3.0, total, "three requests, three enqueues")

	dropped := metrics.New(metrics.Options{Outcomes: metrics.DroppedReasons})
	k := flowcontrol.FlowKey{ID: "a"}
	dropped.Waiting(flowcontrol.Event{Requested: k, Effective: k, Queued: true})
	wantCounts(t, dropped, enqueueDuration, map[string]float64{"fairness_id=a,outcome=queued,priority=0": 1})
}
