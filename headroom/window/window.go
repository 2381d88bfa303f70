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
	// Saturated: the router refused the request for want of room
	// (rejected-saturated, a displacement by a fairer flow included, or a
	// 429 without a reason). The window shrinks.
	Saturated
	// Expired: the request waited in the router's queue for its whole TTL
	// (rejected-ttl-expired). The window shrinks: it queues more than the
	// band starts in time.
	Expired
	// Failed: any other failure (a cancellation, a shutdown, a server or
	// transport error). The window frees the request's slot and infers
	// nothing else.
	Failed
	// Evicted: the router dispatched the request, then revoked it while
	// it ran to give its room to a request of a higher band (evicted,
	// evicted-priority: in-flight eviction, or a band taking back its
	// guaranteed share). The window treats it as [Saturated]: the room
	// the band's requests held was wanted, as when the band refuses for
	// want of it.
	Evicted
)

// String returns "accepted", "saturated", "expired", "failed" or
// "evicted".
func (s Signal) String() string {
	switch s {
	case Accepted:
		return "accepted"
	case Saturated:
		return "saturated"
	case Expired:
		return "expired"
	case Failed:
		return "failed"
	case Evicted:
		return "evicted"
	}
	return fmt.Sprintf("Signal(%d)", int(s))
}

// Retryable reports whether a request answered with s should be sent
// again once the window lets it ([Window.TryAcquire], which waits out the
// response's Retry-After): true for [Saturated], [Expired] and [Evicted],
// the router's own refusals and evictions (429), after which the same
// request may succeed when the band has room again. A [Failed] request is
// not: nothing is known of why it failed (a cancellation, a shutdown, a
// server error, a stream cut off), so whether to send it again is the
// dispatcher's own policy. An [Accepted] one is done.
func (s Signal) Retryable() bool {
	return s == Saturated || s == Expired || s == Evicted
}

// Feedback is what one response told the dispatcher. [Read] builds it from
// a response's status and headers.
type Feedback struct {
	// Signal classifies the response.
	Signal Signal
	// Reason is the router's x-llm-d-request-dropped-reason, "" if none.
	Reason string
	// Headroom is the band headroom the router reported, valid when
	// HeadroomKnown is true. A negative value counts as 0.
	Headroom      int64
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
	// Initial is the starting window size. Default Min.
	Initial int
	// Min is the smallest size the window takes, whatever the feedback:
	// with Min 1 a dispatcher keeps probing with one request even when the
	// band reports no headroom. Default 1.
	Min int
	// Max is the largest size the window grows to. Default: no limit.
	Max int
	// Backoff is the factor a decrease multiplies the window by, in (0, 1).
	// Default 0.5.
	Backoff float64
	// Share is the part of the reported headroom the window may fill, in
	// (0, 1]: after a response reporting headroom h with n requests in
	// flight, at most n + ⌊Share × h⌋ may be in flight. Default 0.5. With
	// 1 the window fills the band to the last place, and any request that
	// reaches the band first (another tenant's, another dispatcher's) turns
	// its next request into a refusal; with 0.5 it approaches the limit
	// geometrically and leaves the last place free.
	Share float64
	// TargetQueueDelay is the time in the router's queue above which an
	// accepted request shrinks the window by a tenth (once per flight).
	// Default 0: queue delay is not read. Set it below the band's TTL to
	// keep requests from expiring in the queue.
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
	// HeadroomCap is the cap from the last headroom observation (requests in
	// flight then, plus the headroom), valid when Capped is true.
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
	// the next number: congestion signals of requests numbered below it
	// belong to the flight that caused the decrease and are not counted
	// again.
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
	if cfg.Share == 0 {
		cfg.Share = 0.5
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
	case !(cfg.Backoff > 0 && cfg.Backoff < 1):
		return nil, fmt.Errorf("window: Backoff %v is outside (0, 1)", cfg.Backoff)
	case !(cfg.Share > 0 && cfg.Share <= 1):
		return nil, fmt.Errorf("window: Share %v is outside (0, 1]", cfg.Share)
	case cfg.TargetQueueDelay < 0:
		return nil, fmt.Errorf("window: TargetQueueDelay %v is negative", cfg.TargetQueueDelay)
	}
	return &Window{cfg: cfg, cwnd: float64(cfg.Initial), ssthresh: math.Inf(1)}, nil
}

// TryAcquire reports whether one more request may be sent at now and, if so,
// counts it in flight and returns its ticket. It refuses while the requests
// in flight fill the limit, and until the latest Retry-After has passed.
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
//
// What each part of fb does:
//   - Retry-After closes the window until it has passed (a later closure is
//     never shortened); the window's size is not reset.
//   - Headroom caps the limit at the requests now in flight plus
//     ⌊Share × headroom⌋; a success without headroom lifts the cap, and a
//     refusal for capacity (Saturated) of a window that reads headroom
//     counts as headroom 0, even when it carries a headroom header with
//     room: the header is the band's room, and a capacity wider than the
//     band (the controller's) may be the one that was full.
//   - Evicted counts as Saturated in all of this: a higher band took the
//     room the request held, so there is none for a new one.
//   - Saturated, Evicted and Expired multiply the window by Backoff; an
//     accepted request that queued longer than TargetQueueDelay multiplies
//     it by 0.9; each at most once per flight (the requests sent before
//     the previous decrease). Any other accepted request grows it, unless
//     the headroom cap binds. Failed changes nothing but the count in
//     flight.
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

	refused := fb.Signal == Saturated || fb.Signal == Evicted
	switch {
	case refused && (w.capped || fb.HeadroomKnown):
		// A refusal for want of room is itself an observation: there was
		// none, whatever a headroom header on it says. The header is the
		// band's room only (llm-d's definition), and a controller-wide
		// capacity can be full while the band still has room, so the
		// refusal wins. An eviction says the same: a higher band needed
		// the room this band's request held. A window that never saw
		// headroom stays uncapped: its AIMD decrease answers the refusal.
		w.capLimit = int64(w.inFlight)
		w.capped = true
	case fb.HeadroomKnown:
		room := int64(w.cfg.Share * float64(max(fb.Headroom, 0)))
		w.capLimit = satAdd(int64(w.inFlight), room)
		w.capped = true
	case fb.Signal == Accepted:
		// A success without the header: the band stopped advertising
		// (unbounded, or a router without the feature).
		w.capped = false
	}

	switch fb.Signal {
	case Accepted:
		if fb.QueueDelayKnown && w.cfg.TargetQueueDelay > 0 && fb.QueueDelay > w.cfg.TargetQueueDelay {
			w.decrease(t, queueDelayBackoff)
		} else {
			w.grow()
		}
	case Saturated, Evicted, Expired:
		w.decrease(t, w.cfg.Backoff)
	}
}

// queueDelayBackoff is the decrease for a request that queued longer than
// the target: gentler than for a refusal, because the band still took it.
const queueDelayBackoff = 0.9

// decrease multiplies the window by the backoff, unless t belongs to the
// flight a decrease has already answered. w.mu must be held.
func (w *Window) decrease(t Ticket, factor float64) {
	if t.seq < w.recoverSeq {
		return
	}
	w.ssthresh = max(w.cwnd*factor, float64(w.cfg.Min))
	w.cwnd = w.ssthresh
	w.recoverSeq = w.nextSeq
	w.decreases++
}

// grow opens the window after an unmarked success. w.mu must be held.
func (w *Window) grow() {
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

// satAdd returns a + b for b >= 0, saturating at the largest int64.
func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
