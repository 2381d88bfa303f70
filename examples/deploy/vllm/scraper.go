package vllm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
)

// Defaults of [Config].
const (
	// DefaultInterval is how often each endpoint is scraped. llm-d's
	// saturation detector calls a reading stale after 200 ms, a threshold
	// it chose for a 50 ms refresh; at 50 ms three scrapes in a row can
	// fail or run late before a healthy endpoint's reading goes stale.
	DefaultInterval = 50 * time.Millisecond
	// DefaultTimeout bounds one scrape: connection, response and body.
	// A page that takes longer than 2.5 times the staleness threshold
	// would be stale almost as soon as it arrived, and a hung endpoint
	// still shows up as two errors a second.
	DefaultTimeout = 500 * time.Millisecond
	// DefaultMetricsPath is where vLLM serves its metrics.
	DefaultMetricsPath = "/metrics"
	// DefaultMaxBodyBytes bounds a page. A vLLM page is tens of kilobytes
	// per engine; anything near this size is not a vLLM page.
	DefaultMaxBodyBytes = 4 << 20
)

// Errors a scrape can fail with, besides the transport's own and those of
// [Parse].
var (
	// ErrStatus means the server answered with a status other than 200.
	ErrStatus = errors.New("vllm: unexpected HTTP status")
	// ErrBodyTooLarge means the page was longer than Config.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("vllm: metrics page too large")
)

// acceptHeader asks for the text format, the one vLLM serves unless asked
// for OpenMetrics; a page in any other format is refused (see Parse).
const acceptHeader = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// Sink receives readings. The scraper calls Update with each endpoint's
// new reading and Remove once an endpoint is no longer a target, from the
// endpoints' own goroutines, so a Sink must be safe for concurrent use and
// should return quickly. *gate.SaturationGate is a Sink.
type Sink interface {
	Update(endpoint string, m Metrics)
	Remove(endpoint string)
}

// Config configures a [Scraper]. Only Sink is required.
type Config struct {
	// Targets are the model servers' base URLs, such as
	// "http://10.0.0.7:8000". A target, exactly as written, is the
	// endpoint name readings are delivered under; duplicates are dropped.
	Targets []string
	// Sink receives every reading and removal.
	Sink Sink
	// Interval is how often each endpoint is scraped; default
	// [DefaultInterval]. A scrape that takes longer delays the next one
	// instead of overlapping it.
	Interval time.Duration
	// Timeout bounds one scrape; default [DefaultTimeout].
	Timeout time.Duration
	// MetricsPath is appended to each target's path; default
	// [DefaultMetricsPath].
	MetricsPath string
	// Client makes the requests. The default is a client of its own whose
	// transport is http.DefaultTransport's, without compression: gzip would
	// cost the model server CPU on every scrape to save bytes on a link
	// where they are cheap.
	Client *http.Client
	// MaxBodyBytes bounds a page; default [DefaultMaxBodyBytes].
	MaxBodyBytes int64
	// Now is the clock that stamps each reading's ReadAt, with the
	// instant the scrape's request was about to be sent (see
	// [Metrics]); default time.Now. Give it the saturation gate's clock (Clock.Now of
	// gate.SaturationConfig), which times the readings' staleness. The
	// interval between scrapes is kept by the runtime's timers, which
	// testing/synctest fakes.
	Now func() time.Time
	// OnError, if set, is called with every failed scrape, on the
	// endpoint's goroutine, after [Scraper.Stats] counts it.
	OnError func(endpoint string, err error)
	// Logger, if set, hears when an endpoint starts failing (Warn), each
	// further failure (Debug), and when it recovers (Info).
	Logger *slog.Logger
}

// EndpointStats is what [Scraper.Stats] reports of one endpoint.
type EndpointStats struct {
	// Endpoint is the target as configured.
	Endpoint string
	// Scrapes counts the readings delivered to the sink, each counted just
	// before the sink receives it.
	Scrapes uint64
	// Errors counts failed scrapes; ConsecutiveErrors those since the last
	// reading.
	Errors, ConsecutiveErrors uint64
	// LastError is the latest failure and LastErrorAt when it ended; nil
	// and zero if the endpoint never failed.
	LastError   error
	LastErrorAt time.Time
	// Last is the latest reading delivered; its ReadAt is zero if none was.
	Last Metrics
	// LastDuration is how long the latest scrape took, failed or not.
	LastDuration time.Duration
}

// Scraper polls vLLM endpoints' metrics pages and delivers their readings to
// a [Sink]. Create one with [New], start it with [Scraper.Run]; the targets
// can be changed at any time with [Scraper.SetTargets]. Its methods are safe
// for concurrent use.
//
// Each endpoint is scraped on its own goroutine, so a slow or dead endpoint
// never delays another's readings. A failed scrape (transport error,
// timeout, a status other than 200, a page that is too large, malformed,
// lacks a vLLM metric, or holds a value no vLLM server reports: NaN, an
// infinity, a negative or huge count, a KV-cache usage outside [0, 1] —
// see [ErrInvalidValue]) delivers nothing and is counted: the endpoint
// keeps its previous reading, which ages from the start of the scrape that
// took it until the gate finds it stale and fails closed. A page's numbers
// are the server's to choose, so no reading the sink receives is out of
// the ranges of [Metrics], and a page slower than the staleness
// threshold arrives stale.
type Scraper struct {
	sink     Sink
	interval time.Duration
	timeout  time.Duration
	path     string
	client   *http.Client
	maxBody  int64
	now      func() time.Time
	onError  func(string, error)
	log      *slog.Logger

	setMu sync.Mutex // serializes SetTargets

	mu      sync.Mutex
	targets []target
	stats   map[string]*EndpointStats
	loops   map[string]*loop
	state   runState
	runCtx  context.Context
	wg      sync.WaitGroup // one per scrape goroutine
}

type runState int

const (
	idle runState = iota
	running
	stopping
)

type target struct {
	endpoint string
	url      string
}

type loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Scraper for cfg. It fails if Sink is nil, a duration or
// size is negative, or a target is not an absolute http or https URL.
func New(cfg Config) (*Scraper, error) {
	if cfg.Sink == nil {
		return nil, errors.New("vllm: Config.Sink is nil")
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 || cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("vllm: Interval %v, Timeout %v, MaxBodyBytes %d: must not be negative",
			cfg.Interval, cfg.Timeout, cfg.MaxBodyBytes)
	}
	s := &Scraper{
		sink:     cfg.Sink,
		interval: cmpOr(cfg.Interval, DefaultInterval),
		timeout:  cmpOr(cfg.Timeout, DefaultTimeout),
		path:     cmpOr(cfg.MetricsPath, DefaultMetricsPath),
		client:   cfg.Client,
		maxBody:  cmpOr(cfg.MaxBodyBytes, DefaultMaxBodyBytes),
		now:      cfg.Now,
		onError:  cfg.OnError,
		log:      cfg.Logger,
		stats:    make(map[string]*EndpointStats),
		loops:    make(map[string]*loop),
	}
	if !strings.HasPrefix(s.path, "/") {
		s.path = "/" + s.path
	}
	if s.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DisableCompression = true
		s.client = &http.Client{Transport: tr}
	}
	if s.now == nil {
		s.now = time.Now
	}
	ts, err := s.resolve(cfg.Targets)
	if err != nil {
		return nil, err
	}
	s.targets = ts
	for _, t := range ts {
		s.stats[t.endpoint] = &EndpointStats{Endpoint: t.endpoint}
	}
	return s, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// resolve checks targets and builds their metrics URLs, dropping
// duplicates.
func (s *Scraper) resolve(targets []string) ([]target, error) {
	ts := make([]target, 0, len(targets))
	seen := make(map[string]bool, len(targets))
	for _, raw := range targets {
		if seen[raw] {
			continue
		}
		seen[raw] = true
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("vllm: target %q: %w", raw, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("vllm: target %q: want an absolute http or https URL such as http://10.0.0.7:8000", raw)
		}
		u.Path = strings.TrimSuffix(u.Path, "/") + s.path
		u.RawPath = ""
		ts = append(ts, target{endpoint: raw, url: u.String()})
	}
	return ts, nil
}

// Run scrapes every target until ctx is done, then waits for every scrape
// goroutine to return, closes the client's idle connections and returns
// nil. Readings already delivered stay with the sink and go stale there. It
// returns an error at once if another Run has not returned.
func (s *Scraper) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.state != idle {
		s.mu.Unlock()
		return errors.New("vllm: Run called while another Run has not returned")
	}
	s.state, s.runCtx = running, ctx
	for _, t := range s.targets {
		s.startLocked(t)
	}
	s.mu.Unlock()

	<-ctx.Done()

	s.mu.Lock()
	s.state = stopping
	for _, l := range s.loops {
		l.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.client.CloseIdleConnections()
	s.mu.Lock()
	clear(s.loops)
	s.state, s.runCtx = idle, nil
	s.mu.Unlock()
	return nil
}

// SetTargets replaces the targets. Endpoints that remain keep their
// goroutines and counts; new ones start at once if Run is running. For each
// endpoint that is gone, SetTargets stops its goroutine, waits for it to
// return (so no reading of it can follow), drops its counts and calls the
// sink's Remove. If a target is invalid, nothing changes.
func (s *Scraper) SetTargets(targets []string) error {
	ts, err := s.resolve(targets)
	if err != nil {
		return err
	}
	s.setMu.Lock()
	defer s.setMu.Unlock()

	keep := make(map[string]bool, len(ts))
	for _, t := range ts {
		keep[t.endpoint] = true
	}
	var gone []string
	var stopped []chan struct{}
	s.mu.Lock()
	for _, t := range s.targets {
		if keep[t.endpoint] {
			continue
		}
		gone = append(gone, t.endpoint)
		if l := s.loops[t.endpoint]; l != nil {
			l.cancel()
			stopped = append(stopped, l.done)
			delete(s.loops, t.endpoint)
		}
		delete(s.stats, t.endpoint)
	}
	for _, t := range ts {
		if _, ok := s.stats[t.endpoint]; ok {
			continue
		}
		s.stats[t.endpoint] = &EndpointStats{Endpoint: t.endpoint}
		if s.state == running {
			s.startLocked(t)
		}
	}
	s.targets = ts
	s.mu.Unlock()

	for _, done := range stopped {
		<-done
	}
	for _, e := range gone {
		s.sink.Remove(e)
	}
	return nil
}

// Targets returns the current targets, without duplicates, in the order
// they were given.
func (s *Scraper) Targets() []string {
	return perTarget(s, func(t target) string { return t.endpoint })
}

// Stats returns the counts of every current target, in the order of
// [Scraper.Targets]. Counts survive the end of Run and are dropped when a
// target is removed.
func (s *Scraper) Stats() []EndpointStats {
	return perTarget(s, func(t target) EndpointStats { return *s.stats[t.endpoint] })
}

// perTarget returns f of each current target, in the order they were
// given; f runs under s.mu.
func perTarget[T any](s *Scraper, f func(target) T) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]T, len(s.targets))
	for i, t := range s.targets {
		out[i] = f(t)
	}
	return out
}

// startLocked starts t's scrape goroutine. s.mu is held and s.state is
// running.
func (s *Scraper) startLocked(t target) {
	ctx, cancel := context.WithCancel(s.runCtx)
	l := &loop{cancel: cancel, done: make(chan struct{})}
	s.loops[t.endpoint] = l
	s.wg.Add(1)
	go s.loop(ctx, t, s.stats[t.endpoint], l.done)
}

// page is one goroutine's reusable scrape state.
type page struct {
	buf bytes.Buffer
	rd  bytes.Reader
	dec decoder
}

func (s *Scraper) loop(ctx context.Context, t target, st *EndpointStats, done chan struct{}) {
	defer s.wg.Done()
	defer close(done)
	var p page
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		s.scrapeOnce(ctx, t, st, &p)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// scrapeOnce scrapes t, counts the outcome, then delivers the reading or
// reports the failure.
func (s *Scraper) scrapeOnce(ctx context.Context, t target, st *EndpointStats, p *page) {
	start := s.now()
	m, err := s.scrape(ctx, t.url, p)
	end := s.now()
	if ctx.Err() != nil {
		// Stopping: neither a reading nor the endpoint's failure.
		return
	}
	if err == nil {
		// The page's values were true at some instant between the
		// request leaving and the body arriving; start is the earliest,
		// so the reading ages from there: a page that took the whole
		// Timeout to come is that much older when it arrives, and one
		// slower than the gate's staleness threshold arrives stale.
		// Stamped at the end, a slow page would look fresh for up to
		// Timeout + the threshold after the server wrote it.
		m.ReadAt = start
	}

	// Count first, so that whoever hears of the scrape finds it counted.
	s.mu.Lock()
	st.LastDuration = end.Sub(start)
	failedBefore := st.ConsecutiveErrors
	if err != nil {
		st.Errors++
		st.ConsecutiveErrors++
		st.LastError, st.LastErrorAt = err, end
	} else {
		st.Scrapes++
		st.ConsecutiveErrors = 0
		st.Last = m
	}
	s.mu.Unlock()

	if err == nil {
		s.sink.Update(t.endpoint, m)
	}
	switch {
	case err != nil:
		if s.log != nil {
			level := slog.LevelDebug
			if failedBefore == 0 {
				level = slog.LevelWarn
			}
			s.log.Log(ctx, level, "vllm: scrape failed", "endpoint", t.endpoint, "err", err)
		}
		if s.onError != nil {
			s.onError(t.endpoint, err)
		}
	case failedBefore > 0 && s.log != nil:
		s.log.Info("vllm: scrape recovered", "endpoint", t.endpoint, "failed_scrapes", failedBefore)
	}
}

// scrape fetches and parses one page.
func (s *Scraper) scrape(ctx context.Context, url string, p *page) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Metrics{}, fmt.Errorf("vllm: scraping %s: %w", url, err)
	}
	req.Header.Set("Accept", acceptHeader)
	resp, err := s.client.Do(req)
	if err != nil {
		return Metrics{}, err // a *url.Error, which names the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Read a little, so that a short error page frees the connection
		// for the next scrape.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return Metrics{}, fmt.Errorf("%w: %s from %s", ErrStatus, resp.Status, url)
	}
	format := expfmt.ResponseFormat(resp.Header)
	if err := checkFormat(format); err != nil {
		return Metrics{}, fmt.Errorf("parsing %s: %w", url, err)
	}
	p.buf.Reset()
	n, err := p.buf.ReadFrom(io.LimitReader(resp.Body, s.maxBody+1))
	if err != nil {
		return Metrics{}, fmt.Errorf("vllm: reading %s: %w", url, err)
	}
	if n > s.maxBody {
		return Metrics{}, fmt.Errorf("%w: %s is over %d bytes", ErrBodyTooLarge, url, s.maxBody)
	}
	p.rd.Reset(p.buf.Bytes())
	m, err := p.dec.decode(&p.rd, format)
	if err != nil {
		return Metrics{}, fmt.Errorf("parsing %s: %w", url, err)
	}
	return m, nil
}
