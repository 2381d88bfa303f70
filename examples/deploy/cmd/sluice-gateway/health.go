package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// How the pool probes a backend it cannot reach. A probe is a TCP
// connection, closed at once: the check that failed was the proxy's own
// dial, so a dial that succeeds is the check that it would work now.
const (
	// probeTimeout bounds one probe's dial.
	probeTimeout = time.Second
	// probeBackoffMin is the wait before probing a backend that has just
	// refused a connection; each failed probe doubles it up to
	// probeBackoffMax. A backend that comes back is so found within
	// probeBackoffMax (plus a dial), well inside the gateway's default
	// no-endpoints TTL, at the cost of one dial a second per dead backend.
	probeBackoffMin = 100 * time.Millisecond
	probeBackoffMax = time.Second
)

// DefaultUnhealthyThreshold is how many metrics scrapes of a backend in
// a row must fail before it is down (-unhealthy-threshold), as Envoy's
// health checks and Kubernetes' probes count three failures: with the
// default 50 ms interval one late or failed scrape on a busy host
// outlasts the 200 ms staleness threshold, and is not an outage.
const DefaultUnhealthyThreshold = 3

// DefaultUnhealthyWindow is how old a backend's last good scrape may grow
// before it is down however few scrapes failed (-unhealthy-window): it
// catches scrapes that fail slowly, a long -scrape timeout's. With the
// default timing three failures come well within it.
const DefaultUnhealthyWindow = 2 * time.Second

// health is what the pool knows of whether a backend can take requests.
// A backend is up while it is reachable and its scrapes are not stale:
//   - it is unreachable from the moment it joins the pool until a
//     connection to it succeeds (a probe's, a scrape's, or a proxied
//     request's), and again from the moment the proxy fails to open one
//     (passive: the request that found out gets a 502);
//   - its scrapes are stale once the pool's unhealthy threshold of them
//     (3) have failed in a row and they have failed for the pool's stale
//     threshold (the saturation gate's metricsStalenessThreshold), counted
//     from the reading of the last good one or from its joining the pool,
//     or once they have failed for the unhealthy window (2 s), however
//     few; until one succeeds.
//
// The pool tells its [gate.EndpointsGate] how many backends are up after
// every change, so that with none the controller ends waiting requests
// rejected-no-endpoints after the no-endpoints TTL, whatever the gate; and
// watch probes the unreachable ones.
type health struct {
	reachable atomic.Bool
	reached   atomic.Bool            // a connection ever succeeded
	dialErr   atomic.Pointer[string] // the latest failed connection's error
	stale     atomic.Bool            // the scrapes are stale
	// scrapeFailures counts the scrapes failed since the last good one.
	scrapeFailures atomic.Int64
	// lastScrape is the time of the last good scrape's reading, or of
	// the backend's joining the pool, in Unix nanoseconds.
	lastScrape atomic.Int64
	probing    atomic.Bool // a probe of the backend runs
}

// up reports whether the backend can take requests.
func (h *health) up() bool { return h.reachable.Load() && !h.stale.Load() }

// downReason says why a backend that is not up is down, for /readyz.
func (h *health) downReason(now time.Time) string {
	if !h.reachable.Load() {
		if e := h.dialErr.Load(); e != nil {
			return "unreachable (" + *e + ")"
		}
		return "not reached yet"
	}
	since := time.Unix(0, h.lastScrape.Load())
	return fmt.Sprintf("its metrics scrapes have failed for %s (%d in a row)",
		now.Sub(since).Round(time.Millisecond), h.scrapeFailures.Load())
}

// dialError marks an error of the pool's dial, so that the proxy's error
// handler can tell a backend it could not connect to from one that failed
// once connected.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// markDialErrors wraps dial so that its failures are dialErrors, except
// those of a dial its caller gave up on: a client that went away says
// nothing of the backend.
func markDialErrors(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil && ctx.Err() == nil {
			return nil, &dialError{err}
		}
		return c, err
	}
}

// hostPort returns u's host and port, the port from the scheme when u has
// none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// unreachable records that a connection to b failed with err.
func (p *pool) unreachable(b *backend, err error) {
	msg := err.Error()
	b.dialErr.Store(&msg)
	if b.reachable.Swap(false) {
		p.log.Warn("backend down: a connection to it failed", "backend", b.name, "error", err)
		p.healthChanged()
	}
	p.poke()
}

// reach records that a connection to b succeeded.
func (p *pool) reach(b *backend) {
	if b.reachable.Load() {
		return
	}
	b.reached.Store(true)
	if !b.reachable.Swap(true) {
		p.log.Info("backend reachable", "backend", b.name)
		p.healthChanged()
	}
}

// scrapeOK records a good scrape of b, read at readAt.
func (p *pool) scrapeOK(b *backend, readAt time.Time) {
	b.lastScrape.Store(readAt.UnixNano())
	p.reach(b)
	if b.stale.Swap(false) {
		p.log.Info("backend's metrics scrapes succeed again", "backend", b.name)
		p.healthChanged()
	}
}

// scrapeStale checks, after a failed scrape of b, whether b is now down:
// its scrapes have failed unhealthyThreshold times in a row and for the
// stale threshold, or for the unhealthy window however few times.
func (p *pool) scrapeStale(b *backend) {
	if p.stale <= 0 || b.stale.Load() {
		return
	}
	age := p.clock.Now().Sub(time.Unix(0, b.lastScrape.Load()))
	failures := b.scrapeFailures.Load()
	byCount := failures >= int64(p.unhealthyThreshold) && age >= p.stale
	byAge := p.unhealthyWindow > 0 && age >= p.unhealthyWindow
	if (byCount || byAge) && !b.stale.Swap(true) {
		p.log.Warn("backend down: its metrics scrapes have failed", "backend", b.name, "for", age, "in_a_row", failures,
			"threshold", p.unhealthyThreshold, "window", p.unhealthyWindow)
		p.healthChanged()
	}
}

// healthChanged tells the endpoints gate how many backends are up.
func (p *pool) healthChanged() {
	if p.endpoints == nil {
		return
	}
	// Under the lock, so that the count set last is one read last: a
	// change made meanwhile calls again.
	p.healthMu.Lock()
	defer p.healthMu.Unlock()
	up := 0
	for _, b := range p.list() {
		if b.up() {
			up++
		}
	}
	p.endpoints.SetAvailable(up)
}

// ready returns nil while a backend is up, and otherwise why each one is
// down. The text is for an operator's readiness probe, so it names the
// backends, as the log does; no body a client receives does.
func (p *pool) ready() error {
	list := p.list()
	now := p.clock.Now()
	why := make([]string, 0, len(list))
	for _, b := range list {
		if b.up() {
			return nil
		}
		why = append(why, b.name+" "+b.downReason(now))
	}
	return fmt.Errorf("no backend is up (%d down: %s)", len(list), strings.Join(why, "; "))
}

// poke wakes watch, without waiting.
func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// watch probes each unreachable backend until it is reached or leaves
// the pool, or until ctx ends; it returns once every probe has. A backend
// that joins the pool is probed at once; one that refuses a connection
// after probeBackoffMin, then with the wait doubling up to
// probeBackoffMax. At most one probe runs per backend.
func (p *pool) watch(ctx context.Context) {
	var probes sync.WaitGroup
	defer probes.Wait()
	for {
		for _, b := range p.list() {
			if !b.reachable.Load() && b.probing.CompareAndSwap(false, true) {
				probes.Go(func() {
					p.probe(ctx, b)
					b.probing.Store(false)
					if !b.reachable.Load() {
						p.poke() // it went down again as the probe ended
					}
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
	}
}

// probeAll dials every backend not yet reached once, all at once, and
// returns when each dial has ended (within probeTimeout), so that a gateway
// starts serving with its backends' health known: /readyz answers for what
// it can reach from the first request on, rather than 503 until the first
// background probe.
func (p *pool) probeAll(ctx context.Context) {
	var dials sync.WaitGroup
	for _, b := range p.list() {
		if b.reachable.Load() {
			continue
		}
		dials.Go(func() {
			dialCtx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			c, err := p.dial(dialCtx, "tcp", b.addr)
			if err != nil {
				msg := err.Error()
				b.dialErr.Store(&msg)
				return
			}
			c.Close()
			p.reach(b)
		})
	}
	dials.Wait()
}

// probe dials b until a dial succeeds, b is reached otherwise (a scrape),
// b leaves the pool, or ctx ends.
func (p *pool) probe(ctx context.Context, b *backend) {
	var wait time.Duration
	if b.reached.Load() {
		wait = probeBackoffMin // it has just failed: not again at once
	}
	for {
		if wait > 0 && !p.sleep(ctx, wait) {
			return
		}
		if b.reachable.Load() || p.find(b.name) != b {
			return
		}
		dialCtx, cancel := context.WithTimeout(ctx, probeTimeout)
		c, err := p.dial(dialCtx, "tcp", b.addr)
		cancel()
		if err == nil {
			c.Close()
			p.reach(b)
			return
		}
		if ctx.Err() != nil {
			return
		}
		msg := err.Error()
		b.dialErr.Store(&msg)
		p.log.Debug("backend probe failed", "backend", b.name, "error", err)
		wait = min(max(2*wait, probeBackoffMin), probeBackoffMax)
	}
}

// sleep waits d on the pool's clock, and reports false if ctx ended first.
func (p *pool) sleep(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	t := p.clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}
