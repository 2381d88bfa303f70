// Package headroom computes how many more requests a priority band can queue
// and carries that number to callers in the router-owned advisory response
// header x-llm-d-flow-band-headroom-requests.
//
// The header describes the band that admitted the request, read at the moment
// the response headers pass through the router, not at admission: admission
// records which band handled the request ([Admitted]); response time reads
// how full that band is now. The value is advisory: nothing is reserved, and
// concurrent callers may read the same room.
//
// # When the header is set
//
// The stamping functions set the header only when the request was admitted
// through flow control, a [capacity.Reader] is configured, the admitting
// band still resolves, its snapshot reads without error, and its request
// capacity is bounded (a bound of 0 reports 0). Otherwise the header is
// absent. Absence never changes the response's status or body: a failed
// capacity read never turns a good response into an error.
//
// The value is the band's room in requests and nothing more. It counts
// requests also where the band bounds bytes or cost, and it says nothing of
// other bands or of the controller-wide capacities: a controller whose
// global capacity is full still advertises the band's headroom, and the
// next request may be refused while the header shows room. It holds only
// at the moment it was read. The band is the effective one: a request for
// band 5 admitted in fallback band 0 reports band 0, even if band 5 is
// provisioned while it runs. A dispatcher must let a rejected-saturated win
// over the header, as [github.com/sluicegate/sluice/headroom/window] does.
//
// # Which entry point
//
//   - A net/http router that admits through Sluice: use flowhttp.Handler,
//     which does everything here for you.
//   - A router with its own proxy and its own admission: record the band
//     with [NewContext] when the request is dispatched, and wrap the proxy
//     in [Middleware] (any http.Handler) or give an httputil.ReverseProxy
//     [ModifyResponse].
//   - A proxy that does not hand the router an http.Header (an Envoy
//     external processor): [MutationFor] returns the stamp as plain data.
//   - A dispatcher reading the header: [Parse], or the window of package
//     github.com/sluicegate/sluice/headroom/window, which reads every signal
//     the router sends and sizes a dispatcher's window from them; its doc
//     says how a dispatcher should read them (fill half the headroom, let
//     Retry-After pause rather than reset); examples/consumers measures
//     those rules.
//
// The rest are the building blocks those use: [Requests] (the clamp),
// [FromSnapshot] and [Sample] (reading a band), [Stamp] and [Strip]
// (setting and removing the router-owned names), and [HeaderWriter] (a
// ResponseWriter that runs a hook just before the header is written).
//
// Everything here is a function of its arguments; the package keeps no state
// and reads no clock. It depends on nothing in Sluice but [capacity], so a
// router with its own flow registry needs only a [capacity.Reader].
//
// # Header names and their consumers
//
//	name                                 set                      read by
//	x-llm-d-flow-band-headroom-requests  whenever there is a      Parse; dispatchers following the
//	(HeaderName)                         value to advertise       band-headroom proposal
//	x-llm-d-flow-band-headroom           also, with the option    llm-d-async's AIMD dispatch gate
//	(ProvisionalHeaderName)              EmitProvisional          (api/inference_error.go there); Parse
//	                                                              when the final name is absent
//
// Both names are router-owned: every stamping function removes every copy a
// backend sent, in any letter case, as a header and as a trailer (declared
// in a Trailer header or set through http.TrailerPrefix), whether or not it
// sets a value.
package headroom

import (
	"context"
	"strconv"

	"github.com/sluicegate/sluice/capacity"
	"golang.org/x/exp/constraints"
)

// HeaderName is the response header that carries a band's request headroom:
// a decimal integer of at least 0. The router owns it: stamping removes every
// copy a backend sent before setting the router's own. It is advisory and
// shared: every caller of the band reads the same room, so a dispatcher
// should take a part of it, not all (see package headroom/window).
const HeaderName = "x-llm-d-flow-band-headroom-requests"

// ProvisionalHeaderName is the provisional name of the same value, which
// llm-d-async's AIMD dispatch gate reads (api/inference_error.go there). The
// router owns it too: stamping always removes every copy a backend sent,
// because [Parse] falls back to it when HeaderName is absent, and sets it
// only with [EmitProvisional].
const ProvisionalHeaderName = "x-llm-d-flow-band-headroom"

// Requests returns how many more requests fit in a band of the given
// capacity that already holds length: capacity − length, clamped to
// [0, max(capacity, 0)].
//
// It is exact whenever 0 ≤ length ≤ capacity. A length of capacity or more
// gives 0, and so does a capacity of 0 or less; a negative length gives the
// whole capacity. It never overflows or wraps, for any integer type and any
// pair of values.
func Requests[T constraints.Integer](capacity, length T) T {
	switch {
	case capacity <= 0 || length >= capacity:
		return 0
	case length <= 0:
		return capacity
	default:
		// 0 < length < capacity, so the difference lies in (0, capacity).
		return capacity - length
	}
}

// FromSnapshot returns the request headroom of the band s describes and
// whether it is known. It is unknown, and 0, when the band's request capacity
// is unbounded: an unbounded band advertises nothing.
func FromSnapshot(s capacity.Snapshot) (requests int64, known bool) {
	limit, bounded := s.RequestCapacity.Value()
	if !bounded {
		return 0, false
	}
	return Requests(limit, s.QueuedRequests), true
}

// Band names the priority band that admitted a request through flow control,
// or records that none did. The zero Band means "not admitted", which is
// distinct from admission in band 0.
type Band struct {
	priority int
	admitted bool
}

// Admitted returns the Band of a request admitted in band priority: the
// effective priority the flow controller dispatched it from, which may differ
// from the priority the request asked for.
func Admitted(priority int) Band { return Band{priority: priority, admitted: true} }

// Priority returns the band's priority and true, or 0 and false when the
// request was not admitted.
func (b Band) Priority() (priority int, admitted bool) { return b.priority, b.admitted }

// String returns "band N" or "not admitted".
func (b Band) String() string {
	if !b.admitted {
		return "not admitted"
	}
	return "band " + strconv.Itoa(b.priority)
}

type bandKey struct{}

// NewContext returns a copy of ctx that carries b, for [Middleware] and
// [ModifyResponse] to stamp at response time.
//
// The step that dispatched the request calls it with
// Admitted(effective priority), after the flow controller has dispatched the
// request. A rejected, expired or cancelled request must never carry an
// admitted band: its response advertises nothing.
func NewContext(ctx context.Context, b Band) context.Context {
	return context.WithValue(ctx, bandKey{}, b)
}

// FromContext returns the band ctx carries ([NewContext]), or the zero Band
// (not admitted) if there is none.
func FromContext(ctx context.Context) Band {
	b, _ := ctx.Value(bandKey{}).(Band)
	return b
}

// Sample reads band b from r now and returns its request headroom and whether
// to advertise it. It advertises nothing (0, false) when r is nil, b is not
// admitted, the read fails (a band that does not resolve included), or the
// band's request capacity is unbounded. A panic in r reaches the caller;
// [Stamp] and [MutationFor] catch it.
//
// r must return the snapshot of exactly the band asked for; it must not
// resolve a fallback band again, since b already names the band that handled
// the request. Sample never returns an error: the caller's response goes on
// whatever happens. It allocates nothing beyond what r allocates.
func Sample(r capacity.Reader, b Band) (requests int64, ok bool) {
	if r == nil || !b.admitted {
		return 0, false
	}
	s, err := r.CapacitySnapshot(b.priority)
	if err != nil {
		return 0, false
	}
	return FromSnapshot(s)
}
