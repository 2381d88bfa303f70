package main

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/headroom/window"
)

// fakeBand is an http.RoundTripper that plays a router with one band:
// slots requests served at once for service each, up to capacity more
// queued, rejections with 429 rejected-saturated and a Retry-After, and on
// success the headroom (capacity - queued, sampled as the response leaves)
// and the queue duration. It runs on the synctest clock.
type fakeBand struct {
	slots      chan struct{}
	capacity   int
	service    time.Duration
	retryAfter string
	// headroom, if set, replaces the header value the band would send.
	headroom func() string

	mu          sync.Mutex
	queued      int
	concurrent  int
	maxInFlight int
	sends       []time.Time
	rejections  []time.Time
	firstHeader http.Header
}

func newFakeBand(slots, capacity int, service time.Duration) *fakeBand {
	return &fakeBand{slots: make(chan struct{}, slots), capacity: capacity, service: service, retryAfter: "1"}
}

func response(status int, h http.Header) *http.Response {
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("{}"))}
}

func (b *fakeBand) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.sends = append(b.sends, time.Now())
	if b.firstHeader == nil {
		b.firstHeader = req.Header.Clone()
	}
	enqueued := time.Now()
	select {
	case b.slots <- struct{}{}:
		// A free slot: dispatched without queueing.
		b.concurrent++
		b.maxInFlight = max(b.maxInFlight, b.concurrent)
		b.mu.Unlock()
	default:
		if b.queued >= b.capacity {
			b.rejections = append(b.rejections, time.Now())
			b.mu.Unlock()
			return response(http.StatusTooManyRequests, http.Header{
				"X-Llm-D-Request-Dropped-Reason": {window.ReasonSaturated},
				"Retry-After":                    {b.retryAfter},
			}), nil
		}
		b.queued++
		b.concurrent++
		b.maxInFlight = max(b.maxInFlight, b.concurrent)
		b.mu.Unlock()
		b.slots <- struct{}{}
		b.mu.Lock()
		b.queued--
		b.mu.Unlock()
	}
	waited := time.Since(enqueued)
	time.Sleep(b.service)

	b.mu.Lock()
	hr := strconv.Itoa(b.capacity - b.queued)
	if b.headroom != nil {
		hr = b.headroom()
	}
	b.concurrent--
	b.mu.Unlock()
	<-b.slots
	return response(http.StatusOK, http.Header{
		"X-Llm-D-Flow-Band-Headroom-Requests": {hr},
		"X-Llm-D-Flow-Queue-Duration-Ms":      {strconv.FormatInt(waited.Milliseconds(), 10)},
	}), nil
}

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("dispatcher", flag.ContinueOnError) }

func testLiveConfig(requests int, useHeadroom bool) liveConfig {
	fs := newFlagSet()
	c := liveFlags(fs)
	c.target = "http://band.test"
	c.requests = requests
	c.duration = 10 * time.Minute
	c.useHeadroom = useHeadroom
	return *c
}

func TestLiveCompletesEveryJob(t *testing.T) {
	for _, useHeadroom := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			band := newFakeBand(4, 8, 100*time.Millisecond)
			stats, err := runLive(context.Background(), testLiveConfig(200, useHeadroom), &http.Client{Transport: band}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("headroom %v: sent %d, accepted %d, saturated %d, failed %d, max at band %d", useHeadroom, stats.Sent, stats.Accepted, stats.Saturated, stats.Failed, band.maxInFlight)
			if stats.Accepted != 200 || stats.Sent != stats.Accepted+stats.Saturated+stats.Evicted+stats.Failed {
				t.Errorf("headroom %v: %+v: want 200 accepted and every send accounted for", useHeadroom, stats)
			}
			if stats.Saturated != len(band.rejections) {
				t.Errorf("headroom %v: counted %d capacity rejections, the band sent %d", useHeadroom, stats.Saturated, len(band.rejections))
			}
			if !useHeadroom && stats.Saturated == 0 {
				t.Error("AIMD without headroom never probed the band's capacity")
			}
			if got := band.firstHeader.Get(defaultPriorityHdr); got != strconv.Itoa(defaultLiveBand) {
				t.Errorf("%s: %q, want %d", defaultPriorityHdr, got, defaultLiveBand)
			}
			if got := band.firstHeader.Get(defaultFairnessHdr); got != defaultLiveFairness {
				t.Errorf("%s: %q, want %q", defaultFairnessHdr, got, defaultLiveFairness)
			}
		})
	}
}

// A band that always reports no headroom gets one request at a time (the
// window's minimum probe); without the header the window grows.
func TestLiveHonoursHeadroom(t *testing.T) {
	for _, useHeadroom := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			band := newFakeBand(100, 1000, 50*time.Millisecond)
			band.headroom = func() string { return "0" }
			if _, err := runLive(context.Background(), testLiveConfig(50, useHeadroom), &http.Client{Transport: band}, io.Discard); err != nil {
				t.Fatal(err)
			}
			switch {
			case useHeadroom && band.maxInFlight != 1:
				t.Errorf("headroom 0: up to %d requests at once, want 1", band.maxInFlight)
			case !useHeadroom && band.maxInFlight < 8:
				t.Errorf("headroom ignored: at most %d requests at once, want the window to grow", band.maxInFlight)
			}
		})
	}
}

func TestLiveHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		band := newFakeBand(1, 0, 10*time.Millisecond) // no queue: a second request is rejected
		band.retryAfter = "3"
		cfg := testLiveConfig(20, true)
		cfg.window.Initial = 4
		if _, err := runLive(context.Background(), cfg, &http.Client{Transport: band}, io.Discard); err != nil {
			t.Fatal(err)
		}
		if len(band.rejections) == 0 {
			t.Fatal("no rejection: the test does not exercise Retry-After")
		}
		for _, rej := range band.rejections {
			for _, sent := range band.sends {
				if sent.After(rej) && sent.Before(rej.Add(3*time.Second)) {
					t.Fatalf("a request was sent %v after a rejection with Retry-After: 3", sent.Sub(rej))
				}
			}
		}
	})
}

func TestDispatchOneClassifies(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		header    http.Header
		signal    window.Signal
		reason    string
		headroom  int64
		known     bool
		malformed bool
		queue     time.Duration
		retry     time.Duration
	}{
		{"accepted", 200, http.Header{"X-Llm-D-Flow-Band-Headroom-Requests": {"19"}, "X-Llm-D-Flow-Queue-Duration-Ms": {"250"}},
			window.Accepted, "", 19, true, false, 250 * time.Millisecond, 0},
		{"accepted, provisional headroom name", 200, http.Header{"X-Llm-D-Flow-Band-Headroom": {"4"}},
			window.Accepted, "", 4, true, false, 0, 0},
		{"accepted, malformed headroom", 200, http.Header{"X-Llm-D-Flow-Band-Headroom-Requests": {"-3"}},
			window.Accepted, "", 0, false, true, 0, 0},
		{"accepted, two headroom values", 200, http.Header{"X-Llm-D-Flow-Band-Headroom-Requests": {"3", "4"}},
			window.Accepted, "", 0, false, true, 0, 0},
		{"saturated", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-saturated"}, "Retry-After": {"2"}},
			window.Saturated, "", 0, false, false, 0, 2 * time.Second},
		{"evicted while running", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"evicted-priority"}, "Retry-After": {"3"}},
			window.Evicted, "", 0, false, false, 0, 3 * time.Second},
		{"429 without a reason", 429, http.Header{},
			window.Saturated, "", 0, false, false, 0, 0},
		{"ttl expired", 429, http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-ttl-expired"}},
			window.Expired, "rejected-ttl-expired", 0, false, false, 0, 0},
		{"shutting down", 503, http.Header{"X-Llm-D-Request-Dropped-Reason": {"rejected-shutting-down"}},
			window.Failed, "rejected-shutting-down", 0, false, false, 0, 0},
		{"server error", 500, http.Header{},
			window.Failed, "status 500", 0, false, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
				return response(tc.status, tc.header), nil
			})}
			fb, reason, malformed, _ := dispatchOne(context.Background(), testLiveConfig(1, true), client, "http://band.test/")
			if fb.Signal != tc.signal || reason != tc.reason || malformed != tc.malformed ||
				fb.HeadroomKnown != tc.known || fb.Headroom != tc.headroom || fb.QueueDelay != tc.queue || fb.RetryAfter != tc.retry {
				t.Errorf("got %+v, reason %q, malformed %v", fb, reason, malformed)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Over real loopback HTTP: headers travel, every job completes.
func TestLiveOverLoopback(t *testing.T) {
	var mu sync.Mutex
	bands := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		bands[r.Header.Get(defaultPriorityHdr)]++
		mu.Unlock()
		w.Header().Set(headroom.HeaderName, "5")
		w.Header().Set(window.QueueDurationHeader, "0")
		io.WriteString(w, `{"choices":[]}`)
	}))
	defer srv.Close()
	cfg := testLiveConfig(30, true)
	cfg.target = srv.URL
	cfg.duration = time.Minute
	stats, err := runLive(context.Background(), cfg, srv.Client(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Accepted != 30 || stats.LastHeadroom != "5" {
		t.Errorf("%+v: want 30 accepted, last headroom 5", stats)
	}
	if bands[strconv.Itoa(defaultLiveBand)] != stats.Sent {
		t.Errorf("band header counts %v for %d requests", bands, stats.Sent)
	}
}

// The summary lists the other failures in a fixed order, whatever the map's.
func TestLiveSummaryOrder(t *testing.T) {
	s := liveStats{Failed: 6, OtherReasons: map[string]int{
		"transport": 1, "rejected-ttl-expired": 2, "status 500": 3, "body": 4, "cancelled": 5, "rejected-shutting-down": 6,
	}}
	want := " [body: 4] [cancelled: 5] [rejected-shutting-down: 6] [rejected-ttl-expired: 2] [status 500: 3] [transport: 1]"
	for range 20 {
		var b strings.Builder
		printLiveSummary(&b, s, window.State{})
		if !strings.Contains(b.String(), want) {
			t.Fatalf("summary %q, want the reasons sorted:%s", b.String(), want)
		}
	}
}

func TestLiveConfigErrors(t *testing.T) {
	for name, mod := range map[string]func(*liveConfig){
		"requests": func(c *liveConfig) { c.requests = -1 },
		"duration": func(c *liveConfig) { c.duration = -time.Second },
	} {
		cfg := testLiveConfig(10, true)
		mod(&cfg)
		client := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			t.Errorf("%s: a request was sent under an invalid configuration", name)
			return response(http.StatusOK, http.Header{}), nil
		})}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := runLive(ctx, cfg, client, io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got error %v, want one naming it", name, err)
		}
	}
}
