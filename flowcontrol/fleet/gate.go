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
// budget: it admits a request of band p while the requests in flight
// through it are fewer than [View.Share], and those of band p and the
// bands below it fewer than the part of the share granted to them — both
// plus Config.Overdraft, B, while the view is synced and a band below p
// holds one of its slots (see "The overdraft", below). Use it
// as the controller's gate in place of gate.MaxInFlight(Budget), or inside
// [gate.All] beside gates that read the model servers. It is the same gate
// on every call; it serves one controller.
//
// # How the budget is divided
//
// Each round (once a Config.Period, P) the view reads every live
// replica's state and computes, on every replica alike, with C the
// budget, d_rp = waiting_rp + inFlight_rp + λ_rp·P replica r's demand in
// band p (what it holds, and what its smoothed arrival rate λ_rp brings
// before the next round):
//
//	D_p   = Σ_r d_rp                                  the fleet's demand in band p
//	A_p   = min(D_p, C − Σ_{q>p} A_q)                 strict priority, highest band first
//	a_rp  = A_p · d_rp / D_p                          r's part of band p
//	x_r   = Σ_p a_rp + (C − Σ_p A_p) · (1/2R + λ_r / 2Σ_j λ_j)
//	                                                  the rest: half evenly, half by arrival rate
//	S_r   = round(x_r)                                largest remainder: Σ_r S_r = C
//	share = min(S_self, C − Σ_{j≠self} inFlight_j)    never count on a slot another holds
//	below_p = share − round(Σ_{q>p} a_self,q)         the most bands ≤ p may hold
//
// and admits band p while it holds fewer than share + o_p in all and
// fewer than below_p + o_p in the bands ≤ p, where o_p = B while the view
// is synced and a band below p holds one of this replica's slots, 0
// otherwise.
//
// So the budget goes where the fleet's highest waiting band is: a replica
// whose highest waiting band is lower than another's yields — its share
// falls below what it holds, it starts nothing more, and the slots its
// requests give back go to the replica with the higher band waiting at the
// next round — and a slot granted for a higher band is not taken by a
// lower one in between (but for a middle band's overdraft). Within a band,
// replicas get the budget in proportion to their demand there, as one
// controller's queue would serve them; within a replica, the controller
// keeps strict priority and its band's fairness policy. Fairness between
// tenants fleet-wide therefore holds to this bound: each replica is fair
// among the tenants it holds (its policy's own bound), and each replica's
// part of a saturated band is proportional to its demand there, within one
// slot of rounding (TestBandPartsFollowDemand), so a tenant's fleet-wide
// part of the band differs from its part on one controller with the same
// queues by at most one slot per replica plus the demand that changed
// within one round. Where requests are spread over replicas in turn or at
// random, each replica's queues are a sample of the fleet's and that is
// the whole difference.
//
// # The overdraft
//
// Between rounds each replica decides alone, and a request of a higher
// band that finds its replica's share full would wait for that replica's
// own slots, or — with flowcontrol's Eviction — revoke one of that
// replica's lower-band requests at once, for its own arrivals alone:
// with R replicas, up to R times as many decisions as one controller
// takes, each revoking requests that one controller would have let run
// while its higher band waited out the decision's grace for the next slot
// freed anywhere (examples/fleet: 1,003 revocations with 4 replicas, 733
// with one controller). With Config.Overdraft B > 0 such a request starts at
// once, up to B beyond the share, while a band below it holds one of
// this replica's slots: one controller would have given it the next slot
// the fleet frees, and the next rounds make the view agree — they count
// it in its band's demand, so the lower bands' parts shrink fleet-wide
// and their next ends are not refilled. The fleet is then over C by at
// most B per replica that uses it, until those ends come (the promise
// below). The overdraft is never used in fallback, nor by the lowest
// band of a replica.
//
// # The consistency promise
//
// Let C be Config.Budget, P the Period, δ the store's delay (from a
// publish to when a read sees it), R the replicas and B the overdraft
// (Config.Overdraft; 0 by default). A replica admits only while its
// in-flight count is below its share plus B, and its share is at most C
// minus what the others held as of the states it read. Let r be the
// replica that made the fleet's latest admission, at t; its view held
// each other replica j's state as j published it at most P + δ before r's
// read, itself at most P before t. So, while every replica is synced:
//
//	fleet in flight ≤ C + B + Σ_{j≠r} a_j(2P + δ)
//
// where a_j(w) is the number of admissions replica j made in the last w:
// the fleet over-admits by at most the overdraft and what the other
// replicas admitted within two periods and the store's delay
// (TestOverAdmissionBound, with B = 0 and B = 2; TestOverdraft), and by
// at most B when the replicas read the same states since their last
// admissions, for then their shares sum to at most C
// (TestSharesSumToTheBudget). At a burst's onset, when every replica's
// last read showed an idle fleet, each may take up to C before the
// others' admissions reach it: the term reaches (R − 1)·C, and the fleet
// R·C + B, for up to 2P + δ. A replica whose rounds fail keeps its last
// share while its view is fresh: replace 2P by P + Stale for it. Where
// the replicas' views differ, their rounded shares may also sum to up to
// R − 1 less than C: slots idle for a round, never more admitted.
//
// The headroom [View.Reader] reports is the fleet's: this replica's queue
// live, the others' as they published it at most P + δ before (plus the
// read's own time) (TestHeadroomStaleness).
//
// A replica that stops publishing — killed, or cut off — is counted by the
// others, with its last state, until Lease + MaxSkew after that state was
// taken, and its share is theirs from their next round: within
// Lease + MaxSkew + P, 5P with the defaults (TestDeadReplicaShareReturns).
// That whole time is the lease a dead replica's share returns within:
// the store forgets the state after Lease, the MaxSkew on top keeps a
// reader whose clock runs ahead from dropping a live replica's state, and
// the P is the reader's next round. For a share back within a time L,
// choose Lease = L − MaxSkew − P (at least P).
// The others keep that last state even when the store loses it (a store
// restarted empty), so a restart does not hand out what a replica holds
// (TestStoreRestartLosesNothing). A replica cut off keeps its last share
// until its view is older than Config.Stale, then takes the static ⌊C/R⌋
// (within Stale + P of its last good read; TestFallbackAndReturn). With k
// replicas cut off, once the others stop counting them:
//
//	fleet in flight ≤ C + B + k·⌊C/R⌋
//
// (TestPartitionBound; the price of giving a dead replica's share back:
// the view cannot tell a dead replica from a cut-off one). In fallback no
// request is refused for any reason but the static share, and no
// overdraft is used. When the store comes back, a replica uses the
// fleet's state again after two successful rounds in a row, so that every
// live replica has published since: within 2P of the store's return.
//
// # Model servers that schedule by priority
//
// With Config.PriorityScheduling the servers serve the band each request
// hands them (flowhttp.PriorityHandoff) and preempt a lower band for a
// higher one, as vLLM does with --scheduling-policy priority. The gate
// then also admits a request of band p that the rules above refuse while a
// band below p holds one of this replica's slots and the fleet holds fewer
// than C requests of band p and above: this replica's live, the others' as
// of its last read (BandShare.OtherInFlight). The fleet is then what
// [gate.PriorityMaxInFlight](C) is to one router. The share cannot serve
// as that bound: the lower bands' requests the servers preempted stay in
// flight, the share is capped at C less what the others hold, and a burst
// of the higher band would find its replica's share at 0. The requests so
// admitted run at once, in slots the lower bands held; what they displace
// waits in the servers' queues. The higher bands may then hold, beyond
// what the bounds above allow, up to C + Σ_{j≠r} a_j(2P + δ) requests
// fleet-wide: requests in flight, not in slots, since the servers' C slots
// run what they hold by priority and queue the rest. In fallback a band
// passes up to the static share ⌊C/R⌋ of its own and higher bands here.
//
// The gate is a [gate.BoundGate]: it nudges the controller when its share
// grows, and reads the controller's bands and, when the controller is a
// [capacity.Reader] (a flowcontrol.FlowController is), its queues, which
// [View.Run] publishes. It is a [gate.SaturationDetector] whose saturation
// is in flight ÷ share. TryAcquire loads a count per band and, when it
// admits, makes one atomic add; Release makes one: no lock, no store round
// trip, no allocation (BenchmarkGate, BenchmarkAdmission).
func (v *View) Gate() gate.Gate { return &v.gate }

// viewGate is a View's gate. Its methods are called with the controller's
// lock held (a gate's contract), so that its counts change one at a time;
// the round reads them from another goroutine, hence the atomics.
type viewGate struct {
	v     *View
	bound atomic.Pointer[gate.Controller]
	table atomic.Pointer[bandTable]
}

// bandTable holds the gate's counts per band, in descending priority; the
// last slot counts requests of a priority no band has (none, with a
// flowcontrol.FlowController).
type bandTable struct {
	prios  []int
	counts []bandCount // len(prios)+1
}

// bandCount is one band's requests in flight (the low 32 bits) and its
// admissions ever, modulo 2³² (the high 32 bits: the arrival rate needs
// only their difference over a round), in one word, so that an admission
// costs one atomic add and its end another.
type bandCount struct{ word atomic.Uint64 }

const admitted = 1 << 32

func (c *bandCount) inFlight() int64 { return int64(int32(uint32(c.word.Load()))) }

func (c *bandCount) load() (inFlight int64, admits uint32) {
	w := c.word.Load()
	return int64(int32(uint32(w))), uint32(w >> 32)
}

// Bind records c, the controller the gate serves, and refuses a second.
func (g *viewGate) Bind(c gate.Controller) error {
	if !g.bound.CompareAndSwap(nil, &c) && *g.bound.Load() != c {
		return errors.New("fleet: the View's gate serves another controller already")
	}
	return nil
}

func (g *viewGate) String() string { return fmt.Sprintf("fleet.View(%s).Gate", g.v.cfg.ID) }

// ServersPreempt reports whether Config.PriorityScheduling is on: see
// gate.PreemptingGate.
func (g *viewGate) ServersPreempt() bool { return g.v.cfg.PriorityScheduling }

// TryAcquire takes a slot if fewer than the share are in flight.
func (g *viewGate) TryAcquire(priority int) bool {
	t := g.table.Load()
	i, ok := 0, false
	if t != nil {
		i, ok = find(t.prios, priority)
	}
	if !ok {
		g.count(priority) // a band the table lacks: add it
		t = g.table.Load()
		if i, ok = find(t.prios, priority); !ok {
			i = len(t.prios) // more bands than a state carries: the last slot
		}
	}
	// One pass: what all bands hold, what this band and those below it
	// hold, and what those strictly below it hold.
	var held, below, lower int64
	for j := range t.counts {
		n := t.counts[j].inFlight()
		held += n
		if j >= i {
			below += n
		}
		if j > i {
			lower += n
		}
	}
	l := g.v.below.Load() // nil in fallback
	var over int64        // the overdraft: synced, while a lower band holds a slot here
	if l != nil && lower > 0 {
		over = g.v.cfg.Overdraft
	}
	fits := held < g.v.share.Load()+over
	if fits && l != nil {
		if k, ok := find(l.prios, priority); ok && below >= l.below[k]+over {
			fits = false
		}
	}
	if !fits && !(lower > 0 && g.v.cfg.PriorityScheduling && g.passes(l, priority, held-lower)) {
		return false
	}
	t.counts[i].word.Add(admitted + 1)
	return true
}

// passes reports whether, with PriorityScheduling and a lower band
// holding a slot here, a request of band p may start past the share: the
// requests of band p and above in flight, above here and the others' as
// last read, are fewer than the budget; in fallback, those here are fewer
// than the static share.
func (g *viewGate) passes(l *bandLimits, p int, above int64) bool {
	if l == nil {
		return above < g.v.static
	}
	k, ok := find(l.prios, p)
	if !ok {
		// A band the round did not see: the others hold none of it,
		// but what they hold of the bands above it, the first k.
		k--
		if k < 0 {
			return above < g.v.cfg.Budget
		}
	}
	return above+l.othersAbove[k] < g.v.cfg.Budget
}

// held returns the requests in flight through the gate, in every band.
func (g *viewGate) held() int64 {
	t := g.table.Load()
	if t == nil {
		return 0
	}
	var n int64
	for i := range t.counts {
		n += t.counts[i].inFlight()
	}
	return n
}

// Release gives a slot back. It panics if more come back than were
// granted.
func (g *viewGate) Release(priority int) {
	c := g.count(priority)
	if int32(uint32(c.word.Add(^uint64(0)))) < 0 {
		c.word.Add(1)
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
	return float64(g.held()) / float64(share)
}

// count returns band priority's counts, adding the band to the table when
// it is new. Called with the controller's lock held: a new table is built
// by one caller at a time, and copies counts nobody changes meanwhile.
func (g *viewGate) count(priority int) *bandCount {
	t := g.table.Load()
	if t != nil {
		if i, ok := find(t.prios, priority); ok {
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
			n.counts[j].word.Store(t.counts[i].word.Load())
		}
	}
	g.table.Store(n)
	i, _ := slices.BinarySearchFunc(prios, priority, descending)
	return &n.counts[i]
}

func descending(a, b int) int { return cmp.Compare(b, a) }

// find returns the index of p in prios, which is in descending order, or
// where it would go: a plain search, cheaper than one through a
// comparison function on the admission path.
func find(prios []int, p int) (int, bool) {
	lo, hi := 0, len(prios)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if prios[m] > p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(prios) && prios[lo] == p
}

// counts returns band priority's requests in flight and admissions ever.
func (g *viewGate) counts(priority int) (inFlight int64, admits uint32) {
	if t := g.table.Load(); t != nil {
		if i, ok := slices.BinarySearchFunc(t.prios, priority, descending); ok {
			return t.counts[i].load()
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

// bandLimits caps, per band, what this replica's bands at or below it may
// hold in flight: its share less what is granted to the bands above.
type bandLimits struct {
	prios []int   // descending
	below []int64 // below[k]: the most in flight in bands ≤ prios[k]
	// othersAbove[k] is what the other replicas held in flight in bands
	// ≥ prios[k] as of the last read; with PriorityScheduling only.
	othersAbove []int64
}
