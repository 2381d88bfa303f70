package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// queue_size and queue_bytes are per flow, under the fairness_id cap: a
// flow past it, or one too long, is counted under "other" with what its
// band holds beyond the flows it names; a request for a band that is not
// provisioned is counted in the fallback band, where it waits.
func TestQueueGaugesPerFlow(t *testing.T) {
	m := metrics.New(metrics.Options{MaxFairnessIDs: 2})
	c, _ := hooked(t, m, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 10}},
		Gate:  gate.MaxInFlight(0), // everything waits
	})
	submit := func(id string, prio int, size int64) {
		key := flowcontrol.FlowKey{ID: id, Priority: prio}
		m.Enqueued(key)
		c.Submit(context.Background(), flowcontrol.Request{Key: key, ByteSize: size},
			func(a *flowcontrol.Admission, _ error) { require.Nil(t, a) })
	}
	submit("a", 10, 10)
	submit("a", 10, 10)
	submit("c", 5, 7)  // no band 5: it waits in the fallback band, 0
	submit("b", 10, 1) // the third flow: past the cap
	submit(strings.Repeat("x", metrics.DefaultMaxLabelLength+1), 0, 2)

	wantCounts(t, m, metrics.Prefix+"flow_control_queue_size", map[string]float64{
		"fairness_id=a,model_name=,priority=10,target_model_name=":     2,
		"fairness_id=other,model_name=,priority=10,target_model_name=": 1,
		"fairness_id=c,model_name=,priority=0,target_model_name=":      1,
		"fairness_id=other,model_name=,priority=0,target_model_name=":  1,
	})
	wantCounts(t, m, metrics.Prefix+"flow_control_queue_bytes", map[string]float64{
		"fairness_id=a,model_name=,priority=10,target_model_name=":     20,
		"fairness_id=other,model_name=,priority=10,target_model_name=": 1,
		"fairness_id=c,model_name=,priority=0,target_model_name=":      7,
		"fairness_id=other,model_name=,priority=0,target_model_name=":  2,
	})

	// Once the queues empty, each named flow reads 0 and "other" is gone.
	c.Close()
	wantCounts(t, m, metrics.Prefix+"flow_control_queue_size", map[string]float64{
		"fairness_id=a,model_name=,priority=10,target_model_name=": 0,
		"fairness_id=c,model_name=,priority=0,target_model_name=":  0,
	})
}

// Under NeverPromote a request for an unprovisioned band waits in the
// nearest band below, and is counted there.
func TestQueueGaugesNeverPromote(t *testing.T) {
	m := metrics.New(metrics.Options{})
	cfg := flowcontrol.Config{
		Bands:        []flowcontrol.BandConfig{{Priority: -10}, {Priority: 0}, {Priority: 10}},
		NeverPromote: true,
		Gate:         gate.MaxInFlight(0),
	}
	c, err := flowcontrol.New(cfg)
	require.NoError(t, err)
	defer c.Close()
	m.Watch(c, cfg)
	for _, prio := range []int{5, -3} {
		key := flowcontrol.FlowKey{ID: "f", Priority: prio}
		m.Enqueued(key)
		c.Submit(context.Background(), flowcontrol.Request{Key: key}, func(*flowcontrol.Admission, error) {})
	}
	require.Equal(t, map[string]float64{"fairness_id=f,model_name=,priority=0,target_model_name=": 1, "fairness_id=f,model_name=,priority=-10,target_model_name=": 1},
		counts(t, m, metrics.Prefix+"flow_control_queue_size"))
}
