package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/headroom/window"
)

// Defaults of the live mode's flags. The band defaults to the gateway
// example's sheddable batch band, where a batch dispatcher belongs.
const (
	defaultPriorityHdr  = "x-llm-d-priority"
	defaultFairnessHdr  = "x-llm-d-inference-fairness-id"
	defaultLiveFairness = "dispatcher"
	defaultLiveBand     = -10
	defaultLivePath     = "/v1/completions"
	defaultLiveBody     = `{"model":"sim","prompt":"Summarize the flow-control design in one paragraph.","max_tokens":64}`
	defaultLiveRequests = 500
	defaultLiveDuration = time.Minute
)

const liveReportInterval = time.Second

// liveConfig configures the live dispatcher.
type liveConfig struct {
	target         string // gateway base URL
	path           string
	body           string
	band           int
	priorityHeader string
	fairnessHeader string
	fairnessID     string
	requests       int // jobs to complete; 0: until the duration ends
	duration       time.Duration
	useHeadroom    bool
	window         window.Config
}

func liveFlags(fs *flag.FlagSet) *liveConfig {
	c := &liveConfig{duration: defaultLiveDuration}
	fs.StringVar(&c.target, "target", "", "live: gateway base URL, e.g. http://127.0.0.1:8080 (required)")
	fs.StringVar(&c.path, "path", defaultLivePath, "live: request path")
	fs.StringVar(&c.body, "body", defaultLiveBody, "live: request body (POST, application/json)")
	fs.IntVar(&c.band, "band", defaultLiveBand, "live: priority band to dispatch to, sent in -priority-header")
	fs.StringVar(&c.priorityHeader, "priority-header", defaultPriorityHdr, "live: request header that names the priority band")
	fs.StringVar(&c.fairnessHeader, "fairness-header", defaultFairnessHdr, "live: request header that names the flow (empty: none)")
	fs.StringVar(&c.fairnessID, "flow", defaultLiveFairness, "live: flow id sent in -fairness-header")
	fs.IntVar(&c.requests, "requests", defaultLiveRequests, "live: requests to complete (0: dispatch until -duration ends)")
	fs.BoolVar(&c.useHeadroom, "headroom", true, "live: cap the window with "+headroom.HeaderName)
	fs.IntVar(&c.window.Initial, "initial", 1, "live: initial window")
	fs.IntVar(&c.window.Max, "max", 256, "live: largest window")
	return c
}

// liveStats counts what the live dispatcher saw.
type liveStats struct {
	Sent, Accepted, Saturated, Failed int
	// Evicted counts the requests a higher band's traffic revoked while
	// they ran (429 evicted-*): resent after their Retry-After, as a
	// capacity rejection is.
	Evicted int
	// OtherReasons counts failed responses by x-llm-d-request-dropped-reason
	// (or "status NNN", or "transport").
	OtherReasons map[string]int
	// MalformedHeadroom counts responses whose headroom header did not parse.
	MalformedHeadroom int
	// QueueTotal sums the reported queue durations of accepted requests.
	QueueTotal   time.Duration
	LastHeadroom string
	Elapsed      time.Duration
}

// runLive dispatches cfg.requests jobs (or jobs until cfg.duration ends) to
// the gateway, one request per job, resending a job whose request failed. It
// prints the window every second and a summary at the end.
func runLive(ctx context.Context, cfg liveConfig, client *http.Client, out io.Writer) (liveStats, error) {
	switch {
	case cfg.requests < 0:
		return liveStats{}, fmt.Errorf("dispatcher: -requests %d is negative", cfg.requests)
	case cfg.duration < 0:
		return liveStats{}, fmt.Errorf("dispatcher: -duration %v is negative", cfg.duration)
	}
	win, err := window.New(cfg.window)
	if err != nil {
		return liveStats{}, err
	}
	url := strings.TrimSuffix(cfg.target, "/") + cfg.path
	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}

	var (
		mu    sync.Mutex // guards stats
		stats = liveStats{OtherReasons: map[string]int{}}
		wg    sync.WaitGroup
		wake  = make(chan struct{}, 1) // a request finished
	)
	start := time.Now()
	fmt.Fprintf(out, "dispatching to %s, band %d (%s), headroom %v\n", url, cfg.band, cfg.priorityHeader, cfg.useHeadroom)

	send := func(t window.Ticket) {
		defer wg.Done()
		fb, reason, malformed, hv := dispatchOne(ctx, cfg, client, url)
		// The window's release and the count of accepted jobs change
		// together, so the loop below never sees a job that is neither in
		// flight nor accepted, and never sends it twice.
		mu.Lock()
		win.Done(time.Now(), t, fb)
		switch fb.Signal {
		case window.Accepted:
			stats.Accepted++
			stats.QueueTotal += fb.QueueDelay
		case window.Saturated:
			stats.Saturated++
		case window.Evicted:
			stats.Evicted++
		default:
			stats.Failed++
			stats.OtherReasons[reason]++
		}
		if malformed {
			stats.MalformedHeadroom++
		}
		if hv != "" {
			stats.LastHeadroom = hv
		}
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}

	report := time.NewTicker(liveReportInterval)
	defer report.Stop()
	var reopen *time.Timer
	for ctx.Err() == nil {
		mu.Lock()
		accepted, inFlight := stats.Accepted, win.InFlight()
		mu.Unlock()
		if cfg.requests > 0 && accepted >= cfg.requests {
			break
		}
		now := time.Now()
		// A job is open until accepted; those in flight are taken.
		open := cfg.requests == 0 || cfg.requests-accepted-inFlight > 0
		if open {
			if t, ok := win.TryAcquire(now); ok {
				mu.Lock()
				stats.Sent++
				mu.Unlock()
				wg.Add(1)
				go send(t)
				continue
			}
		}
		var reopenC <-chan time.Time
		if until := win.ClosedUntil(); open && until.After(now) {
			if reopen == nil {
				reopen = time.NewTimer(until.Sub(now))
			} else {
				reopen.Reset(until.Sub(now))
			}
			reopenC = reopen.C
		}
		select {
		case <-wake:
		case <-reopenC:
		case <-report.C:
			mu.Lock()
			s := stats
			mu.Unlock()
			st := win.State()
			capText := "-"
			if st.Capped {
				capText = strconv.FormatInt(st.HeadroomCap, 10)
			}
			fmt.Fprintf(out, "%4.0fs window %3d in flight %3d cwnd %6.1f cap %4s closed %4.1fs | sent %5d ok %5d saturated %4d failed %4d | headroom %s\n",
				time.Since(start).Seconds(), st.Limit, st.InFlight, st.CongestionWindow, capText,
				max(time.Until(st.ClosedUntil), 0).Seconds(), s.Sent, s.Accepted, s.Saturated, s.Failed, s.LastHeadroom)
		case <-ctx.Done():
		}
		if reopenC != nil {
			reopen.Stop()
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	stats.Elapsed = time.Since(start)
	printLiveSummary(out, stats, win.State())
	if cfg.requests > 0 && stats.Accepted < cfg.requests {
		return stats, fmt.Errorf("dispatcher: %d of %d requests completed before %v", stats.Accepted, cfg.requests, cfg.duration)
	}
	return stats, nil
}

func printLiveSummary(out io.Writer, s liveStats, st window.State) {
	fmt.Fprintf(out, "done in %.1fs: sent %d, accepted %d (%.1f/s), capacity rejections %d, evictions %d, other failures %d",
		s.Elapsed.Seconds(), s.Sent, s.Accepted, float64(s.Accepted)/max(s.Elapsed.Seconds(), 1e-9), s.Saturated, s.Evicted, s.Failed)
	for _, reason := range slices.Sorted(maps.Keys(s.OtherReasons)) {
		fmt.Fprintf(out, " [%s: %d]", reason, s.OtherReasons[reason])
	}
	if s.Accepted > 0 {
		fmt.Fprintf(out, ", mean queue %dms", (s.QueueTotal / time.Duration(s.Accepted)).Milliseconds())
	}
	if s.MalformedHeadroom > 0 {
		fmt.Fprintf(out, ", malformed headroom headers %d", s.MalformedHeadroom)
	}
	fmt.Fprintf(out, ", window decreases %d\n", st.Decreases)
}

// dispatchOne sends one request and reads the router's feedback from the
// response. It reads the whole body, so the request stays in flight until
// the router has released it. reason names a failure; malformed reports a
// headroom header that did not parse, and headroomValue is the header as
// parsed ("" when absent or ignored).
func dispatchOne(ctx context.Context, cfg liveConfig, client *http.Client, url string) (fb window.Feedback, reason string, malformed bool, headroomValue string) {
	fb.Signal = window.Failed
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(cfg.body))
	if err != nil {
		return fb, "request", false, ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(cfg.priorityHeader, strconv.Itoa(cfg.band))
	if cfg.fairnessHeader != "" {
		req.Header.Set(cfg.fairnessHeader, cfg.fairnessID)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fb, "cancelled", false, ""
		}
		return fb, "transport", false, ""
	}
	_, copyErr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	h := resp.Header
	status := resp.StatusCode
	if copyErr != nil && status/100 == 2 {
		status = http.StatusBadGateway // the body broke off: not a success
	}
	fb = window.Read(status, h, time.Now())
	switch {
	case fb.Signal == window.Accepted, fb.Signal == window.Saturated, fb.Signal == window.Evicted:
	case fb.Reason != "":
		reason = fb.Reason
	case copyErr != nil:
		reason = "body"
	default:
		reason = "status " + strconv.Itoa(resp.StatusCode)
	}
	if _, err := headroom.Parse(h); errors.Is(err, headroom.ErrMalformed) {
		malformed = true
	}
	if !cfg.useHeadroom {
		fb.Headroom, fb.HeadroomKnown = 0, false
	} else if fb.HeadroomKnown {
		headroomValue = strconv.FormatInt(fb.Headroom, 10)
	}
	return fb, reason, malformed, headroomValue
}
