package flowcontrol

import (
	"sync/atomic"

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

	// policy is the queue's, fixed at creation: requests derive their keys
	// from it before taking the controller's lock.
	policy ordering.Policy

	// Guarded by the controller's lock.
	index int            // position in the current bandSet, for the non-empty bitset
	queue ordering.Queue // the waiting requests, in policy order
	drain drainMeter     // how fast the queue drains, for Retry-After
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
