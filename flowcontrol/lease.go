package flowcontrol

import "time"

// lease is the part of an Admission that the common one does without: what
// a metered gate hears of it (metered.go), and, when the controller may
// revoke it, its revocation (reclaim.go). An admission has one only when
// its controller needs either; leases come in slabs, as Admissions do.
type lease struct {
	metered
	revocable
}

// startLease is started for a controller whose admissions may need a
// lease.
func (c *FlowController) startLease(b *band, key FlowKey, tag any, cost int64, now time.Time) *lease {
	track := c.reclaim != nil && c.reclaim.tracks(b)
	if c.meter == nil && !track {
		return nil
	}
	l := c.slab.lease()
	if track {
		if now.IsZero() {
			now = c.clock.Now()
		}
		c.reclaim.track(l, b, key, tag, c.sinceEpoch(now))
	}
	if c.meter != nil {
		c.meter.took(c, l, b, cost, now)
	}
	return l
}

// slab hands out fresh Admissions, and leases, made in slabs: see
// admissionsPerSlab. Guarded by the controller's mu.
type slab struct {
	admissions []Admission
	leases     []lease
}

// admission returns an unused, zero Admission.
func (s *slab) admission() *Admission {
	if len(s.admissions) == 0 {
		s.admissions = make([]Admission, admissionsPerSlab)
	}
	a := &s.admissions[0]
	s.admissions = s.admissions[1:]
	return a
}

// lease returns an unused, zero lease.
func (s *slab) lease() *lease {
	if len(s.leases) == 0 {
		s.leases = make([]lease, admissionsPerSlab)
	}
	l := &s.leases[0]
	s.leases = s.leases[1:]
	return l
}
