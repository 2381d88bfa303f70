package vllm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is a Sink that keeps every call in order.
type recorder struct {
	mu     sync.Mutex
	events []event
	notify chan event // if set, every event is also sent here
}

type event struct {
	endpoint string
	removed  bool
	m        Metrics
}

func (r *recorder) Update(endpoint string, m Metrics) { r.add(event{endpoint: endpoint, m: m}) }
func (r *recorder) Remove(endpoint string)            { r.add(event{endpoint: endpoint, removed: true}) }

func (r *recorder) add(e event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	if r.notify != nil {
		r.notify <- e
	}
}

// updates returns the readings delivered for endpoint.
func (r *recorder) updates(endpoint string) []Metrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Metrics
	for _, e := range r.events {
		if e.endpoint == endpoint && !e.removed {
			out = append(out, e.m)
		}
	}
	return out
}

func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// memNet is an in-memory http.RoundTripper: it serves each request with the
// handler of its host, on the caller's goroutine, so that everything stays
// inside a synctest bubble. An unknown host is refused at once.
type memNet map[string]http.Handler

func (n memNet) RoundTrip(req *http.Request) (*http.Response, error) {
	h, ok := n[req.URL.Host]
	if !ok {
		return nil, fmt.Errorf("dial %s: connection refused", req.URL.Host)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

func serveBytes(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(body)
	}
}

// blockUntilCancelled is a server that never answers.
func blockUntilCancelled(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

var (
	v1Reading = Metrics{Waiting: 3, Running: 7, KVCache: 0.4127604166666667}
	v0Reading = Metrics{Waiting: 9, Running: 12, KVCache: 0.9315726290516206}
)

// mustNew returns New(cfg), or fails the test at once.
func mustNew(t testing.TB, cfg Config) *Scraper {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// goRun runs s until ctx ends on a new goroutine; Run's error arrives on
// the returned channel.
func goRun(ctx context.Context, s *Scraper) <-chan error {
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	return done
}

// stopRun cancels the Run of goRun whose context cancel ends, drains
// readings until Run returns, and closes readings. An error from Run
// fails the test.
func stopRun(t *testing.T, cancel context.CancelFunc, done <-chan error, readings chan event) {
	t.Helper()
	cancel()
	go func() {
		for range readings {
		}
	}()
	if err := <-done; err != nil {
		t.Error(err)
	}
	close(readings)
}

// sendIfRoom sends v on ch unless ch is full.
func sendIfRoom[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// runFor runs s for d of the bubble's fake time and returns once Run has.
func runFor(t *testing.T, s *Scraper, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := goRun(ctx, s)
	time.Sleep(d)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// readAts returns the times of readings as offsets from start.
func readAts(ms []Metrics, start time.Time) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = m.ReadAt.Sub(start)
	}
	return out
}

// every returns n multiples of step from 0.
func every(step time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i) * step
	}
	return out
}

func TestScraperDeliversEachEndpointsReadings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &recorder{}
		s := mustNew(t, Config{
			Targets: []string{"http://a:8000", "http://b:8000", "http://a:8000"},
			Sink:    sink,
			Client: &http.Client{Transport: memNet{
				"a:8000": serveBytes(readFixture(t, "vllm-metrics.txt")),
				"b:8000": serveBytes(readFixture(t, "vllm-metrics-v0.txt")),
			}},
		})
		start := time.Now()
		runFor(t, s, 975*time.Millisecond)

		// One scrape at once, then one every DefaultInterval.
		for endpoint, want := range map[string]Metrics{"http://a:8000": v1Reading, "http://b:8000": v0Reading} {
			got := sink.updates(endpoint)
			if diff := cmp.Diff(every(DefaultInterval, 20), readAts(got, start)); diff != "" {
				t.Errorf("%s: reading times (-want +got):\n%s", endpoint, diff)
			}
			for _, m := range got {
				m.ReadAt = time.Time{}
				if m != want {
					t.Fatalf("%s: reading %+v, want %+v", endpoint, m, want)
				}
			}
		}
		stats := s.Stats()
		if len(stats) != 2 || stats[0].Endpoint != "http://a:8000" || stats[1].Endpoint != "http://b:8000" {
			t.Fatalf("Stats lists %+v, want a then b, once each", stats)
		}
		for _, st := range stats {
			if st.Scrapes != 20 || st.Errors != 0 || st.LastError != nil || st.Last.ReadAt.Sub(start) != 950*time.Millisecond {
				t.Errorf("Stats %+v: want 20 scrapes, no error, the last reading at 950ms", st)
			}
		}
	})
}

func TestSlowEndpointDoesNotDelayOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &recorder{}
		var errs []error
		var errMu sync.Mutex
		s := mustNew(t, Config{
			Targets: []string{"http://slow:8000", "http://fast:8000"},
			Sink:    sink,
			Client: &http.Client{Transport: memNet{
				"slow:8000": http.HandlerFunc(blockUntilCancelled),
				"fast:8000": serveBytes(readFixture(t, "vllm-metrics.txt")),
			}},
			OnError: func(endpoint string, err error) {
				errMu.Lock()
				defer errMu.Unlock()
				if endpoint != "http://slow:8000" {
					t.Errorf("OnError(%q, %v) for the wrong endpoint", endpoint, err)
				}
				errs = append(errs, err)
			},
		})
		start := time.Now()
		runFor(t, s, 975*time.Millisecond)

		if diff := cmp.Diff(every(DefaultInterval, 20), readAts(sink.updates("http://fast:8000"), start)); diff != "" {
			t.Errorf("fast endpoint's reading times (-want +got):\n%s", diff)
		}
		if got := sink.updates("http://slow:8000"); len(got) != 0 {
			t.Errorf("slow endpoint delivered %d readings", len(got))
		}
		// The first scrape times out at 500ms; the second is cut short by
		// the end of Run, which is no failure of the endpoint's.
		slow := s.Stats()[0]
		if slow.Errors != 1 || slow.ConsecutiveErrors != 1 || slow.Scrapes != 0 ||
			!errors.Is(slow.LastError, context.DeadlineExceeded) ||
			slow.LastDuration != DefaultTimeout || slow.LastErrorAt.Sub(start) != DefaultTimeout {
			t.Errorf("slow endpoint's Stats %+v: want one timeout of %v", slow, DefaultTimeout)
		}
		errMu.Lock()
		defer errMu.Unlock()
		if len(errs) != 1 || errs[0] != slow.LastError {
			t.Errorf("OnError heard %v, want exactly the one LastError", errs)
		}
	})
}

// script serves the pages of steps in turn, then the last one forever.
type script struct {
	mu    sync.Mutex
	steps []http.HandlerFunc
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.steps[0]
	if len(s.steps) > 1 {
		s.steps = s.steps[1:]
	}
	s.mu.Unlock()
	h(w, r)
}

func TestFailedScrapesDeliverNothing(t *testing.T) {
	good := readFixture(t, "vllm-metrics.txt")
	limit := int64(len(good)) // the fixture fits, not a byte more
	bad := []struct {
		serve http.HandlerFunc
		is    error // the sentinel LastError wraps, if any
		says  string
	}{
		{func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "engine dead", http.StatusInternalServerError)
		},
			ErrStatus, "500 Internal Server Error"},
		{serveBytes([]byte("<html>Bad Gateway</html>")), nil, "decoding page"},
		{serveBytes(good[:len(good)/3]), nil, "decoding page"},
		{serveBytes([]byte("# TYPE up gauge\nup 1\n")), ErrMissingMetric, MetricWaiting},
		{serveBytes(append(slices.Clip(good), '\n')), ErrBodyTooLarge, fmt.Sprintf("over %d bytes", limit)},
		{func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
			_, _ = w.Write(good)
		}, ErrUnsupportedFormat, "openmetrics"},
	}
	synctest.Test(t, func(t *testing.T) {
		sc := &script{steps: []http.HandlerFunc{serveBytes(good)}}
		for _, b := range bad {
			sc.steps = append(sc.steps, b.serve)
		}
		sc.steps = append(sc.steps, serveBytes(good))

		sink := &recorder{}
		var logs bytes.Buffer
		var heard []error
		s := mustNew(t, Config{
			Targets:      []string{"http://vllm:8000"},
			Sink:         sink,
			Client:       &http.Client{Transport: memNet{"vllm:8000": sc}},
			MaxBodyBytes: limit,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
				Level: slog.LevelDebug,
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			})),
			OnError: func(_ string, err error) { heard = append(heard, err) },
		})
		start := time.Now()
		runFor(t, s, time.Duration(len(bad)+1)*DefaultInterval+DefaultInterval/2)

		// Only the first and the last scrape delivered.
		got := readAts(sink.updates("http://vllm:8000"), start)
		want := []time.Duration{0, time.Duration(len(bad)+1) * DefaultInterval}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("reading times (-want +got):\n%s", diff)
		}
		if len(heard) != len(bad) {
			t.Fatalf("OnError heard %d errors, want %d: %v", len(heard), len(bad), heard)
		}
		for i, b := range bad {
			if b.is != nil && !errors.Is(heard[i], b.is) {
				t.Errorf("error %d %q does not wrap %q", i, heard[i], b.is)
			}
			if !strings.Contains(heard[i].Error(), b.says) {
				t.Errorf("error %d %q does not say %q", i, heard[i], b.says)
			}
		}
		st := s.Stats()[0]
		if st.Scrapes != 2 || st.Errors != uint64(len(bad)) || st.ConsecutiveErrors != 0 ||
			st.LastError != heard[len(heard)-1] || st.Last.ReadAt.Sub(start) != want[1] {
			t.Errorf("Stats %+v: want 2 scrapes, %d errors, none since the last reading", st, len(bad))
		}

		// The first failure warns, the others are debug, the recovery is news.
		var levels []string
		for line := range strings.Lines(logs.String()) {
			levels = append(levels, strings.Fields(line)[0])
		}
		wantLevels := []string{"level=WARN"}
		for range len(bad) - 1 {
			wantLevels = append(wantLevels, "level=DEBUG")
		}
		wantLevels = append(wantLevels, "level=INFO")
		if diff := cmp.Diff(wantLevels, levels); diff != "" {
			t.Errorf("log levels (-want +got):\n%s\nlog:\n%s", diff, logs.String())
		}
		if !strings.Contains(logs.String(), fmt.Sprintf("failed_scrapes=%d", len(bad))) {
			t.Errorf("the recovery does not say how many scrapes failed:\n%s", logs.String())
		}
	})
}

func TestSetTargets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		page := readFixture(t, "vllm-metrics.txt")
		sink := &recorder{}
		s := mustNew(t, Config{
			Targets: []string{"http://a:1", "http://b:1"},
			Sink:    sink,
			Client: &http.Client{Transport: memNet{
				"a:1": serveBytes(page), "b:1": serveBytes(page),
				"c:1": serveBytes(page), "d:1": http.HandlerFunc(blockUntilCancelled),
			}},
		})
		// Before Run: only the list changes.
		if err := s.SetTargets([]string{"http://a:1", "http://b:1", "http://d:1"}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		done := goRun(ctx, s)

		time.Sleep(120 * time.Millisecond)
		// Drop a (idle between scrapes) and d (in the middle of a scrape),
		// keep b, add c.
		if err := s.SetTargets([]string{"http://b:1", "http://c:1"}); err != nil {
			t.Fatal(err)
		}
		if got, want := s.Targets(), []string{"http://b:1", "http://c:1"}; !slices.Equal(got, want) {
			t.Errorf("Targets() = %v, want %v", got, want)
		}
		if err := s.SetTargets([]string{"http://b:1", "c:1"}); err == nil {
			t.Error("SetTargets accepted a target without a scheme")
		}
		time.Sleep(75 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		events := sink.all()
		removedAt := map[string]int{}
		for i, e := range events {
			if e.removed {
				removedAt[e.endpoint] = i
			}
		}
		if len(removedAt) != 2 || removedAt["http://a:1"] == 0 || removedAt["http://d:1"] == 0 {
			t.Fatalf("removals %v, want a and d once each", removedAt)
		}
		for i, e := range events {
			if i > removedAt["http://a:1"] && e.endpoint == "http://a:1" {
				t.Errorf("event %+v for a after its removal", e)
			}
		}
		if n := len(sink.updates("http://d:1")); n != 0 {
			t.Errorf("d delivered %d readings", n)
		}
		if diff := cmp.Diff(every(DefaultInterval, 3), readAts(sink.updates("http://a:1"), start)); diff != "" {
			t.Errorf("a's reading times (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(every(DefaultInterval, 4), readAts(sink.updates("http://b:1"), start)); diff != "" {
			t.Errorf("b's reading times, kept across SetTargets (-want +got):\n%s", diff)
		}
		wantC := []time.Duration{120 * time.Millisecond, 170 * time.Millisecond}
		if diff := cmp.Diff(wantC, readAts(sink.updates("http://c:1"), start)); diff != "" {
			t.Errorf("c's reading times, from its addition (-want +got):\n%s", diff)
		}
		stats := s.Stats()
		if len(stats) != 2 || stats[0].Endpoint != "http://b:1" || stats[0].Scrapes != 4 ||
			stats[1].Endpoint != "http://c:1" || stats[1].Scrapes != 2 {
			t.Errorf("Stats %+v: want b with 4 scrapes, c with 2", stats)
		}
	})
}

func TestRunOnceAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &recorder{}
		s := mustNew(t, Config{
			Targets: []string{"http://a:1"},
			Sink:    sink,
			Client:  &http.Client{Transport: memNet{"a:1": serveBytes(readFixture(t, "vllm-metrics.txt"))}},
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := goRun(ctx, s)
		synctest.Wait()
		if err := s.Run(t.Context()); err == nil {
			t.Error("a second Run did not fail while the first runs")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// Run again after it returned: scraping resumes, counts go on.
		runFor(t, s, DefaultInterval/2)
		if st := s.Stats()[0]; st.Scrapes != 2 {
			t.Errorf("Stats %+v: want 2 scrapes over two runs", st)
		}
		// A cancelled context returns at once.
		cancelled, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.Run(cancelled); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, r.Method+" "+r.URL.String()+" Accept: "+r.Header.Get("Accept"))
			mu.Unlock()
			serveBytes(readFixture(t, "vllm-metrics.txt"))(w, r)
		})
		for _, tc := range []struct {
			target, path, want string
		}{
			{"http://h:1", "", "http://h:1/metrics"},
			{"http://h:1/", "", "http://h:1/metrics"},
			{"https://h:1/vllm/", "", "https://h:1/vllm/metrics"},
			{"http://h:1", "stats", "http://h:1/stats"},
		} {
			got = nil
			s := mustNew(t, Config{
				Targets:     []string{tc.target},
				Sink:        &recorder{},
				MetricsPath: tc.path,
				Client:      &http.Client{Transport: memNet{"h:1": record}},
			})
			runFor(t, s, DefaultInterval/2)
			want := []string{"GET " + tc.want + " Accept: " + acceptHeader}
			if !slices.Equal(got, want) {
				t.Errorf("target %q, path %q: requests %q, want %q", tc.target, tc.path, got, want)
			}
		}
	})
}

func TestNewRejects(t *testing.T) {
	sink := &recorder{}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no sink", Config{}},
		{"negative interval", Config{Sink: sink, Interval: -1}},
		{"negative timeout", Config{Sink: sink, Timeout: -time.Second}},
		{"negative body limit", Config{Sink: sink, MaxBodyBytes: -1}},
		{"host and port only", Config{Sink: sink, Targets: []string{"10.0.0.7:8000"}}},
		{"no host", Config{Sink: sink, Targets: []string{"http:///metrics"}}},
		{"another scheme", Config{Sink: sink, Targets: []string{"ftp://h:1"}}},
		{"not a URL", Config{Sink: sink, Targets: []string{"http://h:1/%zz"}}},
	} {
		if _, err := New(tc.cfg); err == nil {
			t.Errorf("%s: New accepted %+v", tc.name, tc.cfg)
		} else if !strings.HasPrefix(err.Error(), "vllm: ") {
			t.Errorf("%s: error %q lacks the package prefix", tc.name, err)
		}
	}
}

// TestLoopbackDeadEndpoint scrapes a live and a dead endpoint over real
// loopback connections with the default client.
func TestLoopbackDeadEndpoint(t *testing.T) {
	live := httptest.NewServer(serveBytes(readFixture(t, "vllm-metrics.txt")))
	defer live.Close()
	// An address nothing listens on any more: connections are refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	ignore := goleak.IgnoreCurrent()

	const want = 3
	readings := make(chan event, 64)
	failures := make(chan error, 64)
	s := mustNew(t, Config{
		Targets: []string{dead, live.URL},
		Sink:    &recorder{notify: readings},
		OnError: func(endpoint string, err error) {
			if endpoint != dead {
				t.Errorf("OnError(%q, %v): the live endpoint failed", endpoint, err)
			}
			sendIfRoom(failures, err)
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := goRun(ctx, s)
	for nr, nf := 0, 0; nr < want || nf < want; {
		select {
		case e := <-readings:
			if e.endpoint != live.URL || e.removed || e.m.ReadAt.IsZero() {
				t.Fatalf("unexpected event %+v", e)
			}
			nr++
		case err := <-failures:
			var op *net.OpError
			if !errors.As(err, &op) {
				t.Errorf("dead endpoint's error %v is not a network error", err)
			}
			nf++
		case <-ctx.Done():
			t.Fatalf("after 10s: %d readings and %d failures, want %d of each", nr, nf, want)
		}
	}
	// Run's return frees every goroutine it started, connections included.
	stopRun(t, cancel, done, readings)
	goleak.VerifyNone(t, ignore)

	st := s.Stats()
	if st[0].Errors < want || st[0].Scrapes != 0 || st[0].LastError == nil {
		t.Errorf("dead endpoint's Stats %+v", st[0])
	}
	if st[1].Scrapes < want || st[1].Errors != 0 || st[1].Last.Waiting != v1Reading.Waiting {
		t.Errorf("live endpoint's Stats %+v", st[1])
	}
}
