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
// backoff until it answers again, and down once its scrapes have failed
// for the staleness threshold; the endpoints gate hears every change.
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
		if endpoints.Available() != 0 || !strings.Contains(p.ready().Error(), "its metrics scrapes have failed for 200ms") {
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
