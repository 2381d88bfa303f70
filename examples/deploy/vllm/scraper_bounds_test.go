package vllm

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// slowPage serves body after d of the bubble's time.
func slowPage(d time.Duration, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
			serveBytes(body)(w, r)
		case <-r.Context().Done():
		}
	}
}

// A reading is stamped when its scrape started: its values may have been
// true from then on, never before. Stamped at the end, a page that took
// 300ms looked 300ms younger than it was.
func TestReadingIsStampedAtTheStartOfItsScrape(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &recorder{}
		s := mustNew(t, Config{
			Targets:  []string{"http://slow:8000"},
			Sink:     sink,
			Interval: time.Second,
			Timeout:  time.Second,
			Client:   &http.Client{Transport: memNet{"slow:8000": slowPage(300*time.Millisecond, readFixture(t, "vllm-metrics.txt"))}},
		})
		start := time.Now()
		runFor(t, s, 400*time.Millisecond)
		got := sink.updates("http://slow:8000")
		if len(got) != 1 {
			t.Fatalf("%d readings, want 1", len(got))
		}
		if at := got[0].ReadAt.Sub(start); at != 0 {
			t.Errorf("reading stamped %v after the scrape started, want 0: the page took 300ms to come", at)
		}
		if st := s.Stats()[0]; st.LastDuration != 300*time.Millisecond || !st.Last.ReadAt.Equal(start) {
			t.Errorf("Stats %+v: want a 300ms scrape whose reading is stamped at its start", st)
		}
	})
}

// Through the saturation gate: a page slower than the staleness threshold
// arrives stale, and a slow one goes stale the threshold after its scrape
// started, not after it ended.
func TestSlowPageAgesFromTheStartOfItsScrape(t *testing.T) {
	page := readFixture(t, "vllm-metrics.txt") // 3 waiting, KV 0.41: room 2
	for _, tc := range []struct {
		delay time.Duration
		// whether the endpoint is fresh just after the page arrived, and
		// at 210ms after the scrape started
		freshOnArrival, freshAt210ms bool
	}{
		{100 * time.Millisecond, true, false},
		{250 * time.Millisecond, false, false},
	} {
		t.Run(tc.delay.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g, err := gate.Saturation(gate.SaturationConfig{}) // the real clock, which the bubble fakes
				if err != nil {
					t.Fatal(err)
				}
				s := mustNew(t, Config{
					Targets:  []string{"http://slow:8000"},
					Sink:     g,
					Interval: time.Hour,
					Timeout:  time.Second,
					Client:   &http.Client{Transport: memNet{"slow:8000": slowPage(tc.delay, page)}},
				})
				fresh := func() bool { return g.Status().Fresh == 1 }
				ctx, cancel := context.WithCancel(t.Context())
				ran := make(chan error)
				go func() { ran <- s.Run(ctx) }()
				time.Sleep(tc.delay + time.Millisecond)
				synctest.Wait()
				if got := fresh(); got != tc.freshOnArrival {
					t.Errorf("fresh just after a %v page arrived = %v, want %v", tc.delay, got, tc.freshOnArrival)
				}
				if got := g.Status().Budget; tc.freshOnArrival != (got == 2) {
					t.Errorf("budget %d just after the page arrived", got)
				}
				time.Sleep(210*time.Millisecond - tc.delay - time.Millisecond)
				synctest.Wait()
				if got := fresh(); got != tc.freshAt210ms {
					t.Errorf("fresh 210ms after the scrape started = %v, want %v (the threshold is 200ms)", got, tc.freshAt210ms)
				}
				cancel()
				if err := <-ran; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// gatedRecorder records every reading and hands it on to a saturation gate.
type gatedRecorder struct {
	recorder
	g *gate.SaturationGate
}

func (r *gatedRecorder) Update(endpoint string, m Metrics) {
	r.recorder.Update(endpoint, m)
	r.g.Update(endpoint, m)
}

func (r *gatedRecorder) Remove(endpoint string) {
	r.recorder.Remove(endpoint)
	r.g.Remove(endpoint)
}

// Numbers on a /metrics page are the server's to choose. None that is out
// of a reading's range reaches the sink; each such page is a counted
// failure, and the gate fails closed once the last good reading is stale.
func TestHostileValuesNeverReachTheSink(t *testing.T) {
	page := func(waiting, running, kv string) []byte {
		return []byte(gauges(
			`vllm:num_requests_waiting{model_name="m"} `+waiting,
			`vllm:num_requests_running{model_name="m"} `+running,
			`vllm:kv_cache_usage_perc{model_name="m"} `+kv,
		))
	}
	hostile := [][]byte{
		page("0", "0", "NaN"),
		page("0", "0", "-Inf"),
		page("0", "0", "+Inf"),
		page("0", "0", "-0.5"),
		page("0", "0", "1.0000001"),
		page("0", "0", "1e308"),
		page("NaN", "0", "0.1"),
		page("-1", "0", "0.1"),
		page("-Inf", "0", "0.1"),
		page("+Inf", "0", "0.1"),
		page("1e300", "0", "0.1"),
		page("9223372036854775807", "0", "0.1"),
		page("0", "-3", "0.1"),
		page("0", "NaN", "0.1"),
	}
	synctest.Test(t, func(t *testing.T) {
		g, err := gate.Saturation(gate.SaturationConfig{})
		if err != nil {
			t.Fatal(err)
		}
		sc := &script{steps: []http.HandlerFunc{serveBytes(page("1", "2", "0.3"))}}
		for _, p := range hostile {
			sc.steps = append(sc.steps, serveBytes(p))
		}
		var mu sync.Mutex
		var errs []error
		sink := &gatedRecorder{g: g}
		s := mustNew(t, Config{
			Targets: []string{"http://vllm:8000"},
			Sink:    sink,
			Client:  &http.Client{Transport: memNet{"vllm:8000": sc}},
			OnError: func(_ string, err error) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
			},
		})
		// The good page, every hostile one, then the last one again, long
		// enough for the good reading to go stale.
		runFor(t, s, time.Duration(len(hostile))*DefaultInterval+gate.DefaultMetricsStalenessThreshold+DefaultInterval/2)

		for _, m := range sink.updates("http://vllm:8000") {
			if m.Waiting < 0 || m.Running < 0 || !(m.KVCache >= 0 && m.KVCache <= 1) {
				t.Errorf("the sink received a reading out of range: %+v", m)
			}
		}
		if n := len(sink.updates("http://vllm:8000")); n != 1 {
			t.Errorf("%d readings delivered, want only the good one", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < len(hostile) {
			t.Fatalf("%d failures heard, want at least %d", len(errs), len(hostile))
		}
		for i, err := range errs {
			if !errors.Is(err, ErrInvalidValue) {
				t.Errorf("failure %d: %v, want ErrInvalidValue", i, err)
			}
		}
		if st := s.Stats()[0]; st.Errors != uint64(len(errs)) || st.Scrapes != 1 {
			t.Errorf("Stats %+v: want every hostile page counted as an error", st)
		}
		if err := g.Ready(); err == nil || !strings.Contains(err.Error(), "fresh") {
			t.Errorf("gate Ready() = %v, want it failing closed on stale metrics", err)
		}
		if sat := g.Saturation(); math.IsNaN(sat) || sat != 1 {
			t.Errorf("gate Saturation() = %v, want 1", sat)
		}
	})
}
