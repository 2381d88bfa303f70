package flowcontrol_test

import (
	"context"
	"fmt"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Round robin shares a band between a tenant with a backlog and one that
// sends a little: the light tenant's requests start in turn, not after the
// heavy tenant's backlog. Submit admits without a goroutine per request.
func Example_fairness() {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(10), Fairness: flowcontrol.RoundRobin()}},
		Gate:  gate.MaxInFlight(1),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	var running *flowcontrol.Admission
	submit := func(tenant string) {
		fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: tenant}},
			func(adm *flowcontrol.Admission, err error) {
				if err != nil {
					fmt.Println(tenant, err)
					return
				}
				fmt.Println("started", tenant)
				running = adm
			})
	}
	for range 4 {
		submit("batch")
	}
	submit("chat")
	submit("chat")
	for range 5 {
		running.Done() // the next request starts, as the band's policy picks
	}
	// Output:
	// started batch
	// started batch
	// started chat
	// started batch
	// started chat
	// started batch
}

// longestFirst is a custom fairness policy: the flow with the most waiters
// goes first, ties to the flow that has had waiters longest. It is O(flows)
// per dispatch, which is fine for a handful of tenants.
type longestFirst struct{}

func (longestFirst) TypeName() string                    { return "longest-queue-first-fairness-policy" }
func (longestFirst) NewScheduler() flowcontrol.Scheduler { return &longestScheduler{} }

type longestScheduler struct{ flows []*flowcontrol.Flow }

func (s *longestScheduler) Add(f *flowcontrol.Flow) { s.flows = append(s.flows, f) }

func (s *longestScheduler) Remove(f *flowcontrol.Flow) {
	for i, g := range s.flows {
		if g == f {
			s.flows = append(s.flows[:i], s.flows[i+1:]...)
			return
		}
	}
}

func (s *longestScheduler) HeadChanged(*flowcontrol.Flow) {}

func (s *longestScheduler) Next() *flowcontrol.Flow {
	best := s.flows[0]
	for _, f := range s.flows[1:] {
		if f.Len() > best.Len() {
			best = f
		}
	}
	return best
}

func (s *longestScheduler) Served(*flowcontrol.Flow, int64) {}

// A band can run a fairness policy of your own: a Fairness makes one
// Scheduler per band, which the controller tells of flows gaining and
// losing waiters and asks which flow goes next.
func ExampleFairness() {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, Fairness: longestFirst{}}},
		Gate:  gate.MaxInFlight(1),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	var running *flowcontrol.Admission
	for _, tenant := range []string{"a", "b", "b", "c", "c", "c"} {
		fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: tenant}},
			func(adm *flowcontrol.Admission, err error) {
				if err == nil {
					fmt.Println("started", tenant)
					running = adm
				}
			})
	}
	for range 5 {
		running.Done()
	}
	// Output:
	// started a
	// started c
	// started b
	// started c
	// started b
	// started c
}
