// Package flowcontrol is the admission gate a router puts in front of its
// model servers: a [FlowController] queues requests in priority bands, keeps
// one queue per flow (tenant) inside each band, and dispatches them one at a
// time through a [gate.Gate] — strictly by priority across bands, by the band's
// [Fairness] policy among its flows, and by its ordering policy within a
// flow — reporting for each request which band really handled it.
//
// # Outcomes
//
// [FlowController.EnqueueAndWait] blocks until exactly one outcome;
// [FlowController.Submit] is its non-blocking form, which hands the same
// outcome to a callback. An outcome's String is its dropped reason, the
// value of the x-llm-d-request-dropped-reason header
// ([DroppedReasonHeader]); see [Outcome] for the naming rule.
//
//	outcome                          error wraps                  HTTP
//	OutcomeDispatched                (none)                       200
//	OutcomeRejectedSaturated         ErrRejectedSaturated         429 + RetryAfter (413 with ErrTooLarge)
//	  displaced while queued         ErrRejectedSaturated and     429 + RetryAfter
//	                                 ErrDisplaced
//	OutcomeRejectedTTLExpired        ErrRejectedTTLExpired        429 + RetryAfter
//	OutcomeRejectedContextCancelled  ErrRejectedContextCancelled  503
//	OutcomeRejectedShuttingDown      ErrRejectedShuttingDown      503
//	OutcomeRejectedNoEndpoints       ErrRejectedNoEndpoints       503 + RetryAfter (1s)
//	OutcomeEvictedPriority           ErrEvictedPriority           429 + RetryAfter (revoked while running)
//	OutcomeEvicted                   ErrEvicted                   429 + RetryAfter (a guarantee taken back)
//
// OutcomeRejectedSaturated covers every capacity — of the band, the flow or
// the controller; in requests, bytes or cost — and, with
// [Config.NeverPromote], a request no band can take; and a queued request
// displaced by a request of a fairer flow (fair admission, below), whose
// error wraps the detail [ErrDisplaced] beside ErrRejectedSaturated, as a
// request that can never fit wraps [ErrTooLarge]. Following llm-d-router's
// rule, rejected-* means the request never reached a model server, a
// queued one included; evicted-* is kept for a request dispatched and then
// killed. The two evicted outcomes are never the result of a call: they
// come after OutcomeDispatched, from [Admission.Err] and as a second event
// to the Observer, when an admission is revoked (see "What runs can give
// way", below). OutcomeRejectedNoEndpoints
// is a request that waited [Config.NoEndpointsTTL] while its gate reported
// no model server at all, or whose TTL ran out while it did (see
// [gate.EndpointGate]).
//
// Every error is a [*RejectionError]: it carries the outcome, the requested
// and the effective keys, the time the request queued and, for every
// refusal that can be retried, [RejectionError.RetryAfter]. An optional
// [Config.Observer] is called once per outcome, outside the lock, and an
// optional [Config.Waiting] once per request that queues, as it does; both
// hear the [Event] of the request — its keys, whether it queued, how long
// its enqueue took, and the caller's own [Request.Tag], which the
// controller carries unread (a request's metric labels, say). The clock is
// read around an enqueue only when one of them is set.
//
// EnqueueAndWait parks the calling goroutine while the request waits;
// Submit does not, so an event-loop router keeps a queued request for a
// few hundred bytes (BenchmarkQueuedMemory) rather than a goroutine's
// stack.
//
// # Bands and fallback
//
// A band has a priority (higher is more important; negative bands are
// sheddable), request, byte and cost capacities bounding what waits in it, a
// queue-wait TTL, an ordering policy and a fairness policy. A request asks
// for a priority; if that band is not provisioned it is queued in the
// fallback band ([Config.FallbackPriority], 0 unless set) — or, with
// [Config.NeverPromote], in the nearest band at or below its priority, and
// rejected for capacity if there is none, so sheddable traffic stays
// sheddable. The band is chosen once, at enqueue: the admission reports
// both the requested and the effective key, and provisioning the requested
// band later ([FlowController.ProvisionBand]) changes neither.
//
// Capacities bound waiting requests. A request enters its band only if the
// band, its flow ([BandConfig.FlowRequestCapacity]) and the controller,
// with it added, stay within their request, byte and cost capacities; this
// is checked at enqueue, also for a request that would start at once, so a
// bounded capacity of 0 closes a band. A request counts its byte size and
// cost clamped to [MaxRequestBytes] and [MaxRequestCost] (2^40 each), so no
// client-supplied number can wrap a sum or fill a counter for everyone;
// an unbounded capacity is never checked. A request whose counted size or
// cost is larger than a capacity can never fit: it is refused with
// [ErrTooLarge] and no Retry-After. When a band or the controller is full, a request whose flow
// holds less than its share may displace another flow's newest request
// instead of being refused (fair admission; see [Config.NoDisplacement]).
//
// # Flows, fairness and cost
//
// A flow is a [FlowKey.ID] (flowhttp reads it from
// x-llm-d-inference-fairness-id). A band keeps one queue per flow that has
// waiters, each in the band's ordering policy, and the band's [Fairness]
// policy picks which flow's head starts when the gate grants the band a
// slot: [GlobalStrict] (the default: the best head across flows, exactly
// the order of one queue for the band), [RoundRobin] (one request per
// flow per turn) or [DeficitRoundRobin] (weighted and cost-aware). Each
// constructor states its policy's bound; the bounds are tested with rapid,
// and the controller's model test runs every policy against plain slices.
// A custom policy implements Fairness and its per-band [Scheduler].
//
// [Request.Cost] is what a request costs to serve, typically its estimated
// tokens; a cost of 0 or less counts as 1, so a configuration that sets no
// costs counts requests. Deficit round robin serves by cost, and
// [BandConfig.CostCapacity] and [Config.CostCapacity] bound the summed cost
// of what waits; snapshots carry it as QueuedCost. The headroom header
// stays request-based.
//
// Fair admission measures a flow's holding as the capacity that refuses
// counts it — in requests, bytes or cost — and, for a controller-wide
// capacity, displaces only from the request's own band or below;
// [Config.NoDisplacement] has a worked example. A request over
// [BandConfig.FlowRequestCapacity] is rejected and never displaces.
//
// A flow's state exists only while it has waiters. A band keeps emptied
// flows for reuse, as many as it has active flows and at least 64, so a
// steady state allocates nothing, and a million distinct flows passing
// through leave memory bounded by the flows active at once.
//
// # Retry-After
//
// [RejectionError.RetryAfter] tells every refusal that can be retried when
// to come back. For OutcomeRejectedSaturated, displacements included, it
// projects from the scope that refused the request or made it leave (its
// band, or the controller's capacities) and its drain rate:
// the dispatches from its queue per second of busy time — time with
// waiters, so an idle stretch neither slows the rate nor inflates the next
// value — as a moving average with a time constant of 5s, over windows of
// at least 1s of busy time. Each refusal is promised the moment one more
// place should have freed after the moment promised to the refusal before
// it, one drain interval (1/rate) apart and never sooner than one interval
// from now, so refused clients come back spread over the time the scope
// needs rather than all at once; when the band and the controller both
// refuse, the longer wins. Whole seconds, rounded up, between 1s and 30s;
// a scope measured not to drain at all gets 30s. A request that can never
// fit gets none.
//
// Before a scope has a measured rate — the first burst after start, or
// after a band is provisioned — the rate is a prior: the admissions in
// flight (at least one) per [PriorServiceTime] (1s), spread the same way,
// and the promises carry over once the rate is measured. With 16 in
// flight, a burst's refusals are told 1s for the first 16, 2s for the
// next 16, and so on.
//
// OutcomeRejectedTTLExpired of a queued request takes its band's next
// promise, like a refusal of the band, but no sooner than the band's
// queue ÷ its drain rate, less the time the request waited: the band did
// not drain fast enough to serve it in time, and a client that rejoins the
// queue before what waits in it has drained that far would expire again.
// With 100 waiting at 6.5 per second and a 10s TTL, that is 6s or more,
// where a refusal of the band would be told 1s. A band measured not to
// drain at all gets 30s, as for a refusal. An expiry at the call (a context already past its deadline)
// carries none.
//
// OutcomeRejectedNoEndpoints (503) carries 1s: nothing measures when
// endpoints come back, and a queued request starts the moment they do, so
// the shortest wait gets a client back into the queue soonest, at the
// cost of one queue place per Config.NoEndpointsTTL. Shutdown (503)
// carries none: the client should go to another replica at once; nor does
// a cancellation, which nobody reads.
//
// An evicted admission ([Admission.Err]) carries 1s while its band and the
// controller have room to queue it: it may come back at once and wait its
// turn there, like the requests it would queue behind. A full band gives
// it the band's next promise, as a refusal gets. The promise is sized for
// a full queue: told to an evicted request while its band has room, it
// would keep the request away while the slots it could take free up
// (examples/crossband/README.md shows the difference on a simulated
// pool).
//
// The rules for refusals, for the prior and for expiries were each chosen
// against alternatives by a simulation with clients that retry like the
// OpenAI SDKs: the spread against the queue length ÷ the rate and one
// drain interval alone; the in-flight prior against none, a constant and
// capacity ÷ TTL; and for expiries the band's next promise behind its
// queue against the promise alone, none, the queue ÷ the rate and one
// drain interval.
// examples/retryafter/README.md has the command and the tables.
//
// # Dispatch and strict priority
//
// Dispatch is driven by events — an enqueue, a Done, an expiry or
// cancellation, and [FlowController.Nudge] — never by a ticker. On each event
// the controller asks the gate for a slot for the highest waiting band, and
// repeats until the gate refuses or nothing waits. Within a band, the
// band's fairness policy picks the flow, and the ordering policy the flow's
// head.
//
// Priority is strict: while the highest waiting band cannot dispatch, nothing
// below it does, even if the gate would take a lower band's request. There is
// no aging, so a steady stream into a higher band starves every band below
// it. For example, with bands 10, 0 and -5 and MaxInFlight(2), two requests
// in flight, H1 waiting in band 10, N1 and N2 in band 0, and S1 in band -5:
//
//   - a Done starts H1; the next Done starts N1, then N2, then S1;
//   - but if a new band-10 request arrives before each Done, every slot goes
//     to band 10, and N1, N2 and S1 wait until band 10 is empty — they leave
//     earlier only by their TTL (rejected-ttl-expired) or their context;
//   - and with a per-band gate that refuses band 10 (its pool is full) while
//     it would take band 0, N1 still waits: nothing overtakes H1.
//
// Give the lower bands TTLs (or bounded capacities) so that starved callers
// learn it quickly rather than waiting indefinitely.
//
// # What runs can give way
//
// Strict priority decides who starts next; it does not free a slot that a
// running request holds, so an interactive request waits behind the batch
// generations that filled the pool. Three mechanisms change that, each
// usable alone:
//
//   - Band ceilings (package gate's Ceiling, with llm-d-router's usage-limit
//     policies) keep a band from starting while the gate's saturation is at
//     or above its ceiling: room is held back for the bands above, idle or
//     not.
//   - In-flight eviction ([Config.Eviction]): when the gate refuses the
//     head of a band, running admissions of sheddable bands strictly below
//     it are revoked, the lowest band and the most recently dispatched
//     first, sized from the waiting demand and paced by confirmation; see
//     [Eviction]. With [Eviction.ByDeadline], when the waiting requests
//     have deadlines — a band's [BandConfig.TTFTObjective], or llm-d's
//     x-llm-d-slo-ttft-ms header — it gives way by them instead: it revokes only what the deadlines
//     need given the slot releases it measures, never while they have
//     slack, victims without output first, and holds back for a band
//     with deadlines the slots its arrival rate × service time keeps
//     busy (Little's law), up to its peaks where the bands below release
//     slots too seldom to serve them in time.
//   - Guarantees ([BandConfig.Guarantee]): a band's share, lent to any
//     band while it is idle, taken back by revocation from the bands below
//     when it is wanted. A band short of its guarantee is offered before
//     the bands above it that are not, the one exception to strict
//     priority.
//
// Guarantees start from Kubernetes API Priority and Fairness: a nominal
// share per level, a lendable part and a borrowing limit. APF has to cap
// what it lends because it can take a share back only as the borrowers'
// requests end, which for an LLM generation is tens of seconds. Here a
// borrowed slot is revoked when its owner wants it, so the whole of an
// idle guarantee is lent, no borrowing limit is needed, and the owner gets
// its share back within one revocation's confirmation (bounded by
// [Eviction.Timeout] for the next decision's sake). A band's own
// guarantee is what eviction may not take from it: a floor for batch. A
// guarantee never takes its share back from a band at or above
// [Eviction.Below] unless [Eviction.GuaranteesIgnoreBelow] says so, and a
// sheddable band's floor yields the next slot to a band above it whose
// waiters would otherwise miss their deadlines.
//
// A revocation reaches the holder of the [Admission] through
// [Admission.Revoked]; the holder stops the request and confirms with
// [Admission.Done], which returns the slot once, whenever it comes. The
// controller never frees a slot behind the holder's back: a revocation not
// confirmed within [Eviction.Timeout] stops holding the next decision back,
// but keeps its slot until its Done. Victims always come from bands
// strictly below the band they make room for; a band's own guarantee is
// never revoked. [Config.Revocations] hears each step, for llm-d-router's
// revocation metrics. The deciding costs a few list operations under the
// lock and allocates nothing there (BenchmarkRevocation); examples/crossband
// compares the three on a simulated pool.
//
// # TTL, cancellation and the grant race
//
// A queued request's TTL is the smallest of its band's TTL, [Config.DefaultTTL],
// its own [Request.TTL] and the time left until its context's deadline; it is
// fixed at enqueue. The request expires at exactly that TTL. A context
// deadline is an expiry, not a cancellation: the outcome is OutcomeRejectedTTLExpired and
// the error matches both ErrRejectedTTLExpired and context.DeadlineExceeded. An explicit
// cancellation of the context is OutcomeRejectedContextCancelled and matches ErrRejectedContextCancelled
// and context.Canceled (and the context's cause, when it has another). A
// context already done at the call ends it at once.
//
// Expired, cancelled and displaced requests leave their queue at once, so
// lengths, byte sizes, capacity checks and snapshots are exact at every
// moment. A grant and a cancellation (or expiry) of the same request are
// settled under the controller's lock: whichever reaches it first decides.
// A request granted before its cancellation was processed is dispatched —
// the caller gets the admission, even if its context is done by then, and
// must call Done.
//
// # Reading capacity
//
// A FlowController is a [capacity.Reader]: CapacitySnapshot reads counters
// that move with every request, without the dispatch lock and without
// allocating, so response-time readers (such as the headroom header) never
// wait on dispatch. [FlowController.FlowSnapshot] reads one flow, under the
// lock, briefly.
//
// # Shutdown
//
// [FlowController.Close] ends every queued request with
// OutcomeRejectedShuttingDown and returns once their EnqueueAndWait calls have
// returned. Shutdown wins: once Close has begun, every call ends with
// OutcomeRejectedShuttingDown, also one whose context is already done. The
// controller runs no goroutines of its own: every goroutine in it is a
// caller's, a timer's of its [Clock], or a context's AfterFunc.
//
// # Time
//
// Every reading of time — queue times, TTLs, expiry timers, the dispatch
// rates behind Retry-After — goes through one [Clock], the real one unless
// [Config.Clock] sets another. Nothing in the controller reads time.Now
// behind its back, so a simulation runs the same code on a virtual clock.
// Contexts stay real: see [Clock] for what that means for a deadline.
//
// # User code that panics
//
// A [gate.Gate], an ordering [ordering.Policy], an [Config.Observer], a
// [Config.Waiting] or a [FlowController.Submit] callback may panic; the controller stays
// consistent and the panic reaches the goroutine that called into the
// controller, as net/http expects of a handler:
//
//   - Policy.Key runs before the controller's lock is taken, on the caller's
//     goroutine; the request is not queued and the panic leaves the call.
//   - Gate.TryAcquire and Gate.Release run under the lock, which is
//     released as the panic unwinds. A TryAcquire that panics is a refusal:
//     the head stays queued and dispatch resumes at the next event. The
//     request whose call triggered that dispatch is withdrawn first (its
//     slot returned if the loop had already dispatched it), so nothing
//     waits for a caller that is gone.
//   - An Observer that panics never costs a request its outcome or a slot.
//     The caller of EnqueueAndWait gets the panic instead of the outcome,
//     and an admission it would have returned is released first. A Submit
//     callback is still called, once, with the outcome — the admission
//     included, which it then owns — before the panic goes on.
//   - A Waiting that panics in an EnqueueAndWait gives up its wait, as a
//     cancellation the Observer hears; in a Submit, the request stays
//     queued and its callback hears its outcome as usual.
//   - A Submit callback that panics — also after calling Done, which may
//     have dispatched others — loses nothing: the outcomes still owed are
//     delivered, each to its own caller, before the panic goes on.
//   - Outcomes decided in the same event for other requests are still
//     delivered, each to its own caller.
//
// A fairness [Scheduler] is the exception: it must not panic, since it
// runs in the middle of a change to its band.
//
// # Where the code is
//
// A request's life runs through four phase files, which reach the
// optional features only through the named hooks of hooks.go (each calls
// its feature's owner only when the feature is on) rather than branching
// on them:
//
//	enqueue.go      arrival: fit, start at once, or queue (EnqueueAndWait, Submit)
//	dispatch.go     the loop that offers the highest band's head to the gate
//	admission.go    the Admission and its end (Done)
//	deliver.go      outcomes delivered once the lock is released
//	hooks.go        where the phases call the features
//
// Each optional feature has one owner, a type whose fields are its own:
//
//	fast.go         lockFree: start and end without the lock while nothing waits
//	metered.go      metering: what a gate.MeteredGate hears of each slot
//	reclaim.go      reclaimer: in-flight eviction, its decisions and pacing
//	deadline.go     the reclaimer's giving way by deadline, release rates, holdbacks
//	guarantee.go    the reclaimer's guaranteed shares, lent while idle
//	noendpoints.go  endpointWatch: drop requests while no model server is up
//
// The fleet view needs no owner here: package flowcontrol/fleet reaches
// the controller as its gate (fleet.View.Gate) and reads it back through
// gate.Controller and capacity.Reader, so no phase file calls it.
//
// The rest: controller.go (New, Close, ProvisionBand), config.go, band.go
// and waiter.go (the queues), fairness.go with globalstrict.go,
// roundrobin.go and drr.go (one policy a file), fit.go and displace.go
// (capacities and displacement), backlog.go, retry.go (Retry-After),
// lease.go (what a metered or revocable admission keeps), revoke.go (Eviction and a revoked admission), outcome.go,
// snapshot.go and clock.go. A new gate lives in package gate; a new
// give-way policy touches its owner's file, hooks.go, and its test.
package flowcontrol
