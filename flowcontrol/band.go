package flowcontrol

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/ordering"
)

// band is one provisioned priority band.
type band struct {
	priority int

	// Published for lock-free readers (CapacitySnapshot): the counters are
	// stored under the controller's lock after every change to the queue,
	// limits is replaced under it by ProvisionBand.
	queuedRequests atomic.Int64
	queuedBytes    atomic.Int64
	limits         atomic.Pointer[bandLimits]

	// Guarded by the controller's lock.
	index int            // position in the current bandSet, for the non-empty bitset
	queue ordering.Queue // the waiting requests, in policy order
	meter rateMeter      // dispatches per second, for Retry-After
}

// bandSet is an immutable list of the provisioned bands, highest priority
// first. ProvisionBand publishes a new set; readers load the current one
// without a lock.
type bandSet struct {
	desc []*band
}

// search returns the index of the first band whose priority is at most p,
// and whether that band's priority is p.
func (s *bandSet) search(p int) (int, bool) {
	lo, hi := 0, len(s.desc)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.desc[m].priority > p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(s.desc) && s.desc[lo].priority == p
}

// lookup returns the band of priority p, or nil.
func (s *bandSet) lookup(p int) *band {
	if i, ok := s.search(p); ok {
		return s.desc[i]
	}
	return nil
}

// Rate measurement for Retry-After.
const (
	// rateWindow is the shortest span over which a dispatch rate is
	// measured; shorter spans are too noisy to project from.
	rateWindow = time.Second
	// rateHorizon is the time constant of the moving average: a window of
	// length w moves the average by the fraction 1-exp(-w/rateHorizon).
	rateHorizon = 5 * time.Second
	// maxRetryAfter caps the Retry-After projection.
	maxRetryAfter = 30 * time.Second
)

// rateMeter is a moving average of a band's dispatches per second.
//
// It counts dispatches in an open window that starts at an instant the clock
// was read. The window closes — its rate count/length is folded into the
// average — at the first clock reading at least rateWindow after its start:
// a dispatch from the queue (which reads the clock for its queue time) or a
// Retry-After projection. Immediate dispatches only increment the count, so
// the fast path never reads the clock; their number over a window is exact,
// and so is the window's rate. Windows are therefore of irregular length, and
// the average weights each by its length.
//
// A rateMeter is guarded by the controller's lock.
type rateMeter struct {
	start    time.Time // start of the open window; zero before the first dispatch
	count    int64     // dispatches after start
	avg      float64   // smoothed dispatches per second
	measured bool      // a window has closed: avg is a measurement
}

// record counts one dispatch. now is the dispatch time, or the zero Time if
// the caller did not read the clock.
func (m *rateMeter) record(now time.Time) {
	if m.start.IsZero() {
		// The first dispatch opens the first window; rates count the
		// dispatches after it.
		if now.IsZero() {
			now = time.Now()
		}
		m.start = now
		return
	}
	m.count++
	if !now.IsZero() {
		m.roll(now)
	}
}

// roll closes the open window at now if it is at least rateWindow long.
func (m *rateMeter) roll(now time.Time) {
	if m.start.IsZero() {
		return
	}
	span := now.Sub(m.start)
	if span < rateWindow {
		return
	}
	r := float64(m.count) / span.Seconds()
	if m.measured {
		m.avg += (r - m.avg) * -math.Expm1(-float64(span)/float64(rateHorizon))
	} else {
		m.avg, m.measured = r, true
	}
	m.start, m.count = now, 0
}

// retryAfter projects how long the band needs, at its measured rate, to
// dispatch the queued requests waiting in it now: whole seconds, rounded up,
// clamped to [1s, maxRetryAfter]. It returns 0 when no rate has been
// measured.
func (m *rateMeter) retryAfter(now time.Time, queued int64) time.Duration {
	m.roll(now)
	if !m.measured {
		return 0
	}
	secs := maxRetryAfter.Seconds()
	if m.avg > 0 {
		secs = min(math.Ceil(float64(queued)/m.avg), secs)
	}
	return time.Duration(max(secs, 1)) * time.Second
}
