package metrics_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Issue 31, item 11: queue_size and queue_bytes carried model_name=""
// for flows that never queued. A flow whose requests start at once, or
// are refused at once, has no queue series; one that waited reads 0 once
// its queue empties, under the models it waited for.
func TestQueueGaugesOnlyForFlowsThatQueued(t *testing.T) {
	m := metrics.New(metrics.Options{})
	c, _ := hooked(t, m, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(1)})
	submit := func(id, model string) *flowcontrol.Admission {
		key := flowcontrol.FlowKey{ID: id}
		m.Enqueued(key) // as the binaries' classifiers do
		var adm *flowcontrol.Admission
		c.Submit(context.Background(), flowcontrol.Request{Key: key, ByteSize: 10,
			Tag: metrics.RequestLabels{ModelName: model, TargetModelName: model}},
			func(a *flowcontrol.Admission, _ error) { adm = a })
		return adm
	}

	fast := submit("fast", "llama") // starts at once: never queued
	require.NotNil(t, fast)
	require.Empty(t, counts(t, m, metrics.Prefix+"flow_control_queue_size"))
	require.Empty(t, counts(t, m, metrics.Prefix+"flow_control_queue_bytes"))

	require.Nil(t, submit("slow", "qwen")) // waits for fast's slot
	want := map[string]float64{"fairness_id=slow,model_name=qwen,priority=0,target_model_name=qwen": 1}
	require.Equal(t, want, counts(t, m, metrics.Prefix+"flow_control_queue_size"))

	fast.Done() // slow starts
	want["fairness_id=slow,model_name=qwen,priority=0,target_model_name=qwen"] = 0
	require.Equal(t, want, counts(t, m, metrics.Prefix+"flow_control_queue_size"))
	require.Equal(t, want, counts(t, m, metrics.Prefix+"flow_control_queue_bytes"))
}
