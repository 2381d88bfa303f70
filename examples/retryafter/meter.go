package main

import (
	"math"
	"time"
)

// The wall-clock meter's windows: at least rateWindow, folded into a
// moving average of time constant rateHorizon, the same as the busy-time
// meter's (flowcontrol.DrainMeter, the controller's own).
const (
	rateWindow  = time.Second
	rateHorizon = 5 * time.Second
	// maxRetryAfter caps every design's Retry-After.
	maxRetryAfter = 30 * time.Second
)

// wallMeter is the controller's old rate meter: dispatches per second of
// wall time, counting every dispatch. A window closes at the first reading
// at least rateWindow after it opened — however long that is, so a window
// that spans an idle stretch averages the idle time in.
type wallMeter struct {
	start    time.Time
	count    int64
	avg      float64
	measured bool
}

func (m *wallMeter) dispatched(now time.Time) {
	if m.start.IsZero() {
		m.start = now // the first dispatch opens the first window
		return
	}
	m.count++
	m.roll(now)
}

func (m *wallMeter) roll(now time.Time) {
	if m.start.IsZero() {
		return
	}
	span := now.Sub(m.start)
	if span < rateWindow {
		return
	}
	m.avg, m.measured = fold(m.avg, m.measured, float64(m.count)/span.Seconds(), span)
	m.start, m.count = now, 0
}

// rate returns the average at now, and whether there is one.
func (m *wallMeter) rate(now time.Time) (float64, bool) {
	m.roll(now)
	return m.avg, m.measured
}

// fold moves avg towards the rate r of a window of length span.
func fold(avg float64, measured bool, r float64, span time.Duration) (float64, bool) {
	if !measured {
		return r, true
	}
	return avg + (r-avg)*-math.Expm1(-float64(span)/float64(rateHorizon)), true
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}
