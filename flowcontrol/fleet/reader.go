package fleet

import "github.com/sluicegate/sluice/capacity"

// Reader returns a capacity.Reader that reports the fleet's room in each
// band, for the headroom header: as the band's request capacity its
// fleet-wide one (Config.Capacities; local's when the band has none
// there), and as its queued requests local's live count plus the other
// replicas' as of the last read. In fallback it reports the static part of
// the band: the fleet-wide capacity ÷ Replicas, with local's queue. Every
// other field is local's. Like local, it takes no lock and allocates
// nothing: the other replicas' part is in the status the last round
// stored.
func (v *View) Reader(local capacity.Reader) capacity.Reader {
	return fleetReader{v: v, local: local}
}

type fleetReader struct {
	v     *View
	local capacity.Reader
}

func (f fleetReader) CapacitySnapshot(priority int) (capacity.Snapshot, error) {
	s, err := f.local.CapacitySnapshot(priority)
	if err != nil {
		return s, err
	}
	if n, ok := f.v.cfg.Capacities[priority]; ok {
		s.RequestCapacity = capacity.Bounded(n)
	}
	st := f.v.status.Load()
	if st.Fallback != Synced {
		if n, ok := s.RequestCapacity.Value(); ok {
			s.RequestCapacity = capacity.Bounded(n / int64(f.v.cfg.Replicas))
		}
		return s, nil
	}
	for _, b := range st.Bands {
		if b.Priority == priority {
			s.QueuedRequests = satAdd(s.QueuedRequests, b.OtherWaiting)
			break
		}
	}
	return s, nil
}

// Capacity returns this replica's part of band priority's fleet-wide
// request capacity Q (Config.Capacities), or capacity.Unbounded() when the
// band has none. Synced, it is what this replica holds waiting plus a part
// of the fleet's room, Q − Σ_r waiting_r: half of the room divided evenly,
// half in proportion to the band's smoothed arrival rate on each replica
// (so that no replica is left without room, which would refuse every
// arrival and keep its measured rate at 0), rounded by largest remainder;
// every replica reading the same states computes parts that sum to Q, so
// the fleet queues at most Q plus what arrived within a round. In fallback
// it is the static ⌊Q/R⌋. A router applies it to its controller's band
// after each round (Config.OnRound).
func (v *View) Capacity(priority int) capacity.Limit {
	q, ok := v.cfg.Capacities[priority]
	if !ok {
		return capacity.Unbounded()
	}
	st := v.status.Load()
	if st.Fallback != Synced {
		return capacity.Bounded(q / int64(v.cfg.Replicas))
	}
	for _, b := range st.Bands {
		if b.Priority == priority && b.Capacity >= 0 {
			return capacity.Bounded(b.Capacity)
		}
	}
	return capacity.Bounded(q / int64(max(st.Live, 1)))
}
