// Package window sizes the dispatch window of an upstream asynchronous
// dispatcher for one priority band of a router, from what the router says
// on its responses: the band's headroom (x-llm-d-flow-band-headroom-requests,
// or the provisional x-llm-d-flow-band-headroom), the time the request
// queued (x-llm-d-flow-queue-duration-ms), why it was refused
// (x-llm-d-request-dropped-reason) and Retry-After.
//
// Most callers want three calls: [Window.TryAcquire] before sending,
// [Read] on the response, and [Window.Done] with what Read returned.
//
// # How a dispatcher should read the router's signals
//
// The window follows the rules below, each with its reason.
// examples/consumers compares them with llm-d-async's gate and with each
// signal alone, on the real flow controller; its README has the command
// and the tables.
//
//   - Headroom: fill part of it, not all of it. After a response reporting
//     headroom h with n requests in flight, the window lets at most
//     n + ⌊Share × h⌋ be in flight ([Config.Share], ½ by default).
//     Capping at in-flight + all the headroom keeps the band full to the
//     last place, so whatever reaches the band first — another tenant's
//     request, another dispatcher's — turns the next send into a refusal;
//     taking half approaches the limit geometrically and leaves the last
//     place free.
//   - Retry-After: pause, do not reset. A Retry-After closes the window
//     until it has passed, and the refused request waits as long; the
//     window keeps its size apart from the one multiplicative decrease the
//     refusal earns. Resetting the window to its minimum on every
//     Retry-After (as llm-d-async's gate does) throws away the size the
//     band had room for; ignoring Retry-After lets several dispatchers
//     sharing a band run into each other's refusals.
//   - Refusals and expiries shrink the window once per flight: the
//     refusals of requests sent before a decrease are answers to the same
//     excess and are not counted again.
//   - Evictions: a router that evicts in flight revokes a running request
//     of a sheddable band when a higher band needs its room, and answers
//     it 429 with evicted-priority (or evicted) and Retry-After. The
//     window reads it as a refusal ([Evicted] acts as [Saturated]): it
//     pauses until the Retry-After has passed, caps itself at what is in
//     flight, and shrinks once per flight — the victims of one decision,
//     often several of one dispatcher's requests, are one signal. The
//     request is worth sending again then ([Signal.Retryable]). The rule
//     follows from what the answer means: a higher band holds the room,
//     so sending as much again would only be evicted again.
//   - Queue duration is a latency knob, not a capacity signal: a target
//     ([Config.TargetQueueDelay]) shortens the queue the dispatcher keeps
//     in the band, and with it the dispatcher's own goodput.
//   - Several dispatchers on one band read the same headroom: nothing is
//     reserved, and each one's share of it is what the others leave.
//     [Config.Share] bounds what one dispatcher takes from one reading,
//     not what they take together.
//   - In a band shared with interactive tenants, the band's goodput is
//     fixed once it is busy: what a batch window gains, the interactive
//     tenants lose. Compare windows on refusals, on the band's goodput and
//     on the other tenants' service together.
//   - Where the window is weaker: in a batch band with a short TTL it lets
//     more requests expire than llm-d-async's gate, which backs off on
//     every expiry where the window shrinks once per flight. A Sluice
//     router sends the expired request's queue duration and its band's
//     Retry-After with rejected-ttl-expired, and the window pauses on it
//     as on a refusal's, trading some of the dispatcher's goodput for
//     fewer expiries.
//
// The headroom is the band's room only (llm-d's definition; see package
// headroom). A router whose controller-wide capacity is full still reports
// its band's headroom on the responses it lets through, and refuses the
// next request with rejected-saturated; the header never tells a
// dispatcher about the global capacity. So a Saturated refusal caps a
// window that reads headroom at what it has in flight, even when the
// refusal itself carries a headroom header with room, and shrinks it as
// any refusal does.
//
// A [Window] never reads the clock: every method that needs the time takes
// it as a parameter, so the window runs the same on a wall clock and in a
// simulation.
package window
