package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// observers are the Observers benchmarked: noop is the baseline, a func
// that does nothing, called the same way.
func observers() []struct {
	name string
	fn   func(flowcontrol.Event)
} {
	return []struct {
		name string
		fn   func(flowcontrol.Event)
	}{
		{"noop", func(flowcontrol.Event) {}},
		{"metrics", metrics.New(metrics.Options{InferencePool: "pool-a"}).Observe},
	}
}

// BenchmarkObserve is one Observer call, in steady state (every series
// exists), over events of flows flows, two bands and two outcomes.
// Baseline: observer=noop.
func BenchmarkObserve(b *testing.B) {
	for _, flows := range []int{1, 1000} {
		events := make([]flowcontrol.Event, 0, 4*flows)
		for f := range flows {
			id := fmt.Sprintf("tenant-%d", f)
			events = append(events,
				event(id, 10, flowcontrol.OutcomeDispatched, 0),
				event(id, 10, flowcontrol.OutcomeDispatched, 40*time.Millisecond),
				event(id, 0, flowcontrol.OutcomeDispatched, 3*time.Second),
				event(id, 0, flowcontrol.OutcomeRejectedSaturated, 0))
		}
		for _, o := range observers() {
			for _, ev := range events {
				o.fn(ev) // create the series
			}
			b.Run(fmt.Sprintf("flows=%d/observer=%s", flows, o.name), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					o.fn(events[i])
					if i++; i == len(events) {
						i = 0
					}
				}
			})
			b.Run(fmt.Sprintf("flows=%d/observer=%s/parallel", flows, o.name), func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						o.fn(events[i])
						if i++; i == len(events) {
							i = 0
						}
					}
				})
			})
		}
	}
}

// BenchmarkEnqueueAndWaitObserved is the controller's immediate path (a
// request that starts at once, then Done) with each Observer, and with
// none. Baseline: observer=noop.
func BenchmarkEnqueueAndWaitObserved(b *testing.B) {
	obs := append([]struct {
		name string
		fn   func(flowcontrol.Event)
	}{{"none", nil}}, observers()...)
	for _, o := range obs {
		b.Run("observer="+o.name, func(b *testing.B) {
			c, err := flowcontrol.New(flowcontrol.Config{
				Bands:    []flowcontrol.BandConfig{{Priority: 0}},
				Gate:     gate.MaxInFlight(1),
				Observer: o.fn,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			req := flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "tenant-a"}}
			b.ReportAllocs()
			for b.Loop() {
				adm, err := c.EnqueueAndWait(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				adm.Done()
			}
		})
	}
}

// BenchmarkCollect is one scrape of a Metrics holding the series of 1,000
// flows and watching a controller of four bands, into a registry.
// Baseline: none; it shows what a scrape costs the process.
func BenchmarkCollect(b *testing.B) {
	m := metrics.New(metrics.Options{})
	for f := range 1000 {
		m.Observe(event(fmt.Sprintf("tenant-%d", f), 0, flowcontrol.OutcomeDispatched, time.Millisecond))
	}
	cfg := flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 1}, {Priority: 2}, {Priority: 3}}}
	c, err := flowcontrol.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	m.Watch(c, cfg)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
