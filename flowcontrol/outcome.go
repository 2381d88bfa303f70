package flowcontrol

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Outcome is the one terminal result of a call to
// [FlowController.EnqueueAndWait] or [FlowController.Submit].
//
// Each outcome has one stem, the dropped reason llm-d-router defines for it
// (x-llm-d-request-dropped-reason): its constant is Outcome followed by the
// stem in Go's case, its sentinel error Err followed by the same, and its
// String is the stem itself — OutcomeRejectedSaturated, ErrRejectedSaturated,
// "rejected-saturated". A new outcome follows the same rule.
type Outcome int

const (
	// OutcomeDispatched: the request may go on to a model server. It is the
	// only outcome that carries an admitted (effective) band.
	OutcomeDispatched Outcome = iota
	// OutcomeRejectedSaturated: the request did not fit a request, byte or
	// cost capacity of its band, its flow or the controller, and displacing
	// others could not make room; or (with [Config.NeverPromote]) no band
	// could take it; it was never queued then. Or it was queued and then
	// displaced by a request of a flow holding less than its share of a
	// full band or controller (see [Config.NoDisplacement]); its error
	// wraps [ErrDisplaced] then. Either way it never reached a model
	// server, hence rejected-*, as llm-d-router names such outcomes.
	OutcomeRejectedSaturated
	// OutcomeRejectedTTLExpired: the request waited its whole queue-wait
	// TTL, or its context's deadline passed while it was queued.
	OutcomeRejectedTTLExpired
	// OutcomeRejectedContextCancelled: the request's context was cancelled
	// while it was queued, or before the call.
	OutcomeRejectedContextCancelled
	// OutcomeRejectedShuttingDown: the controller was closed before the
	// request was dispatched.
	OutcomeRejectedShuttingDown
	// OutcomeRejectedNoEndpoints: the gate reported no endpoints at all
	// (see [gate.EndpointGate]) for the request's whole [Config.NoEndpointsTTL]
	// while it waited.
	OutcomeRejectedNoEndpoints
	// OutcomeEvicted: the request was dispatched, and then its admission
	// was revoked so that a band above it could take back its guaranteed
	// share ([BandConfig.Guarantee]). It is llm-d-router's generic evicted
	// reason, for a cause it has no sub-reason of its own for. It is
	// reported by [Admission.Err] and to the Observer, after the request's
	// OutcomeDispatched, never as the result of EnqueueAndWait or Submit.
	OutcomeEvicted
	// OutcomeEvictedPriority: the request was dispatched, and then its
	// admission was revoked to make room for a request of a higher band
	// (in-flight eviction; see [Eviction]). Reported as OutcomeEvicted is.
	OutcomeEvictedPriority
)

// DroppedReasonHeader is the response header in which a gateway reports why
// it dropped a request; its value is the outcome's [Outcome.String].
const DroppedReasonHeader = "x-llm-d-request-dropped-reason"

// String returns the outcome's name: "dispatched", or for every other
// outcome the value of [DroppedReasonHeader] that llm-d-router defines for
// it — "rejected-saturated", "rejected-ttl-expired",
// "rejected-context-cancelled", "rejected-shutting-down",
// "rejected-no-endpoints", "evicted" or "evicted-priority".
func (o Outcome) String() string {
	switch o {
	case OutcomeDispatched:
		return "dispatched"
	case OutcomeRejectedSaturated:
		return "rejected-saturated"
	case OutcomeRejectedTTLExpired:
		return "rejected-ttl-expired"
	case OutcomeRejectedContextCancelled:
		return "rejected-context-cancelled"
	case OutcomeRejectedShuttingDown:
		return "rejected-shutting-down"
	case OutcomeRejectedNoEndpoints:
		return "rejected-no-endpoints"
	case OutcomeEvicted:
		return "evicted"
	case OutcomeEvictedPriority:
		return "evicted-priority"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// HTTPStatus returns the status a gateway should answer with: 200 for
// OutcomeDispatched, 429 (Too Many Requests) for capacity rejections,
// expiry and eviction (llm-d-router's status for an evicted request) — the
// router is busy, the client may come back — and 503 (Service
// Unavailable) for cancellation, shutdown and an empty pool. It is 0 for an
// unknown Outcome.
func (o Outcome) HTTPStatus() int {
	switch o {
	case OutcomeDispatched:
		return http.StatusOK
	case OutcomeRejectedSaturated, OutcomeRejectedTTLExpired, OutcomeEvicted, OutcomeEvictedPriority:
		return http.StatusTooManyRequests
	case OutcomeRejectedContextCancelled, OutcomeRejectedShuttingDown, OutcomeRejectedNoEndpoints:
		return http.StatusServiceUnavailable
	}
	return 0
}

// Sentinel errors, one per outcome other than dispatch, and two details of
// OutcomeRejectedSaturated ([ErrTooLarge], [ErrDisplaced]). Every error of
// EnqueueAndWait is a [*RejectionError] that wraps exactly one outcome
// sentinel, so errors.Is(err, ErrRejectedTTLExpired) tells the outcome
// without a type assertion, and errors.Is(err, ErrDisplaced) the detail.
var (
	// ErrRejectedSaturated is wrapped for [OutcomeRejectedSaturated].
	ErrRejectedSaturated = errors.New("flowcontrol: rejected-saturated")
	// ErrTooLarge is not an outcome but a detail of one: it is wrapped,
	// beside ErrRejectedSaturated, for a request that can never fit, whose
	// ByteSize or Cost, as counted (see [MaxRequestCost]), exceeds a byte
	// or cost capacity of its band or of the controller. Such a rejection
	// carries no RetryAfter, since waiting cannot help it; flowhttp answers
	// it 413.
	ErrTooLarge = errors.New("flowcontrol: request larger than a byte or cost capacity")
	// ErrDisplaced is not an outcome but a detail of one, as ErrTooLarge
	// is: it is wrapped, beside ErrRejectedSaturated, for a request that
	// was queued and then displaced by a request of a flow holding less
	// than its share of a full band or controller (fair admission; see
	// [Config.NoDisplacement]). It is never the only sentinel an error
	// wraps. Such a rejection carries the QueueTime the request waited and
	// a RetryAfter: the request may come back when the scope that made it
	// leave has room. flowhttp answers it 429 with dropped reason
	// rejected-saturated.
	ErrDisplaced = errors.New("flowcontrol: displaced by a fairer flow")
	// ErrRejectedTTLExpired is wrapped for [OutcomeRejectedTTLExpired].
	ErrRejectedTTLExpired = errors.New("flowcontrol: rejected-ttl-expired")
	// ErrRejectedContextCancelled is wrapped for
	// [OutcomeRejectedContextCancelled].
	ErrRejectedContextCancelled = errors.New("flowcontrol: rejected-context-cancelled")
	// ErrRejectedShuttingDown is wrapped for [OutcomeRejectedShuttingDown],
	// and by [FlowController.ProvisionBand] after Close.
	ErrRejectedShuttingDown = errors.New("flowcontrol: rejected-shutting-down")
	// ErrRejectedNoEndpoints is wrapped for [OutcomeRejectedNoEndpoints].
	ErrRejectedNoEndpoints = errors.New("flowcontrol: rejected-no-endpoints")
)

// limitKind says which limit refused a request, for the error message.
type limitKind uint8

const (
	limitNone limitKind = iota
	limitBandRequests
	limitBandBytes
	limitGlobalRequests
	limitGlobalBytes
	limitNoBand  // NeverPromote found no band at or below the requested priority
	limitRevoked // an admission revoked for band limitVal
	limitBandCost
	limitGlobalCost
	limitFlowRequests
	limitDisplaced   // the request was displaced by a fairer flow
	limitNoEndpoints // the gate had no endpoints for NoEndpointsTTL
	// limitCounterRange: the controller's queued bytes or cost would pass
	// the range of int64, whatever the capacities.
	limitCounterRange
)

// RejectionError is the error of [FlowController.EnqueueAndWait] and
// [FlowController.Submit] for every outcome but dispatch.
//
// errors.Is matches the outcome's sentinel ([ErrRejectedSaturated],
// [ErrRejectedTTLExpired], [ErrRejectedContextCancelled],
// [ErrRejectedShuttingDown] or [ErrRejectedNoEndpoints]); beside
// ErrRejectedSaturated, [ErrTooLarge] for a request that can never fit and
// [ErrDisplaced] for one displaced while queued; and, when the context ended the wait,
// the context's error (context.Canceled or context.DeadlineExceeded) and its
// cause, if it has a different one.
type RejectionError struct {
	// Outcome is the terminal outcome; never OutcomeDispatched.
	Outcome Outcome
	// Requested is the flow key the caller asked for.
	Requested FlowKey
	// Effective is the band that refused or dropped the request. When no
	// band could take it ([Config.NeverPromote] with no band at or below
	// the requested priority), Effective equals Requested.
	Effective FlowKey
	// RetryAfter is when the caller may come back: the moment the scope
	// that refused the request should have a place for it, after the places
	// promised to earlier refusals (see the package doc's Retry-After
	// section). Whole seconds, rounded up, between 1s and 30s. It is set on
	// OutcomeRejectedSaturated, a displaced request's included — from the
	// [PriorServiceTime] prior until that scope has a measured drain rate
	// — but never for a request that can never fit; on
	// OutcomeRejectedTTLExpired of a queued request, from its band; to 1s
	// on OutcomeRejectedNoEndpoints; and on an evicted admission's
	// [Admission.Err], to 1s while its band has room to queue it and from
	// the band otherwise. Otherwise it is 0 (none).
	RetryAfter time.Duration
	// QueueTime is how long the request waited in its band before it was
	// dropped; 0 for a request that was never queued.
	QueueTime time.Duration

	limit    limitKind
	limitVal int64 // the bound that refused the request
	tooLarge bool  // the request exceeds a byte capacity: ErrTooLarge
	ctxErr   error // the context's error, when the context ended the wait
	ctxCause error // context.Cause, when it differs from ctxErr
}

// sentinel returns the sentinel error of an outcome.
func (o Outcome) sentinel() error {
	switch o {
	case OutcomeRejectedSaturated:
		return ErrRejectedSaturated
	case OutcomeRejectedTTLExpired:
		return ErrRejectedTTLExpired
	case OutcomeRejectedContextCancelled:
		return ErrRejectedContextCancelled
	case OutcomeRejectedShuttingDown:
		return ErrRejectedShuttingDown
	case OutcomeRejectedNoEndpoints:
		return ErrRejectedNoEndpoints
	case OutcomeEvicted:
		return ErrEvicted
	case OutcomeEvictedPriority:
		return ErrEvictedPriority
	}
	return nil
}

// Error describes the rejection, e.g. "flowcontrol: priority 5 (band 0):
// rejected-saturated: band 0 request capacity 10 reached; retry after 3s".
func (e *RejectionError) Error() string {
	var sb strings.Builder
	sb.WriteString("flowcontrol: priority ")
	sb.WriteString(strconv.Itoa(e.Requested.Priority))
	if e.Effective.Priority != e.Requested.Priority {
		sb.WriteString(" (band ")
		sb.WriteString(strconv.Itoa(e.Effective.Priority))
		sb.WriteString(")")
	}
	sb.WriteString(": ")
	sb.WriteString(e.Outcome.String())
	band := "band " + strconv.Itoa(e.Effective.Priority)
	val := strconv.FormatInt(e.limitVal, 10)
	switch e.limit {
	case limitBandRequests:
		sb.WriteString(": " + band + " request capacity " + val + " reached")
	case limitBandBytes:
		sb.WriteString(": " + band + " byte capacity " + val + " exceeded")
	case limitGlobalRequests:
		sb.WriteString(": global request capacity " + val + " reached")
	case limitGlobalBytes:
		sb.WriteString(": global byte capacity " + val + " exceeded")
	case limitBandCost:
		sb.WriteString(": " + band + " cost capacity " + val + " exceeded")
	case limitGlobalCost:
		sb.WriteString(": global cost capacity " + val + " exceeded")
	case limitFlowRequests:
		sb.WriteString(": flow " + strconv.Quote(e.Requested.ID) + " request capacity " + val + " in " + band + " reached")
	case limitDisplaced:
		sb.WriteString(": displaced from its queue by a fairer flow, one holding less than its share of a full queue")
	case limitNoEndpoints:
		sb.WriteString(": the gate has no endpoints to send it to")
	case limitCounterRange:
		sb.WriteString(": the queued bytes or cost would pass the range of the controller's counters")
	case limitRevoked:
		sb.WriteString(": revoked while running, for band " + val)
	case limitNoBand:
		sb.WriteString(": no band at or below priority " + strconv.Itoa(e.Requested.Priority) + " (never-promote)")
	}
	if e.tooLarge {
		sb.WriteString(" by the request alone: it can never fit")
	}
	if e.QueueTime > 0 {
		sb.WriteString(" after " + e.QueueTime.String() + " queued")
	}
	if e.ctxErr != nil {
		sb.WriteString(": " + e.ctxErr.Error())
		if e.ctxCause != nil {
			sb.WriteString(": " + e.ctxCause.Error())
		}
	}
	if e.RetryAfter > 0 {
		sb.WriteString("; retry after " + e.RetryAfter.String())
	}
	return sb.String()
}

// Unwrap returns the outcome's sentinel, its detail ([ErrTooLarge] or
// [ErrDisplaced]) if any and, when the context ended the wait, the
// context's error and its distinct cause.
func (e *RejectionError) Unwrap() []error {
	errs := make([]error, 0, 3)
	if s := e.Outcome.sentinel(); s != nil {
		errs = append(errs, s)
	}
	if e.tooLarge {
		errs = append(errs, ErrTooLarge)
	}
	if e.limit == limitDisplaced {
		errs = append(errs, ErrDisplaced)
	}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	if e.ctxCause != nil {
		errs = append(errs, e.ctxCause)
	}
	return errs
}

// Event reports one terminal outcome to [Config.Observer].
type Event struct {
	// Requested is the flow key the caller asked for.
	Requested FlowKey
	// Effective is the band that handled (or refused) the request; see
	// [RejectionError.Effective]. The band of the event is
	// Effective.Priority.
	Effective FlowKey
	// Outcome is the terminal outcome.
	Outcome Outcome
	// QueueTime is the time the request spent queued: 0 when it was
	// dispatched or refused at once.
	QueueTime time.Duration
	// Queued reports whether the request waited in its band's queue:
	// false when its outcome was reached within its EnqueueAndWait or
	// Submit call (started or refused at once), whatever QueueTime reads
	// on a coarse or virtual clock. An OutcomeRejectedSaturated that was
	// Queued is a displacement (its error wrapped [ErrDisplaced]): a
	// capacity rejection is never queued.
	Queued bool
	// EnqueueTime is how long the controller took over the request's
	// enqueue — capacity checks, displacement, the gate's first answer,
	// the insert, waiting for the lock among them: from the call until the
	// outcome was reached (Queued false) or the request was in its queue
	// (Queued true). It is read from the controller's clock only when
	// Observer or Waiting is set; otherwise it is 0.
	EnqueueTime time.Duration
	// ByteSize is the byte size the request counted as ([Request.ByteSize]
	// within [0, MaxRequestBytes]).
	ByteSize int64
	// Tag is the request's [Request.Tag].
	Tag any
}
