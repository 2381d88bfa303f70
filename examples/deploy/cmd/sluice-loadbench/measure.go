//go:build linux

package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// sample is what one attack on one target measured.
type sample struct {
	requests int
	non200   int
	// lat are the latencies, sorted: to the end of the response, or for
	// a stream to its first body byte.
	lat []time.Duration
	// cpu is the target process's CPU time (user and system) over the
	// attack; allocs its heap allocations, or -1 when it has no
	// statistics page.
	cpu    time.Duration
	allocs float64
}

// quantile returns the q-quantile of s's latencies (nearest rank).
func (s sample) quantile(q float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	i := int(q*float64(len(s.lat))+0.5) - 1
	return s.lat[min(max(i, 0), len(s.lat)-1)]
}

// attack drives p with vegeta at rate requests a second for d, each a
// POST of body to path, and measures it. With firstByte, the latency
// is the time to the response's first body byte.
func attack(p *process, client *http.Client, path string, body []byte, rate int, d time.Duration, firstByte bool) (sample, error) {
	var s sample
	before, err := readStats(p, true)
	if err != nil {
		return s, err
	}
	rec := &firstByteRecorder{next: client.Transport}
	c := *client
	c.Transport = rec
	a := vegeta.NewAttacker(vegeta.Client(&c), vegeta.Timeout(30*time.Second), vegeta.MaxBody(1<<20))
	tr := vegeta.NewStaticTargeter(vegeta.Target{
		Method: http.MethodPost,
		URL:    p.addr + path,
		Body:   body,
		Header: http.Header{"Content-Type": {"application/json"}},
	})
	for r := range a.Attack(tr, vegeta.ConstantPacer{Freq: rate, Per: time.Second}, d, p.name) {
		s.requests++
		if r.Code != http.StatusOK {
			s.non200++
		}
		if !firstByte {
			s.lat = append(s.lat, r.Latency)
		}
	}
	after, err := readStats(p, false)
	if err != nil {
		return s, err
	}
	if firstByte {
		s.lat = rec.take()
	}
	slices.Sort(s.lat)
	s.cpu = after.cpu - before.cpu
	s.allocs = -1
	if before.mallocs >= 0 {
		// Each reading's own scrape allocates: before's second reading
		// follows its first by exactly one scrape, which is subtracted.
		s.allocs = (after.mallocs - before.mallocs) - (before.mallocs - before.mallocsFirst)
	}
	return s, nil
}

// firstByteRecorder is a RoundTripper that records each response's time
// to its first body byte.
type firstByteRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	lat  []time.Duration
}

func (f *firstByteRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := f.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &firstByteBody{ReadCloser: resp.Body, start: start, rec: f}
	return resp, nil
}

func (f *firstByteRecorder) take() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lat
}

type firstByteBody struct {
	io.ReadCloser
	start time.Time
	rec   *firstByteRecorder
	seen  bool
}

func (b *firstByteBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.seen {
		b.seen = true
		d := time.Since(b.start)
		b.rec.mu.Lock()
		b.rec.lat = append(b.rec.lat, d)
		b.rec.mu.Unlock()
	}
	return n, err
}

// stats is a reading of a process's counters.
type stats struct {
	cpu time.Duration
	// mallocs is go_memstats_mallocs_total read twice in a row
	// (mallocsFirst, then mallocs), or -1 without a statistics page.
	mallocsFirst, mallocs float64
}

// readStats reads p's CPU time from /proc and its allocations from its
// statistics page: the CPU time after the page when before is set, and
// before it otherwise, so that the attack's CPU time counts no scrape.
func readStats(p *process, before bool) (stats, error) {
	st := stats{mallocsFirst: -1, mallocs: -1}
	var err error
	if !before {
		if st.cpu, err = cpuTime(p); err != nil {
			return st, err
		}
	}
	if p.stats != "" {
		if before {
			if st.mallocsFirst, err = mallocs(p.stats + "/metrics"); err != nil {
				return st, err
			}
		}
		if st.mallocs, err = mallocs(p.stats + "/metrics"); err != nil {
			return st, err
		}
	}
	if before {
		st.cpu, err = cpuTime(p)
	}
	return st, err
}

// cpuTime returns the user and system CPU time p has used.
func cpuTime(p *process) (time.Duration, error) {
	proc, err := procfs.NewProc(p.cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	ps, err := proc.Stat()
	if err != nil {
		return 0, err
	}
	return time.Duration(ps.CPUTime() * float64(time.Second)), nil
}

// mallocs reads go_memstats_mallocs_total from the Prometheus page at url.
func mallocs(url string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", url, err)
	}
	f := fams["go_memstats_mallocs_total"]
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("%s: no go_memstats_mallocs_total", url)
	}
	return f.GetMetric()[0].GetCounter().GetValue(), nil
}
