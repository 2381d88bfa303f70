package main

import (
	"time"

	"github.com/sluicegate/sluice/headroom/window"
)

// asyncGate re-implements llm-d-async's AIMD dispatch gate from its
// documented behaviour only (no code of it is used or copied):
//
//   - a refusal for capacity (rejected-saturated, or a 429 without a
//     reason) halves the window;
//   - rejected-ttl-expired multiplies it by 0.9;
//   - a Retry-After closes the band until it has passed and resets the
//     window to its minimum;
//   - a response with headroom caps the window at the requests in flight
//     plus that headroom;
//   - with a queue-delay target, a success that waited longer than the
//     target multiplies the window by 0.9 (the documentation says the queue
//     duration is read only when a target is set; how it acts is our
//     reading: as an expiry foretold).
//
// Growth is not part of that description. We give it the same growth as
// Sluice's window — one per success up to the first decrease (slow start),
// then one per window of successes — so that the comparison isolates how
// the two read the router's signals.
type asyncGate struct {
	min, max    float64
	target      time.Duration
	cwnd        float64
	ssthresh    float64
	inFlight    int
	closedUntil time.Time
}

func newAsyncGate(maxWindow int, target time.Duration) *asyncGate {
	return &asyncGate{min: 1, max: float64(maxWindow), target: target, cwnd: 1, ssthresh: float64(maxWindow)}
}

func (g *asyncGate) acquire(now time.Time) (window.Ticket, bool) {
	if now.Before(g.closedUntil) || g.inFlight >= int(g.cwnd) {
		return window.Ticket{}, false
	}
	g.inFlight++
	return window.Ticket{}, true
}

func (g *asyncGate) done(now time.Time, _ window.Ticket, fb window.Feedback) {
	g.inFlight--
	switch fb.Signal {
	case window.Accepted:
		if g.target > 0 && fb.QueueDelayKnown && fb.QueueDelay > g.target {
			g.scale(0.9)
		} else if g.cwnd < g.ssthresh {
			g.cwnd = min(g.cwnd+1, g.max)
		} else {
			g.cwnd = min(g.cwnd+1/g.cwnd, g.max)
		}
	case window.Saturated, window.Evicted:
		g.scale(0.5)
	case window.Expired:
		g.scale(0.9)
	}
	if fb.RetryAfter > 0 {
		g.closedUntil = maxTime(g.closedUntil, now.Add(fb.RetryAfter))
		g.cwnd = g.min
	}
	if fb.HeadroomKnown {
		g.cwnd = max(min(g.cwnd, float64(g.inFlight)+float64(max(fb.Headroom, 0))), g.min)
	}
}

func (g *asyncGate) scale(f float64) {
	g.cwnd = max(g.cwnd*f, g.min)
	g.ssthresh = g.cwnd
}

func (g *asyncGate) closed() time.Time { return g.closedUntil }

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
