package flowcontrol

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// doneLog records what Submit's done functions deliver, by request.
type doneLog struct {
	adm map[int]*Admission
	err map[int]error
}

func (o *doneLog) done(i int) func(*Admission, error) {
	return func(a *Admission, err error) {
		if _, twice := o.adm[i]; twice {
			panic("done called twice")
		}
		if _, twice := o.err[i]; twice {
			panic("done called twice")
		}
		if err != nil {
			o.err[i] = err
			return
		}
		o.adm[i] = a
	}
}

// TestCounterRangeIsRefused: a request that would take the controller's
// byte or cost total past the range of int64 — which takes about 2^23
// requests of the largest counted size, so the total is primed here — is
// refused as saturated, naming no capacity, and leaves the total as it
// was; one that adds nothing to that total is still queued, and the totals
// come back exactly.
func TestCounterRangeIsRefused(t *testing.T) {
	for _, measure := range []string{"bytes", "cost"} {
		t.Run(measure, func(t *testing.T) {
			c, err := New(Config{Bands: []BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(0)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			total := &c.queued.bytes
			primed := int64(math.MaxInt64) - MaxRequestBytes
			huge := Request{Key: FlowKey{ID: "huge"}, ByteSize: math.MaxInt64}
			if measure == "cost" {
				total = &c.queued.cost
				primed = math.MaxInt64 - MaxRequestCost
				huge = Request{Key: FlowKey{ID: "huge"}, Cost: math.MaxInt64}
			}
			c.mu.Lock()
			*total += primed
			c.mu.Unlock()

			o := &doneLog{adm: map[int]*Admission{}, err: map[int]error{}}
			c.Submit(context.Background(), huge, o.done(0)) // takes the total to exactly MaxInt64
			if err := o.err[0]; err != nil {
				t.Fatalf("a request that fits the range was refused: %v", err)
			}
			c.Submit(context.Background(), Request{Key: FlowKey{ID: "one-more"}, ByteSize: 1}, o.done(1))
			err1 := o.err[1]
			if !errors.Is(err1, ErrRejectedSaturated) || errors.Is(err1, ErrTooLarge) {
				t.Fatalf("past the range: %v, want rejected-saturated and not too large", err1)
			}
			if msg := err1.Error(); strings.Contains(msg, "capacity") || !strings.Contains(msg, "range") {
				t.Errorf("%q names a capacity, or not the counters' range", msg)
			}
			if measure == "bytes" {
				// No bytes: the byte total does not move.
				c.Submit(context.Background(), Request{Key: FlowKey{ID: "no-bytes"}}, o.done(2))
				if err := o.err[2]; err != nil {
					t.Fatalf("a request of no bytes was refused: %v", err)
				}
			}
			c.mu.Lock()
			if *total != math.MaxInt64 {
				t.Errorf("total %d, want %d", *total, int64(math.MaxInt64))
			}
			c.mu.Unlock()
			c.Close()
			c.mu.Lock()
			*total -= primed
			left := c.queued
			c.mu.Unlock()
			if left != (backlog{}) {
				t.Errorf("after Close the controller holds %+v", left)
			}
		})
	}
}

// TestCountersStayExact drives the real controller with sizes and costs
// anywhere in int64 and, after every step, checks each holder's backlog —
// every flow's, every band's (and its published copy), the controller's —
// against the sum of what the requests still waiting count as: never
// negative, never wrapped, and zero once nothing waits.
func TestCountersStayExact(t *testing.T) {
	number := rapid.OneOf(
		rapid.Int64Range(-3, 10),
		rapid.SampledFrom([]int64{MaxRequestCost - 1, MaxRequestCost, MaxRequestCost + 1, math.MaxInt64 - 1, math.MaxInt64, math.MinInt64}),
		rapid.Int64(),
	)
	limit := func(t *rapid.T, name string) capacity.Limit {
		if !rapid.Bool().Draw(t, name+"-bounded") {
			return capacity.Unbounded()
		}
		return capacity.Bounded(rapid.SampledFrom([]int64{0, 2, 7, MaxRequestCost, 3 * MaxRequestCost, math.MaxInt64}).Draw(t, name))
	}
	policies := []Fairness{GlobalStrict(), RoundRobin(), DeficitRoundRobin(DRRConfig{})}
	var fairness [2]Fairness // of bands 0 and 1, drawn with the controller
	bandConfig := func(t *rapid.T, p int) BandConfig {
		return BandConfig{
			Priority:            p,
			RequestCapacity:     limit(t, "band-requests"),
			ByteCapacity:        limit(t, "band-bytes"),
			CostCapacity:        limit(t, "band-cost"),
			FlowRequestCapacity: limit(t, "flow-requests"),
			Fairness:            fairness[p],
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		for p := range fairness {
			fairness[p] = rapid.SampledFrom(policies).Draw(t, "fairness")
		}
		c, err := New(Config{
			Bands:           []BandConfig{bandConfig(t, 0), bandConfig(t, 1)},
			RequestCapacity: limit(t, "global-requests"),
			ByteCapacity:    limit(t, "global-bytes"),
			CostCapacity:    limit(t, "global-cost"),
			NoDisplacement:  rapid.Bool().Draw(t, "no-displacement"),
			Gate:            gate.MaxInFlight(rapid.IntRange(0, 2).Draw(t, "in-flight")),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		o := &doneLog{adm: map[int]*Admission{}, err: map[int]error{}}
		var reqs []Request
		ended := map[int]bool{} // admissions Done
		check := func(step string) {
			type holder struct {
				p  int
				id string
			}
			want := map[holder]backlog{}
			for i, r := range reqs {
				if _, ok := o.adm[i]; ok {
					continue
				}
				if _, ok := o.err[i]; ok {
					continue
				}
				size, cost := counted(&r)
				for _, h := range []holder{{r.Key.Priority, r.Key.ID}, {r.Key.Priority, ""}, {math.MinInt, ""}} {
					q := want[h]
					q.add(size, cost)
					want[h] = q
				}
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.queued != want[holder{math.MinInt, ""}] {
				t.Fatalf("%s: controller holds %+v, want %+v", step, c.queued, want[holder{math.MinInt, ""}])
			}
			for _, b := range c.bands.Load().desc {
				w := want[holder{b.priority, ""}]
				pub := backlog{b.published.requests.Load(), b.published.bytes.Load(), b.published.cost.Load()}
				if b.queued != w || pub != w {
					t.Fatalf("%s: band %d holds %+v, publishes %+v, want %+v", step, b.priority, b.queued, pub, w)
				}
				for id, f := range b.flows {
					if f.queued != want[holder{b.priority, id}] || f.queued.requests == 0 {
						t.Fatalf("%s: flow %q of band %d holds %+v, want %+v", step, id, b.priority, f.queued, want[holder{b.priority, id}])
					}
				}
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"submit": func(t *rapid.T) {
				r := Request{
					Key:      FlowKey{ID: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "flow"), Priority: rapid.IntRange(0, 1).Draw(t, "priority")},
					ByteSize: number.Draw(t, "size"),
					Cost:     number.Draw(t, "cost"),
				}
				reqs = append(reqs, r)
				c.Submit(context.Background(), r, o.done(len(reqs)-1))
				check("submit")
			},
			"done": func(t *rapid.T) {
				var running []int
				for i := range reqs {
					if o.adm[i] != nil && !ended[i] {
						running = append(running, i)
					}
				}
				if len(running) == 0 {
					t.Skip("nothing running")
				}
				i := rapid.SampledFrom(running).Draw(t, "admission")
				ended[i] = true
				o.adm[i].Done()
				check("done")
			},
			"provision": func(t *rapid.T) {
				if err := c.ProvisionBand(bandConfig(t, rapid.IntRange(0, 1).Draw(t, "band"))); err != nil {
					t.Fatal(err)
				}
				check("provision")
			},
		})
		c.Close()
		check("close")
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.queued != (backlog{}) {
			t.Fatalf("after Close the controller holds %+v", c.queued)
		}
	})
}
