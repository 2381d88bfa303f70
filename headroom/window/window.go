// Package window sizes the dispatch window of an upstream asynchronous
// dispatcher for one priority band of a router, from the feedback the router
// puts on its responses.
//
// The window is AIMD, in the manner of TCP congestion control, and also
// heeds what a router says that TCP never hears: Retry-After, the band's
// headroom and the time spent queued.
//
//   - Slow start: from the initial size the window grows by one per accepted
//     request (doubling per round trip) until the slow-start threshold.
//   - Additive increase: above the threshold it grows by 1/size per accepted
//     request, about one per round trip.
//   - Multiplicative decrease, once per flight: a capacity rejection
//     (`x-llm-d-request-dropped-reason: rejected-saturated`) multiplies the
//     window by the backoff factor. Rejections of requests sent before that
//     decrease belong to the same flight and do not shrink it again.
//   - Retry-After closes the window: no request may start until it has passed.
//   - Headroom: when a response carries `x-llm-d-flow-band-headroom-requests`,
//     the requests the window admits are capped at the requests in flight plus
//     that headroom, so the dispatcher fills the room the band reports instead
//     of probing for it with rejections. While the cap binds the window does
//     not grow. A capacity rejection counts as an observation of no headroom;
//     a success without the header lifts the cap. The cap is advisory, like
//     the header: other tenants may take the same room.
//   - Queue delay: an accepted request that waited longer than the target in
//     the router's queue (`x-llm-d-flow-queue-duration-ms`) holds growth and
//     ends slow start.
//
// A [Window] never reads the clock: every method that needs the time takes it
// as a parameter, so the window runs the same on a wall clock and in a
// simulation.
package window

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Signal classifies a response for the window. The zero Signal counts as
// [Failed].
type Signal int

const (
	// Accepted: the router admitted the request and it completed.
	Accepted Signal = iota + 1
	// Saturated: the router rejected the request because the band (or the
	// router) was at capacity. It is the only signal that shrinks the window.
	Saturated
	// Failed: any other failure (an expired TTL, a server error, a transport
	// error). The window frees the request's slot and infers nothing else.
	Failed
)

// String returns "accepted", "saturated" or "failed".
func (s Signal) String() string {
	switch s {
	case Accepted:
		return "accepted"
	case Saturated:
		return "saturated"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Signal(%d)", int(s))
}

// Feedback is what one response told the dispatcher.
type Feedback struct {
	// Signal classifies the response.
	Signal Signal
	// Headroom is the band headroom the router reported, valid when
	// HeadroomKnown is true.
	Headroom      uint64
	HeadroomKnown bool
	// QueueDelay is the time the request spent in the router's queue, valid
	// when QueueDelayKnown is true.
	QueueDelay      time.Duration
	QueueDelayKnown bool
	// RetryAfter is the router's Retry-After; 0 means none.
	RetryAfter time.Duration
}

// Config configures a [Window]. Zero fields take the defaults named below.
type Config struct {
	// Initial is the starting window size. Default 1.
	Initial int
	// Min is the smallest size the window takes, whatever the feedback:
	// with Min 1 a dispatcher keeps probing with one request even when the
	// band reports no headroom. Default 1.
	Min int
	// Max is the largest size the window grows to. Default: no limit.
	Max int
	// SlowStartThreshold is where slow start ends at first. Default: no
	// threshold (slow start lasts until the first decrease or held growth).
	SlowStartThreshold int
	// Backoff is the factor a decrease multiplies the window by, in (0, 1).
	// Default 0.5.
	Backoff float64
	// TargetQueueDelay is the queue delay above which growth is held.
	// Default 0: queue delay never holds growth.
	TargetQueueDelay time.Duration
}

// Ticket identifies one request sent under a [Window]. Pass it back to
// [Window.Done] exactly once.
type Ticket struct {
	seq uint64
}

// State is a snapshot of a [Window], for display and tests.
type State struct {
	// Limit is the number of requests the window lets be in flight now.
	Limit int
	// InFlight is the number of requests sent and not yet done.
	InFlight int
	// CongestionWindow is the AIMD window before the headroom cap.
	CongestionWindow float64
	// SlowStartThreshold is where additive increase takes over; +Inf when
	// none has been set.
	SlowStartThreshold float64
	// HeadroomCap is the cap from the last headroom observation, valid when
	// Capped is true.
	HeadroomCap int64
	Capped      bool
	// ClosedUntil is the end of the last Retry-After closure (zero if none).
	ClosedUntil time.Time
	// Decreases counts multiplicative decreases.
	Decreases int
}

// Window is the dispatch window of one band. Call [Window.TryAcquire] before
// sending a request and [Window.Done] with the response's [Feedback].
//
// A Window is safe for concurrent use. Build one with [New].
type Window struct {
	mu  sync.Mutex
	cfg Config

	cwnd     float64 // AIMD window
	ssthresh float64 // slow-start threshold; +Inf when unset

	// capLimit = in flight + headroom at the last observation; the limit
	// never exceeds it while capped. It is an absolute count of requests in
	// flight, so requests sent after the observation use it up.
	capLimit int64
	capped   bool

	inFlight int
	// Requests are numbered as they are sent. A decrease sets recoverSeq to
	// the next number: rejections of requests numbered below it belong to
	// the flight that caused the decrease and are not counted again.
	nextSeq    uint64
	recoverSeq uint64

	closedUntil time.Time
	decreases   int
}

// New returns a window configured by cfg, or an error naming the first
// invalid field.
func New(cfg Config) (*Window, error) {
	if cfg.Min == 0 {
		cfg.Min = 1
	}
	if cfg.Initial == 0 {
		cfg.Initial = cfg.Min
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 0.5
	}
	switch {
	case cfg.Min < 1:
		return nil, fmt.Errorf("window: Min %d is below 1", cfg.Min)
	case cfg.Max < 0:
		return nil, fmt.Errorf("window: Max %d is negative", cfg.Max)
	case cfg.Max > 0 && cfg.Max < cfg.Min:
		return nil, fmt.Errorf("window: Max %d is below Min %d", cfg.Max, cfg.Min)
	case cfg.Initial < cfg.Min || (cfg.Max > 0 && cfg.Initial > cfg.Max):
		return nil, fmt.Errorf("window: Initial %d is outside [Min %d, Max %d]", cfg.Initial, cfg.Min, cfg.Max)
	case cfg.SlowStartThreshold < 0:
		return nil, fmt.Errorf("window: SlowStartThreshold %d is negative", cfg.SlowStartThreshold)
	case !(cfg.Backoff > 0 && cfg.Backoff < 1):
		return nil, fmt.Errorf("window: Backoff %v is outside (0, 1)", cfg.Backoff)
	case cfg.TargetQueueDelay < 0:
		return nil, fmt.Errorf("window: TargetQueueDelay %v is negative", cfg.TargetQueueDelay)
	}
	w := &Window{cfg: cfg, cwnd: float64(cfg.Initial), ssthresh: math.Inf(1)}
	if cfg.SlowStartThreshold > 0 {
		w.ssthresh = float64(cfg.SlowStartThreshold)
	}
	return w, nil
}

// TryAcquire reports whether one more request may be sent at now and, if so,
// counts it in flight and returns its ticket. It refuses while a Retry-After
// closure lasts and while the requests in flight fill the limit.
func (w *Window) TryAcquire(now time.Time) (Ticket, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Before(w.closedUntil) || w.inFlight >= w.limit() {
		return Ticket{}, false
	}
	w.inFlight++
	t := Ticket{seq: w.nextSeq}
	w.nextSeq++
	return t, true
}

// Done records the response to the request of ticket t, received at now, and
// frees its slot. Calling Done more often than TryAcquire succeeded panics.
func (w *Window) Done(now time.Time, t Ticket, fb Feedback) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inFlight == 0 {
		panic("window: Done without a request in flight")
	}
	w.inFlight--

	if fb.RetryAfter > 0 {
		if until := now.Add(fb.RetryAfter); until.After(w.closedUntil) {
			w.closedUntil = until
		}
	}
	switch {
	case fb.HeadroomKnown:
		w.capLimit = satAdd(int64(w.inFlight), fb.Headroom)
		w.capped = true
	case fb.Signal == Accepted:
		// A success without the header: the band stopped advertising
		// (unbounded, or a router without the feature).
		w.capped = false
	case fb.Signal == Saturated && w.capped:
		// Rejections carry no header, but a capacity rejection is itself an
		// observation: the band had no room. Without this the cap would
		// keep the room of an older response, and a dispatcher reopening
		// after Retry-After would spend it on more rejections.
		w.capLimit = int64(w.inFlight)
	}

	switch fb.Signal {
	case Accepted:
		w.grow(fb)
	case Saturated:
		if t.seq >= w.recoverSeq {
			w.ssthresh = max(w.cwnd*w.cfg.Backoff, float64(w.cfg.Min))
			w.cwnd = w.ssthresh
			w.recoverSeq = w.nextSeq
			w.decreases++
		}
	}
}

func (w *Window) grow(fb Feedback) {
	if fb.QueueDelayKnown && w.cfg.TargetQueueDelay > 0 && fb.QueueDelay > w.cfg.TargetQueueDelay {
		// The band is queueing our requests longer than we want: hold, and
		// leave slow start so growth resumes additively once it drains.
		w.ssthresh = min(w.ssthresh, w.cwnd)
		return
	}
	if w.capped && w.cwnd >= float64(w.capLimit) {
		// The headroom cap, not the window, limits us: growing the window
		// would only let it run away from what the band can take.
		return
	}
	if w.cwnd < w.ssthresh {
		w.cwnd++
	} else {
		w.cwnd += 1 / w.cwnd
	}
	if w.cfg.Max > 0 {
		w.cwnd = min(w.cwnd, float64(w.cfg.Max))
	}
}

// limit is the number of requests that may be in flight: the AIMD window,
// capped by headroom, never below Min. w.mu must be held.
func (w *Window) limit() int {
	n := int64(w.cwnd)
	if w.capped {
		n = min(n, w.capLimit)
	}
	return int(max(n, int64(w.cfg.Min)))
}

// Limit returns the number of requests the window lets be in flight now,
// whether or not a Retry-After closure lasts.
func (w *Window) Limit() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.limit()
}

// InFlight returns the number of requests sent and not yet done.
func (w *Window) InFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inFlight
}

// ClosedUntil returns the time until which a Retry-After keeps the window
// closed; it is zero or in the past when the window is open.
func (w *Window) ClosedUntil() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closedUntil
}

// State returns a snapshot of the window.
func (w *Window) State() State {
	w.mu.Lock()
	defer w.mu.Unlock()
	return State{
		Limit:              w.limit(),
		InFlight:           w.inFlight,
		CongestionWindow:   w.cwnd,
		SlowStartThreshold: w.ssthresh,
		HeadroomCap:        w.capLimit,
		Capped:             w.capped,
		ClosedUntil:        w.closedUntil,
		Decreases:          w.decreases,
	}
}

// satAdd returns a + b, saturating at the largest int64.
func satAdd(a int64, b uint64) int64 {
	if b > uint64(math.MaxInt64-a) {
		return math.MaxInt64
	}
	return a + int64(b)
}
