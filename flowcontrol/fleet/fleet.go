// Package fleet shares flow-control state between the replicas of a
// router, so that a fleet of replicas admits as one controller would.
//
// Each replica publishes its own [Replica] state — per band, how many
// requests wait, how many are in flight, and how fast they arrive — to a
// [Store], and reads back every live replica's latest state. A [Store] is
// the medium: [Memory] holds it in-process (tests, the simulator, replicas
// in one process); a network store, such as the Redis backend of the
// product module examples/deploy, holds it for replicas in many processes.
// The contract is the same either way: Publish replaces the replica's
// previous state and keeps it for a lease, Read returns every replica whose
// lease has not run out, and nothing read back is trusted until
// [Replica.Check] accepts it.
//
// That contract — each replica publishes its own value under a lease and
// reads every live replica's — is also the one llm-d-router's
// CrossReplicaSyncer plugin seam asks of its storage (set a value per
// endpoint once a period, read the live replicas' values and fold them),
// so one backend can serve both: the Redis backend's Syncer keeps such
// plugin state beside the fleet's, on the same Redis, prefix and leases.
//
// A [View] is one replica's side of it: it publishes the replica's state
// and reads the fleet's once a period ([View.Run]), divides the fleet's
// in-flight budget among the replicas by demand, in strict priority across
// bands, and enforces this replica's share with a gate ([View.Gate]) whose
// admission loads a count per band and makes one atomic add: the fleet
// view costs the admission path no lock and no store round trip.
// [View.Reader] reports the fleet's room in each band,
// for the headroom header; [View.Status] says how old the view is, whether
// it has fallen back to the static share ⌊budget/replicas⌋, and why. The
// consistency promise — how far the fleet may over-admit, how stale its
// headroom may be, what a partition does — is written, with its formulas,
// on [View.Gate].
//
// The package imports flowcontrol/gate and capacity of Sluice's, and no
// dependency; a controller uses it through its gate, so flowcontrol does
// not import it.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Bounds on what a replica publishes and what a store returns. A value
// read back from a shared store is hostile until checked: these bound its
// size, so a corrupt or crafted entry can neither grant unbounded room nor
// make a reader allocate without limit.
const (
	// MaxIDLength is the longest replica ID, in bytes.
	MaxIDLength = 128
	// MaxBands is the most bands one replica's state may carry.
	MaxBands = 64
	// MaxReplicas is the most replicas a store returns from one Read; a
	// store that holds more returns an error rather than a partial fleet.
	MaxReplicas = 1024
	// MaxCount is the largest waiting or in-flight count of one band:
	// 2^40, the clamp the controller applies to costs and sizes.
	MaxCount int64 = 1 << 40
	// MaxDemand is the largest arrival rate of one band, in requests per
	// second.
	MaxDemand = 1e9
)

// Band is one priority band's state on one replica.
type Band struct {
	// Priority identifies the band, as flowcontrol.BandConfig.Priority.
	Priority int
	// Waiting is the number of requests queued in the band.
	Waiting int64
	// InFlight is the number of the band's requests admitted and not yet
	// done.
	InFlight int64
	// Demand is the band's recent arrival rate on the replica, in
	// requests per second (smoothed by the publisher).
	Demand float64
}

// Replica is one replica's published state.
type Replica struct {
	// ID names the replica; unique within the fleet, 1 to MaxIDLength
	// bytes of printable UTF-8.
	ID string
	// At is when the replica took these counts, on its own clock.
	At time.Time
	// Bands holds one entry per band, in strictly descending priority.
	Bands []Band
}

// ErrInvalid is wrapped by every error [Replica.Check] returns.
var ErrInvalid = errors.New("fleet: invalid replica state")

// Check reports whether r is a state a reader may use: an ID of 1 to
// MaxIDLength bytes of printable UTF-8, a non-zero At, at most MaxBands
// bands in strictly descending priority, counts in [0, MaxCount] and a
// finite demand in [0, MaxDemand]. The error wraps [ErrInvalid] and names
// the field.
func (r Replica) Check() error {
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
	}
	switch {
	case r.ID == "" || len(r.ID) > MaxIDLength:
		return bad("ID", "length %d, want 1 to %d bytes", len(r.ID), MaxIDLength)
	case !printable(r.ID):
		return bad("ID", "%q is not printable UTF-8", r.ID)
	case r.At.IsZero():
		return bad("At", "zero time")
	case len(r.Bands) > MaxBands:
		return bad("Bands", "%d bands, want at most %d", len(r.Bands), MaxBands)
	}
	for i, b := range r.Bands {
		switch {
		case i > 0 && b.Priority >= r.Bands[i-1].Priority:
			return bad(fmt.Sprintf("Bands[%d].Priority", i), "%d after %d, want strictly descending", b.Priority, r.Bands[i-1].Priority)
		case b.Waiting < 0 || b.Waiting > MaxCount:
			return bad(fmt.Sprintf("Bands[%d].Waiting", i), "%d outside [0, %d]", b.Waiting, MaxCount)
		case b.InFlight < 0 || b.InFlight > MaxCount:
			return bad(fmt.Sprintf("Bands[%d].InFlight", i), "%d outside [0, %d]", b.InFlight, MaxCount)
		case math.IsNaN(b.Demand) || b.Demand < 0 || b.Demand > MaxDemand:
			return bad(fmt.Sprintf("Bands[%d].Demand", i), "%v outside [0, %g]", b.Demand, MaxDemand)
		}
	}
	return nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// Store is the medium replicas share. Implementations are safe for
// concurrent use.
//
// Publish replaces r.ID's previous state with r and keeps it for lease
// after the store receives it; a replica that stops publishing disappears
// from Read once its lease runs out, so its share returns to the others.
// Publish refuses a state that [Replica.Check] refuses.
//
// Read returns the latest state of every replica whose lease has not run
// out, the caller's own included, sorted by ID; at most [MaxReplicas]
// entries, each accepted by [Replica.Check] (a store drops, and may
// report, an entry that is not). A store that cannot answer returns an
// error; the caller then falls back to its static share.
type Store interface {
	Publish(ctx context.Context, r Replica, lease time.Duration) error
	Read(ctx context.Context) ([]Replica, error)
}
