package fleet

import (
	"fmt"
	"time"
)

// Fallback says why a [View] uses the static share ⌊Budget/Replicas⌋
// rather than a share of the fleet's budget computed from the fleet's
// state; [Synced] when it does not.
type Fallback int

// The reasons for a fallback.
const (
	// Synced: the view is fresh and the share is computed from it.
	Synced Fallback = iota
	// FallbackNotRead: fewer than two rounds in a row have succeeded
	// since the view was created or since the store came back, so other
	// replicas may not have published yet.
	FallbackNotRead
	// FallbackStale: the last successful read is older than Config.Stale
	// (the store errors, or answers too slowly).
	FallbackStale
)

// String returns the reason's name, for a metric label or a readiness
// message: "synced", "not-read" or "stale".
func (f Fallback) String() string {
	switch f {
	case Synced:
		return "synced"
	case FallbackNotRead:
		return "not-read"
	case FallbackStale:
		return "stale"
	}
	return fmt.Sprintf("Fallback(%d)", int(f))
}

// Status is what a [View] knows of itself: what /readyz and metrics show.
type Status struct {
	// At is when the status was computed (the end of the last round), on
	// the view's clock.
	At time.Time
	// Age is how old the fleet's state was at At: the time since the
	// last successful read. 0 before the first.
	Age time.Duration
	// Fallback says whether the share is the static one, and why.
	Fallback Fallback
	// Err is the last round's error, nil when it succeeded.
	Err error
	// Live is the number of replicas in the view, this one included; 0
	// before the first successful read.
	Live int
	// Ignored is the number of entries the last read ignored: a state
	// [Replica.Check] refuses, or whose At is outside the skew bounds
	// (see Config.MaxSkew). An entry under this replica's own ID is
	// skipped, not counted: this replica's live state stands for it.
	Ignored int
	// Budget is the fleet's in-flight budget, Config.Budget.
	Budget int64
	// Share is this replica's in-flight budget now: the most requests its
	// gate lets it have in flight.
	Share int64
	// Bands holds, per band, the fleet's state and this replica's part
	// of it, highest priority first; nil in fallback.
	Bands []BandShare
}

// BandShare is one band's part of a [Status].
type BandShare struct {
	// Priority identifies the band.
	Priority int
	// Waiting and InFlight are the fleet's totals, this replica's live
	// counts included.
	Waiting, InFlight int64
	// Granted is the part of the fleet's budget the band is granted, in
	// strict priority: min(its fleet demand, what the bands above left).
	Granted int64
	// Share is this replica's part of Granted, in proportion to its
	// demand in the band (waiting + in flight).
	Share float64
	// OtherWaiting is the requests waiting in the band on the other
	// replicas, as of the last read: what [View.Reader] adds to this
	// replica's live queue.
	OtherWaiting int64
	// OtherInFlight is the requests in flight in the band on the other
	// replicas, as of the last read (Config.PriorityScheduling counts
	// them).
	OtherInFlight int64
	// Capacity is this replica's part of the band's fleet-wide request
	// capacity (Config.Capacities), as [View.Capacity] returns it; -1
	// when the band has none.
	Capacity int64
}
