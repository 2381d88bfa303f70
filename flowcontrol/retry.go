package flowcontrol

import (
	"math"
	"time"
)

// Drain measurement for Retry-After.
const (
	// rateWindow is the least busy time over which a drain rate is
	// measured; shorter spans are too noisy to project from.
	rateWindow = time.Second
	// rateHorizon is the time constant of the moving average, in busy time:
	// a window of length w moves the average by the fraction
	// 1-exp(-w/rateHorizon).
	rateHorizon = 5 * time.Second
	// maxRetryAfter caps every Retry-After.
	maxRetryAfter = 30 * time.Second
)

// PriorServiceTime is the service time Retry-After assumes before a scope
// has a measured drain rate: until then the scope is taken to drain at the
// controller's admissions in flight (at least one) per PriorServiceTime,
// so the first burst's refusals are spread as later ones are. With n in
// flight and no promise outstanding, the k-th refusal of one instant is
// told k × PriorServiceTime ÷ max(n, 1), rounded up to whole seconds,
// between 1s and 30s. examples/retryafter compares the value with no
// prior, constants and other service times on a cold start; its README
// has the command and the table.
const PriorServiceTime = time.Second

// drainMeter measures how fast a scope's queue — one band's, or all bands'
// together — drains while it has waiters, and turns that into Retry-After
// values for the requests the scope refuses.
//
// Only busy time counts: the clock of a window runs while the scope has
// waiters and stops while it has none, so an idle stretch neither lowers
// the rate nor inflates the next Retry-After. Dispatches counted are those
// from the queue; a request that starts at once was not waiting for room.
// A window closes — its rate folded into the average — at the first
// reading at least rateWindow of busy time after it opened.
//
// A drainMeter is guarded by the controller's lock.
type drainMeter struct {
	busySince time.Time     // when the current busy stretch began; zero while idle
	busyTime  time.Duration // busy time of the open window before busySince
	count     int64         // dispatches from the queue in the open window
	avg       float64       // smoothed dispatches per second of busy time
	measured  bool          // a window has closed: avg is a measurement

	// promised is the latest return time handed to a refused request; the
	// next refusal is promised a later one.
	promised time.Time
}

// busy records that the scope's queue has waiters again, at now.
func (m *drainMeter) busy(now time.Time) { m.busySince = now }

// idle records that the scope's queue emptied at now.
func (m *drainMeter) idle(now time.Time) {
	if !m.busySince.IsZero() {
		m.busyTime += max(now.Sub(m.busySince), 0)
		m.busySince = time.Time{}
	}
	m.roll(now)
}

// dispatched counts one dispatch from the queue at now.
func (m *drainMeter) dispatched(now time.Time) {
	m.count++
	m.roll(now)
}

// roll closes the open window at now if it holds at least rateWindow of
// busy time.
func (m *drainMeter) roll(now time.Time) {
	span := m.busyTime
	if !m.busySince.IsZero() {
		span += max(now.Sub(m.busySince), 0)
	}
	if span < rateWindow {
		return
	}
	r := float64(m.count) / span.Seconds()
	if m.measured {
		m.avg += (r - m.avg) * -math.Expm1(-float64(span)/float64(rateHorizon))
	} else {
		m.avg, m.measured = r, true
	}
	m.busyTime, m.count = 0, 0
	if !m.busySince.IsZero() {
		m.busySince = now
	}
}

// retryAfter returns the Retry-After of a request the scope refuses at now,
// while inFlight admissions are outstanding.
//
// Each refusal is promised the moment one more place should have freed
// after the moment promised to the refusal before it — one expected drain
// interval, 1/rate, apart, and never sooner than one interval from now — so
// the refused requests come back spread over the time the scope needs to
// make room for them, not all at once. Before a rate is measured, the rate
// is the prior: max(inFlight, 1) per PriorServiceTime. The value is in
// whole seconds, rounded up, between 1s and maxRetryAfter; a scope
// measured not to drain at all gets maxRetryAfter.
func (m *drainMeter) retryAfter(now time.Time, inFlight int) time.Duration {
	return m.promise(now, inFlight, 0, 0)
}

// retryAfterExpiry returns the Retry-After of a request that expired at
// now after waiting waited, with ahead requests still queued in the
// scope. It is promised a place as retryAfter promises one, but starting
// no sooner than ahead ÷ rate − waited from now: the time what waits now
// takes to drain, less the wait the request can bear again (its TTL, just
// waited out). Told to come back sooner, it would rejoin a queue it cannot
// clear in time and expire again.
func (m *drainMeter) retryAfterExpiry(now time.Time, inFlight int, ahead int64, waited time.Duration) time.Duration {
	return m.promise(now, inFlight, ahead, waited)
}

// promise promises the next place: see retryAfter and retryAfterExpiry.
func (m *drainMeter) promise(now time.Time, inFlight int, ahead int64, waited time.Duration) time.Duration {
	m.roll(now)
	rate := m.avg
	if !m.measured {
		rate = float64(max(inFlight, 1)) / PriorServiceTime.Seconds()
	}
	if rate <= 0 {
		return maxRetryAfter
	}
	// Compared in seconds first: a rate that has decayed towards 0 gives
	// an interval past the range of a Duration.
	interval := maxRetryAfter
	if secs := 1 / rate; secs < maxRetryAfter.Seconds() {
		interval = time.Duration(secs * float64(time.Second))
	}
	at := now
	if behind := float64(ahead)/rate - waited.Seconds(); behind > 0 {
		at = now.Add(time.Duration(min(behind, maxRetryAfter.Seconds()) * float64(time.Second)))
	}
	if m.promised.After(at) {
		at = m.promised
	}
	at = at.Add(interval)
	if limit := now.Add(maxRetryAfter); at.After(limit) {
		at = limit
	}
	m.promised = at
	return max(ceilSeconds(at.Sub(now)), time.Second)
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}
