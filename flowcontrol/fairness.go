package flowcontrol

import (
	"fmt"

	"github.com/sluicegate/sluice/internal/dheap"
	"github.com/sluicegate/sluice/ordering"
)

// Built-in fairness policy type names, as accepted by [FairnessByName]. The
// first two are llm-d-router's.
const (
	GlobalStrictFairnessName      = "global-strict-fairness-policy"
	RoundRobinFairnessName        = "round-robin-fairness-policy"
	DeficitRoundRobinFairnessName = "deficit-round-robin-fairness-policy"
)

// A Fairness policy decides, inside one band, which flow's head starts next
// when the gate grants the band a slot. A band keeps one queue per flow ([FlowKey.ID]) that has
// waiters, each in the band's ordering policy; strict priority across
// bands is unchanged. Configure one per band with [BandConfig.Fairness];
// name one from a file with [FairnessByName].
//
// Policies are values: NewScheduler is called once per band, and the
// scheduler it returns holds that band's state.
type Fairness interface {
	// TypeName names the policy, e.g. "round-robin-fairness-policy".
	TypeName() string
	// NewScheduler returns the scheduler of one band, with no flows.
	NewScheduler() Scheduler
}

// A Scheduler is the state of a [Fairness] policy in one band. The
// controller calls it with its lock held, in the middle of changing the
// band, so its methods must be fast, must not block, must not call back
// into the controller and must not panic: unlike a Gate's, a Scheduler's
// panic leaves the band inconsistent.
//
// The flows it is told of are the band's flows with waiters. A *Flow is
// reused for another flow after Remove, so a scheduler that keeps per-flow
// state outside the Flow must drop it in Remove.
type Scheduler interface {
	// Add tells of a flow that has waiters again (it had none).
	Add(f *Flow)
	// Remove tells of a flow that has no waiters left.
	Remove(f *Flow)
	// HeadChanged tells that f's head changed other than by a dispatch: a
	// new request sorted before it, or it left by expiry, cancellation or
	// displacement. f still has waiters.
	HeadChanged(f *Flow)
	// Next returns the flow whose head starts next. It is called once the
	// gate has granted the band a slot, so only while at least one flow has
	// waiters, and it must return one of them: a band with waiters never
	// leaves a slot unused (the policy is work-conserving). Served follows
	// at once, for the flow it returned.
	Next() *Flow
	// Served tells that f's head, of cost cost, left for dispatch. f may be
	// empty now, in which case Remove follows.
	Served(f *Flow, cost int64)
}

// FairnessByName returns the built-in fairness policy of the given type
// name: [GlobalStrict], [RoundRobin], or [DeficitRoundRobin] with every
// weight 1 and an adaptive quantum. An unknown name is an error listing the
// known ones.
func FairnessByName(name string) (Fairness, error) {
	switch name {
	case GlobalStrictFairnessName:
		return GlobalStrict(), nil
	case RoundRobinFairnessName:
		return RoundRobin(), nil
	case DeficitRoundRobinFairnessName:
		return DeficitRoundRobin(DRRConfig{}), nil
	}
	return nil, fmt.Errorf("flowcontrol: unknown fairness policy %q (known: %s, %s, %s)",
		name, GlobalStrictFairnessName, RoundRobinFairnessName, DeficitRoundRobinFairnessName)
}

// Flow is one flow with waiters in one band, as a [Scheduler] sees it. Its
// methods read the controller's state and may be called only from a
// Scheduler's methods.
//
// It holds two records: the controller's — the flow's waiters and what
// they hold — and, in sched, the per-flow state of the built-in schedulers.
// A scheduler of another package keeps its per-flow state itself (see
// [Scheduler]). TestHotFieldsShareALine bounds the layout.
type Flow struct {
	// The flow's waiters in arrival order, linked through waiter.links:
	// the back is the first to be displaced. In a band whose queue kind
	// is FIFO this list is also the flow's queue, its front the head; the
	// fields a dispatch reads come first, in one cache line.
	waiters ordering.List[waiter]
	queued  backlog // what the waiters hold
	// queue orders the waiters in a band of another queue kind (a heap);
	// nil in a FIFO band.
	queue ordering.Queue
	sched schedState // its first field ends the first cache line

	id   string
	band *band
}

// schedState is the per-flow state of the built-in schedulers, each of
// which uses its own fields and leaves the others zero: the ring of the
// round-robin ones, the deficit of deficit round robin, the heap handle of
// global-strict. It lives in the Flow so that a dispatch reaches it without
// a map lookup; the ring's next, which every round-robin dispatch reads,
// comes first so that it shares the cache line of the flow's queue.
type schedState struct {
	next, prev *Flow                              // round robin and DRR: the neighbours in the ring
	deficit    int64                              // DRR: the cost the flow may still be served
	credited   bool                               // DRR: this visit's quantum is added
	heap       dheap.Handle[ordering.Rank, *Flow] // global-strict: the flow's head in the heap of heads
}

// ID returns the flow's ID.
func (f *Flow) ID() string { return f.id }

// Len returns the number of the flow's waiters in the band.
func (f *Flow) Len() int { return int(f.queued.requests) }

// HeadCost returns the cost of the flow's head, the request it would offer.
func (f *Flow) HeadCost() int64 { return f.head().cost }

func (f *Flow) head() *waiter {
	if f.queue == nil {
		return f.waiters.Front()
	}
	return f.queue.Peek().Value.(*waiter)
}
