package main

import (
	"math"
	"time"
)

// Rate measurement, shared by every design: windows of at least rateWindow,
// folded into a moving average of time constant rateHorizon.
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

// busyMeter measures how fast a scope's queue drains while it has waiters:
// dispatches from the queue per second of busy time. Its clock stops while
// the queue is empty, so idle stretches neither lower the rate nor inflate
// what is projected from it.
type busyMeter struct {
	busySince time.Time     // zero while idle
	busyTime  time.Duration // busy time of the open window before busySince
	count     int64
	avg       float64
	measured  bool
}

// setBusy records whether the scope's queue has waiters at now.
func (m *busyMeter) setBusy(now time.Time, busy bool) {
	switch {
	case busy && m.busySince.IsZero():
		m.busySince = now
	case !busy && !m.busySince.IsZero():
		m.busyTime += now.Sub(m.busySince)
		m.busySince = time.Time{}
		m.roll(now)
	}
}

// dispatched counts a dispatch from the queue, made while it was busy.
func (m *busyMeter) dispatched(now time.Time) {
	m.count++
	m.roll(now)
}

func (m *busyMeter) roll(now time.Time) {
	span := m.busyTime
	if !m.busySince.IsZero() {
		span += now.Sub(m.busySince)
	}
	if span < rateWindow {
		return
	}
	m.avg, m.measured = fold(m.avg, m.measured, float64(m.count)/span.Seconds(), span)
	m.busyTime, m.count = 0, 0
	if !m.busySince.IsZero() {
		m.busySince = now
	}
}

func (m *busyMeter) rate(now time.Time) (float64, bool) {
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
