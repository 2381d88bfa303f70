package main

import (
	"context"
	"io"
	"regexp"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/examples/internal/long"
	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Every -gate runs the demo: its header names the gate, each second's
// status line shows the gate's view and the servers' load, and requests
// complete. Under MaxInFlight(slots), with KV caches that hold four
// requests of the longest context, the servers' own queues stay empty;
// under a saturation gate they fill, as the gate means them to.
//
// Each demo runs 2 s in real time on servers of its own. With SLUICE_LONG
// (see examples/internal/long) they run one after another, each in its
// subtest; by default all five start together and each subtest checks
// its demo's output.
func TestEveryGate(t *testing.T) {
	views := map[string]string{
		gateSaturation:            `gate: saturation \d+%, \d of 2 servers saturated, budget \d+`,
		gateConcurrency:           `gate: requests in flight \d+, token budget 16384$`,
		gateSaturationConcurrency: `gate: saturation \d+%, \d of 2 servers saturated, budget \d+; requests in flight \d+, token budget 16384$`,
		gateAdaptive:              `gate: in flight \d+, limit \d+$`,
		gateMaxInFlight:           `gate: in flight \d of 8$`,
	}
	type demo struct {
		text string
		err  error
	}
	runDemo := func(name string) demo {
		out := newSyncBuffer()
		args := []string{"-duration", "2s", "-gate", name}
		if name == gateMaxInFlight {
			// Smaller caches would make the servers queue what they
			// have slots for: MaxInFlight knows nothing of KV.
			args = append(args, "-kv-cache-tokens", strconv.Itoa(4*modelserver.DefaultMaxModelLen))
		}
		err := run(context.Background(), args, out)
		return demo{out.String(), err}
	}
	started := map[string]chan demo{}
	if !long.Enabled() {
		for _, name := range gateNames {
			ch := make(chan demo, 1)
			started[name] = ch
			go func() { ch <- runDemo(name) }()
		}
	}
	for _, name := range gateNames {
		t.Run(name, func(t *testing.T) {
			var d demo
			if ch, ok := started[name]; ok {
				d = <-ch
			} else {
				d = runDemo(name)
			}
			text := d.text
			if d.err != nil {
				t.Fatalf("run: %v\n%s", d.err, text)
			}
			if !regexp.MustCompile(`(?m)^gate: \S`).MatchString(text) {
				t.Errorf("no gate line in the header:\n%s", text)
			}
			status := regexp.MustCompile(`(?m)^` + statusPrefix + `waiting \d+ \d+, running \d+ \d+, KV cache \d+% \d+%; ` + views[name])
			if n := len(status.FindAllString(text, -1)); n < 2 {
				t.Errorf("%d status lines with the gate's view %q, want one a second:\n%s", n, views[name], text)
			}
			m := regexp.MustCompile(`completed (\d+) by`).FindStringSubmatch(text)
			if m == nil || m[1] == "0" {
				t.Errorf("nothing completed:\n%s", text)
			}
			peak := regexp.MustCompile(`at most (\d+) waiting and (\d+) running on one server`).FindStringSubmatch(text)
			if peak == nil {
				t.Fatalf("no servers line in the summary:\n%s", text)
			}
			waiting, _ := strconv.Atoi(peak[1])
			switch name {
			case gateMaxInFlight:
				if waiting != 0 {
					t.Errorf("a server had %d requests waiting under MaxInFlight(its slots)", waiting)
				}
			case gateSaturation:
				if waiting == 0 {
					t.Errorf("no server ever had a request waiting: the saturation gate kept them short of work")
				}
			}
		})
	}
}

// The servers' load feeds the saturation gate; a server that goes down is
// no longer read, its metrics go stale and the gate counts it saturated.
func TestReadServersFeedsSaturationGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var models []*modelserver.Server
		for i := range 2 {
			m, err := modelserver.New(modelserver.Config{Name: "vllm-" + strconv.Itoa(i)})
			if err != nil {
				t.Fatal(err)
			}
			models = append(models, m)
		}
		sat, err := gate.Saturation(gate.SaturationConfig{})
		if err != nil {
			t.Fatal(err)
		}
		fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: sat})
		if err != nil {
			t.Fatal(err)
		}
		defer fc.Close()
		r := readServers(models, sat)
		defer r.close()
		if st := sat.Status(); st.Endpoints != 2 || st.Fresh != 2 || st.Saturated != 0 || st.Room != 2*gate.DefaultQueueDepthThreshold {
			t.Errorf("after the first scrape: %+v, want both servers fresh, with room", st)
		}
		models[0].SetDown(true)
		time.Sleep(gate.DefaultMetricsStalenessThreshold + scrapeEvery)
		synctest.Wait()
		if st := sat.Status(); st.Endpoints != 2 || st.Fresh != 1 || st.Saturated != 1 {
			t.Errorf("one server down: %+v, want it stale and saturated", st)
		}
		models[0].SetDown(false)
		time.Sleep(scrapeEvery)
		synctest.Wait()
		if st := sat.Status(); st.Fresh != 2 || st.Saturated != 0 {
			t.Errorf("back up: %+v, want both fresh", st)
		}
	})
}

// The token budget is package gate's ConcurrencyGate, built from the
// flags: over its budget the next request waits. The status line shows
// the requests in flight, as the controller counts them, and the budget.
func TestTokenBudget(t *testing.T) {
	synctest.Test(t, testTokenBudget)
}

func testTokenBudget(t *testing.T) {
	o, err := parseFlags([]string{"-gate", gateConcurrency, "-servers", "2", "-kv-cache-tokens", "5000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGates(o)
	if err != nil {
		t.Fatal(err)
	}
	if g.concurrency == nil || g.gate != gate.Gate(g.concurrency) {
		t.Fatalf("-gate concurrency built %v, want the concurrency gate alone", g.gate)
	}
	fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g.gate})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	var admissions []*flowcontrol.Admission
	for _, cost := range []int64{8000, 1000, 1500} { // the last one takes the cost in flight over the 10000
		a, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "t"}, Cost: cost})
		if err != nil {
			t.Fatal(err)
		}
		admissions = append(admissions, a)
	}
	if got, want := g.status(fc), "requests in flight 3, token budget 10000"; got != want {
		t.Errorf("status %q, want %q", got, want)
	}
	// Over the budget: the next request waits until its client gives up.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := fc.EnqueueAndWait(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "t"}, Cost: 1}); err == nil {
		t.Error("a request started over the token budget")
	}
	for _, a := range admissions {
		a.Done()
	}
	if got, want := g.status(fc), "requests in flight 0, token budget 10000"; got != want {
		t.Errorf("status %q after every Done, want %q", got, want)
	}
}
