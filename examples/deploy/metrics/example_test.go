package metrics_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// A controller whose Observer and Waiting hooks are a Metrics, watched by
// it and registered in a Prometheus registry: one request runs, one waits,
// one is refused. The requests' Tag labels them with their model.
func Example() {
	m := metrics.New(metrics.Options{InferencePool: "pool-a"})
	cfg := flowcontrol.Config{
		Bands:    []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(1)}},
		Gate:     gate.MaxInFlight(1),
		Observer: m.Observe,
		Waiting:  m.Waiting,
	}
	c, err := flowcontrol.New(cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	m.Watch(c, cfg)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	ctx := context.Background()
	req := flowcontrol.Request{
		Key: flowcontrol.FlowKey{ID: "tenant-a"},
		Tag: metrics.RequestLabels{ModelName: "llama-3", TargetModelName: "llama-3"},
	}
	running, _ := c.EnqueueAndWait(ctx, req)
	defer running.Done()
	c.Submit(ctx, req, func(a *flowcontrol.Admission, _ error) {
		if a != nil {
			a.Done()
		}
	})
	_, err = c.EnqueueAndWait(ctx, req) // the band's one place is taken
	fmt.Println(err)

	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetType() == dto.MetricType_HISTOGRAM { // its count is in requests_total
			continue
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			fmt.Printf("%s{%s} %v\n", f.GetName(), strings.Join(labels, ","), s.GetCounter().GetValue()+s.GetGauge().GetValue())
		}
	}
	// Output:
	// flowcontrol: priority 0: rejected-saturated: band 0 request capacity 1 reached; retry after 1s
	// llm_d_epp_flow_control_capacity_utilization_requests{inference_pool=pool-a,priority=0} 1
	// llm_d_epp_flow_control_gate_refusals_total{inference_pool=pool-a} 2
	// llm_d_epp_flow_control_queue_bytes{fairness_id=tenant-a,inference_pool=pool-a,model_name=llama-3,priority=0,target_model_name=llama-3} 0
	// llm_d_epp_flow_control_queue_cost{inference_pool=pool-a,priority=0} 1
	// llm_d_epp_flow_control_queue_size{fairness_id=tenant-a,inference_pool=pool-a,model_name=llama-3,priority=0,target_model_name=llama-3} 1
	// llm_d_epp_flow_control_requests_in_flight{inference_pool=pool-a} 1
	// llm_d_epp_flow_control_requests_total{inference_pool=pool-a,outcome=Dispatched,priority=0} 1
	// llm_d_epp_flow_control_requests_total{inference_pool=pool-a,outcome=RejectedCapacity,priority=0} 1
}
