package fleet

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Gate returns the gate that enforces this replica's share of the fleet's
// budget: it admits a request of any band while the requests in flight
// through it are fewer than [View.Share]. Use it as the controller's gate
// in place of gate.MaxInFlight(Budget), or inside [gate.All] beside gates
// that read the model servers. It is the same gate on every call; it
// serves one controller.
//
// # How the budget is divided
//
// Each round (once a Config.Period) the view reads every live replica's
// state and computes, on every replica alike:
//
//	D_p   = Σ_r (waiting_rp + inFlight_rp)            the fleet's demand in band p
//	A_p   = min(D_p, C − Σ_{q>p} A_q)                 strict priority, highest band first
//	x_r   = Σ_p A_p · (waiting_rp + inFlight_rp) / D_p
//	      + (C − Σ_p A_p) · λ_r / Σ_j λ_j             the rest, by smoothed arrival rate λ
//	S_r   = round(x_r)                                largest remainder: Σ_r S_r = C
//	share = min(S_self, C − Σ_{j≠self} inFlight_j)    never count on a slot another holds
//
// So the budget goes where the fleet's highest waiting band is: a replica
// whose highest waiting band is lower than another's yields — its share
// falls below what it holds, it starts nothing more, and the slots its
// requests give back go to the replica with the higher band waiting at the
// next round. Within a band, replicas get the budget in proportion to
// their demand there, as one controller's queue would serve them; within a
// replica, the controller keeps strict priority and its band's fairness
// policy. Fairness between tenants fleet-wide therefore holds to this
// bound: each replica is fair among the tenants it holds (its policy's own
// bound), and each replica's share of a band is proportional to its
// demand there, so a tenant's fleet-wide share of a saturated band differs
// from its share on one controller with the same queues by at most the
// rounding of one slot per replica, plus the demand that changed within
// one round. Where requests are spread over replicas at random or in turn,
// that is the whole difference.
//
// # The consistency promise
//
// Let C be Config.Budget, P the Period, δ the store's delay (from a
// publish to when a read sees it) and R the replicas. A replica admits
// only while its in-flight count is below its share, and its share is at
// most C minus what the others held as of the states it read. Let r be
// the replica that made the fleet's latest admission, at t; its view held
// each other replica j's state as j published it at most P + δ before r's
// read, itself at most P before t. So, while every replica is synced:
//
//	fleet in flight ≤ C + Σ_{j≠r} a_j(2P + δ)
//
// where a_j(w) is the number of admissions replica j made in the last w:
// the fleet over-admits by at most what the other replicas admitted
// within two periods and the store's delay, and not at all when every
// replica read the same states since its last admission. The headroom
// [View.Reader] reports is the fleet's: this replica's queue live, the
// others' at most P + δ + the read's own time old. A replica cut off from
// the store keeps its last share until its view is older than
// Config.Stale, then takes the static ⌊C/R⌋; the others keep counting its
// last state until its lease (Config.Lease) runs out, and then divide C
// among themselves. With k replicas cut off, once their leases have run
// out:
//
//	fleet in flight ≤ C + k·⌊C/R⌋
//
// (the price of returning a dead replica's share within a lease: the view
// cannot tell a dead replica from a cut-off one). In fallback no request
// is refused for any reason but the static share. When the store comes
// back, a replica uses the fleet's state again after two successful
// rounds in a row (so that every live replica has published since), that
// is within 2P of the store's return.
//
// The gate is a [gate.BoundGate]: it nudges the controller when its share
// grows, and reads the controller's bands and, when the controller is a
// [capacity.Reader] (a flowcontrol.FlowController is), its queues, which
// [View.Run] publishes. It is a [gate.SaturationDetector] whose saturation
// is in flight ÷ share. Its TryAcquire and Release read and add atomics:
// no lock, no store round trip, no allocation.
func (v *View) Gate() gate.Gate { return &v.gate }

// viewGate is a View's gate. Its methods are called with the controller's
// lock held (a gate's contract), so that its counts change one at a time;
// the round reads them from another goroutine, hence the atomics.
type viewGate struct {
	v        *View
	bound    atomic.Pointer[gate.Controller]
	table    atomic.Pointer[bandTable]
	inFlight atomic.Int64
}

// bandTable holds the gate's counts per band, in descending priority; the
// last slot counts requests of a priority no band has (none, with a
// flowcontrol.FlowController).
type bandTable struct {
	prios  []int
	counts []bandCount // len(prios)+1
}

type bandCount struct {
	inFlight atomic.Int64
	admits   atomic.Int64 // admissions ever, for the arrival rate
}

// Bind records c, the controller the gate serves, and refuses a second.
func (g *viewGate) Bind(c gate.Controller) error {
	if !g.bound.CompareAndSwap(nil, &c) && *g.bound.Load() != c {
		return errors.New("fleet: the View's gate serves another controller already")
	}
	return nil
}

func (g *viewGate) String() string { return fmt.Sprintf("fleet.View(%s).Gate", g.v.cfg.ID) }

// TryAcquire takes a slot if fewer than the share are in flight.
func (g *viewGate) TryAcquire(priority int) bool {
	if g.inFlight.Load() >= g.v.share.Load() {
		return false
	}
	c := g.count(priority)
	c.inFlight.Add(1)
	c.admits.Add(1)
	g.inFlight.Add(1)
	return true
}

// Release gives a slot back. It panics if more come back than were
// granted.
func (g *viewGate) Release(priority int) {
	g.count(priority).inFlight.Add(-1)
	if g.inFlight.Add(-1) < 0 {
		panic("fleet: View's gate released more slots than it granted")
	}
}

// Saturation returns the requests in flight ÷ the share; 1 for a share
// of 0.
func (g *viewGate) Saturation() float64 {
	share := g.v.share.Load()
	if share <= 0 {
		return 1
	}
	return float64(g.inFlight.Load()) / float64(share)
}

// count returns band priority's counts, adding the band to the table when
// it is new. Called with the controller's lock held: a new table is built
// by one caller at a time, and copies counts nobody changes meanwhile.
func (g *viewGate) count(priority int) *bandCount {
	t := g.table.Load()
	if t != nil {
		if i, ok := slices.BinarySearchFunc(t.prios, priority, descending); ok {
			return &t.counts[i]
		}
	}
	prios := append([]int{priority}, g.controllerPriorities()...)
	if t != nil {
		prios = append(prios, t.prios...)
	}
	slices.SortFunc(prios, descending)
	prios = slices.Compact(prios)
	if len(prios) > MaxBands {
		// Too many bands to publish: count the rest in the last slot.
		if t == nil {
			t = &bandTable{counts: make([]bandCount, 1)}
			g.table.Store(t)
		}
		return &t.counts[len(t.prios)]
	}
	n := &bandTable{prios: prios, counts: make([]bandCount, len(prios)+1)}
	if t != nil {
		for i, p := range t.prios {
			j, _ := slices.BinarySearchFunc(prios, p, descending)
			n.counts[j].inFlight.Store(t.counts[i].inFlight.Load())
			n.counts[j].admits.Store(t.counts[i].admits.Load())
		}
	}
	g.table.Store(n)
	i, _ := slices.BinarySearchFunc(prios, priority, descending)
	return &n.counts[i]
}

func descending(a, b int) int { return cmp.Compare(b, a) }

// counts returns band priority's requests in flight and admissions ever.
func (g *viewGate) counts(priority int) (inFlight, admits int64) {
	if t := g.table.Load(); t != nil {
		if i, ok := slices.BinarySearchFunc(t.prios, priority, descending); ok {
			return t.counts[i].inFlight.Load(), t.counts[i].admits.Load()
		}
	}
	return 0, 0
}

// priorities returns the bands to publish, highest first: the
// controller's and any the gate has counted.
func (g *viewGate) priorities() []int {
	prios := slices.Clone(g.controllerPriorities())
	if t := g.table.Load(); t != nil {
		prios = append(prios, t.prios...)
	}
	slices.SortFunc(prios, descending)
	return slices.Compact(prios)
}

func (g *viewGate) controllerPriorities() []int {
	if c := g.bound.Load(); c != nil {
		return (*c).Priorities()
	}
	return nil
}

// reader returns the bound controller as a capacity.Reader, or nil.
func (g *viewGate) reader() capacity.Reader {
	if c := g.bound.Load(); c != nil {
		r, _ := (*c).(capacity.Reader)
		return r
	}
	return nil
}

// nudge tells the bound controller that the share grew.
func (g *viewGate) nudge() {
	if c := g.bound.Load(); c != nil {
		(*c).Nudge()
	}
}
