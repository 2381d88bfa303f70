package main

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// fakeDialer stands for the network: it refuses while refuse is set, and
// counts the dials.
type fakeDialer struct {
	mu     sync.Mutex
	refuse bool
	dials  int
}

func (d *fakeDialer) dial(context.Context, string, string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dials++
	if d.refuse {
		return nil, errors.New("connection refused")
	}
	c, peer := net.Pipe()
	peer.Close()
	return c, nil
}

func (d *fakeDialer) set(refuse bool) (dials int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refuse = refuse
	return d.dials
}

// The pool's health on a fake clock: a backend is down until a probe
// reaches it, down from the connection that fails, probed with a bounded
// backoff until it answers again, and down once three scrapes in a row
// have failed for the staleness threshold; the endpoints gate hears every
// change.
func TestPoolHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stale = 200 * time.Millisecond
		u, _ := url.Parse("http://10.0.0.7:8000")
		d := &fakeDialer{}
		endpoints := gate.Endpoints(0)
		p := newPool([]*url.URL{u}, poolConfig{endpoints: endpoints, stale: stale, dial: d.dial})
		b := p.list()[0]
		if b.addr != "10.0.0.7:8000" || hostPort(&url.URL{Scheme: "https", Host: "h"}) != "h:443" {
			t.Fatalf("addresses %q, %q", b.addr, hostPort(&url.URL{Scheme: "https", Host: "h"}))
		}
		if endpoints.Available() != 0 || p.ready() == nil || !strings.Contains(p.ready().Error(), "not reached yet") {
			t.Fatalf("before any connection: available %d, ready %v", endpoints.Available(), p.ready())
		}
		ctx, cancel := context.WithCancel(context.Background())
		watched := make(chan struct{})
		go func() { p.watch(ctx); close(watched) }()
		synctest.Wait()
		if endpoints.Available() != 1 || p.ready() != nil {
			t.Fatalf("once probed: available %d, ready %v", endpoints.Available(), p.ready())
		}

		// The proxy's dial fails: down at once, and probed while it refuses.
		d.set(true)
		p.unreachable(b, errors.New("dial tcp 10.0.0.7:8000: connect: connection refused"))
		if endpoints.Available() != 0 || !strings.Contains(p.ready().Error(), "no backend is up (1 down: http://10.0.0.7:8000 unreachable") {
			t.Fatalf("after a refused connection: available %d, ready %v", endpoints.Available(), p.ready())
		}
		before := d.set(true)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// 100, 200, 400 and 800 ms, then one a second: 13 probes in 10 s.
		if n := d.set(true) - before; n < 10 || n > 14 {
			t.Errorf("%d probes in 10s of refusals, want about 13: the backoff doubles from %s to %s", n, probeBackoffMin, probeBackoffMax)
		}
		if endpoints.Available() != 0 {
			t.Fatal("up while every dial is refused")
		}
		d.set(false)
		time.Sleep(probeBackoffMax)
		synctest.Wait()
		if endpoints.Available() != 1 {
			t.Fatalf("not up again %s after it answers", probeBackoffMax)
		}

		// Scrapes: failures younger than the threshold leave it up.
		p.scraped(b.name, 0, time.Now())
		time.Sleep(stale - time.Millisecond)
		p.scrapeFailed(b.name)
		if endpoints.Available() != 1 || !b.failing.Load() {
			t.Fatalf("down after failing scrapes younger than %s", stale)
		}
		time.Sleep(time.Millisecond)
		p.scrapeFailed(b.name)
		if endpoints.Available() != 1 {
			t.Fatalf("down after %s of failing scrapes, but only 2 in a row", stale)
		}
		p.scrapeFailed(b.name) // the third in a row
		if endpoints.Available() != 0 || !strings.Contains(p.ready().Error(), "its metrics scrapes have failed for 200ms (3 in a row)") {
			t.Fatalf("scrapes failing for %s: available %d, ready %v", stale, endpoints.Available(), p.ready())
		}
		p.scraped(b.name, 0, time.Now())
		if endpoints.Available() != 1 || p.ready() != nil {
			t.Fatalf("after a good scrape: available %d, ready %v", endpoints.Available(), p.ready())
		}

		// A reload: a new backend is probed at once; a removed one is not.
		u2, _ := url.Parse("http://10.0.0.8:8000")
		d.set(true)
		p.set([]*url.URL{u, u2})
		synctest.Wait()
		if endpoints.Available() != 1 {
			t.Fatalf("with a new, refusing backend: available %d, want 1", endpoints.Available())
		}
		p.set([]*url.URL{u})
		before = d.set(true)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := d.set(true) - before; n > 1 {
			t.Errorf("%d probes of a backend removed from the pool", n)
		}
		cancel()
		<-watched
	})
}

// pick sends nothing to a backend that is down while another is up, even
// one with fewer requests in flight.
func TestPickPrefersUp(t *testing.T) {
	var urls []*url.URL
	for _, raw := range []string{"http://127.0.0.1:1", "http://127.0.0.1:2"} {
		u, _ := url.Parse(raw)
		urls = append(urls, u)
	}
	p := newPool(urls, poolConfig{})
	b := p.list()
	p.reach(b[1])
	b[1].inFlight.Store(5)
	for range 4 {
		if got := p.pick(); got != b[1] {
			t.Fatalf("picked %s, which is down, over %s, which is up", got.name, b[1].name)
		}
	}
	b[1].failing.Store(true) // up with a failed scrape still beats down
	if got := p.pick(); got != b[1] {
		t.Fatalf("picked %s, which is down, over %s, which is up", got.name, b[1].name)
	}
}

// fakeClock is a pool's injected clock: Now moves only by advance, and no
// AfterFunc fires (the tests below run no probes).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) AfterFunc(time.Duration, func()) gate.Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) Stop() bool { return true }

// twoBackends returns a pool of two backends on clock clk, both reached
// and scraped, and the endpoints gate it tells.
func twoBackends(t *testing.T, clk *fakeClock, cfg poolConfig) (*pool, *gate.EndpointsGate) {
	t.Helper()
	var urls []*url.URL
	for _, raw := range []string{"http://10.0.0.7:8000", "http://10.0.0.8:8000"} {
		u, _ := url.Parse(raw)
		urls = append(urls, u)
	}
	endpoints := gate.Endpoints(0)
	cfg.endpoints, cfg.clock = endpoints, clk
	p := newPool(urls, cfg)
	for _, b := range p.list() {
		p.scraped(b.name, 0, clk.Now())
	}
	if endpoints.Available() != 2 || p.ready() != nil {
		t.Fatalf("after a good scrape of each: available %d, ready %v", endpoints.Available(), p.ready())
	}
	return p, endpoints
}

// On a busy host one scrape ran late and failed, 470 ms after the last
// good one, past the 200 ms staleness threshold: both healthy backends
// were marked down, and a readiness probe with one failure would pull
// the pod (issue 31, item 9). One missed scrape is not an outage: a
// backend is down after DefaultUnhealthyThreshold (3) failed scrapes in a
// row, and up again at the next good one.
func TestOneFailedScrapeIsNotAnOutage(t *testing.T) {
	clk := newFakeClock()
	p, endpoints := twoBackends(t, clk, poolConfig{stale: 200 * time.Millisecond})
	clk.advance(470 * time.Millisecond)
	for _, b := range p.list() {
		p.scrapeFailed(b.name)
	}
	if endpoints.Available() != 2 || p.ready() != nil {
		t.Fatalf("one failed scrape each, 470ms after the last good one: available %d, ready %v; want both up", endpoints.Available(), p.ready())
	}
	clk.advance(50 * time.Millisecond)
	for _, b := range p.list() {
		p.scrapeFailed(b.name) // two in a row
	}
	if endpoints.Available() != 2 {
		t.Fatalf("two failed scrapes in a row: available %d, want 2", endpoints.Available())
	}
	p.scraped(p.list()[0].name, 0, clk.Now()) // one recovers
	clk.advance(50 * time.Millisecond)
	for _, b := range p.list() {
		p.scrapeFailed(b.name) // the first's count starts again; the second's third in a row
	}
	if endpoints.Available() != 1 || p.ready() != nil {
		t.Fatalf("the second's third failed scrape in a row: available %d, ready %v; want 1 up", endpoints.Available(), p.ready())
	}
	clk.advance(200 * time.Millisecond) // past the staleness threshold too
	p.scrapeFailed(p.list()[0].name)
	p.scrapeFailed(p.list()[0].name)
	if endpoints.Available() != 0 || p.ready() == nil || !strings.Contains(p.ready().Error(), "3 in a row") {
		t.Fatalf("three failed scrapes in a row each: available %d, ready %v", endpoints.Available(), p.ready())
	}
	p.scraped(p.list()[1].name, 0, clk.Now())
	if endpoints.Available() != 1 || p.ready() != nil {
		t.Fatalf("after a good scrape: available %d, ready %v", endpoints.Available(), p.ready())
	}
}

// Scrapes that fail slowly (a long scrape timeout) mark a backend down
// once its last good scrape is older than the unhealthy window, however
// few the failures; the threshold is configurable.
func TestUnhealthyWindowAndThreshold(t *testing.T) {
	clk := newFakeClock()
	p, endpoints := twoBackends(t, clk, poolConfig{stale: 200 * time.Millisecond, unhealthyThreshold: 5, unhealthyWindow: 2 * time.Second})
	a, b := p.list()[0], p.list()[1]
	for range 4 {
		clk.advance(100 * time.Millisecond)
		p.scrapeFailed(a.name)
	}
	if !a.up() {
		t.Fatal("down after 4 failed scrapes, threshold 5")
	}
	clk.advance(100 * time.Millisecond)
	p.scrapeFailed(a.name)
	if a.up() {
		t.Fatal("up after 5 failed scrapes, threshold 5")
	}
	p.scraped(b.name, 0, clk.Now())
	clk.advance(2*time.Second - time.Millisecond)
	p.scrapeFailed(b.name)
	if !b.up() {
		t.Fatal("down after one failure within the window")
	}
	clk.advance(time.Millisecond)
	p.scrapeFailed(b.name)
	if b.up() || endpoints.Available() != 0 || !strings.Contains(p.ready().Error(), "its metrics scrapes have failed for 2s") {
		t.Fatalf("two failures, the last good scrape 2s old: up %v, available %d, ready %v", b.up(), endpoints.Available(), p.ready())
	}
}
