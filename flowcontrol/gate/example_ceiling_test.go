package gate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Interactive chat (band 10) beside a batch backlog (band 0) on 10 slots:
// a priority holdback gives the batch band the ceiling 0.5, so batch alone
// fills 5 slots, and the other 5 are there for chat the moment it comes.
func ExampleCeiling() {
	holdback, err := gate.PriorityHoldback(gate.PriorityHoldbackConfig{MinCeiling: 0.5})
	if err != nil {
		panic(err)
	}
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}},
		Gate:  gate.Ceiling(gate.MaxInFlight(10), holdback),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()

	var admissions []*flowcontrol.Admission
	send := func(id string, priority, n int) {
		for range n {
			fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: id, Priority: priority}},
				func(a *flowcontrol.Admission, err error) {
					if err == nil {
						admissions = append(admissions, a)
					}
				})
		}
	}
	send("batch", 0, 20)
	fmt.Println("batch alone:", fc.InFlight(), "in flight")
	send("chat", 10, 5)
	fmt.Println("with chat:", fc.InFlight(), "in flight")
	for _, a := range admissions {
		a.Done()
	}
	// Output:
	// batch alone: 5 in flight
	// with chat: 10 in flight
}

// The same behind the saturation gate, on two model servers of 8 slots
// each (vLLM's --max-num-seqs 8): with SlotsPerEndpoint declared, the
// batch band's ceiling of 0.5 is half of the 16 slots, counting the
// requests the servers run or queue and those started since the last
// scrape, whatever the depth of their queues.
func ExampleCeiling_saturation() {
	saturation, err := gate.Saturation(gate.SaturationConfig{
		SlotsPerEndpoint:          8,
		MetricsStalenessThreshold: time.Minute, // a scraper would refresh every 50ms; here, one reading
	})
	if err != nil {
		panic(err)
	}
	holdback, err := gate.PriorityHoldback(gate.PriorityHoldbackConfig{MinCeiling: 0.5})
	if err != nil {
		panic(err)
	}
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}},
		Gate:  gate.Ceiling(saturation, holdback),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()

	// The scraper's reading: each server runs 2 requests of earlier
	// traffic, 4 of the 16 slots.
	saturation.Update("vllm-0", gate.Metrics{Running: 2})
	saturation.Update("vllm-1", gate.Metrics{Running: 2})
	var admissions []*flowcontrol.Admission
	send := func(id string, priority, n int) {
		for range n {
			fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: id, Priority: priority}},
				func(a *flowcontrol.Admission, err error) {
					if err == nil {
						admissions = append(admissions, a)
					}
				})
		}
	}
	send("batch", 0, 20)
	fmt.Printf("batch started %d: %.0f%% of the slots in use\n", fc.InFlight(), 100*saturation.Saturation())
	send("chat", 10, 3)
	fmt.Printf("with chat: %d started, %.0f%% of the slots in use\n", fc.InFlight(), 100*saturation.Saturation())
	for _, a := range admissions {
		a.Done()
	}
	// Output:
	// batch started 4: 50% of the slots in use
	// with chat: 7 started, 69% of the slots in use
}

// llm-d-router's priority-holdback-policy spaces the ceilings from
// MaxCeiling for the highest band to MinCeiling for the lowest, by rank or
// by the priorities' values.
func ExamplePriorityHoldback() {
	bands := []int{10, 0, -5}
	for _, domain := range []string{gate.DomainRank, gate.DomainValue} {
		p, err := gate.PriorityHoldback(gate.PriorityHoldbackConfig{Domain: domain, MinCeiling: 0.4, MaxCeiling: 1})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-5s", domain)
		for rank, priority := range bands {
			fmt.Printf("  band %d: %.2f", priority, p.Ceiling(0, rank, bands))
		}
		fmt.Println()
	}
	// Output:
	// rank   band 10: 1.00  band 0: 0.70  band -5: 0.40
	// value  band 10: 1.00  band 0: 0.60  band -5: 0.40
}

// llm-d-router's static-usage-limit-policy gives every band one ceiling:
// at 0.8, no band starts a request once the gate is 80% full.
func ExampleStaticUsageLimit() {
	p, err := gate.StaticUsageLimit(0.8)
	if err != nil {
		panic(err)
	}
	g := gate.MaxInFlight(10)
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0}},
		Gate:  gate.Ceiling(g, p),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	var admissions []*flowcontrol.Admission
	for range 10 {
		fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "a"}},
			func(a *flowcontrol.Admission, err error) {
				if err == nil {
					admissions = append(admissions, a)
				}
			})
	}
	fmt.Println(p.TypeName()+":", fc.InFlight(), "in flight of 10")
	for _, a := range admissions {
		a.Done()
	}
	// Output:
	// static-usage-limit-policy: 8 in flight of 10
}

// llm-d-router's soft-reflective-ceiling-policy never holds back the
// highest band; a lower one, past its reflective ceiling, opens on one
// offer in round(s / (1 − s)): here, with two bands at saturation 0.75,
// one in 3.
func ExampleSoftReflectiveCeiling() {
	p := gate.SoftReflectiveCeiling()
	bands := []int{10, 0}
	for range 6 {
		fmt.Print(p.Ceiling(0.75, 0, bands), "/", p.Ceiling(0.75, 1, bands), " ")
	}
	fmt.Println()
	// Output:
	// 1/0 1/0 1/1 1/0 1/0 1/1
}
