package flowhttp

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/header"
)

// Request headers the default classifier ([HeaderClassifier]) reads.
const (
	// FairnessIDHeader names the flow (tenant, client, workload) a request
	// belongs to.
	FairnessIDHeader = "x-llm-d-inference-fairness-id"
	// DeprecatedFairnessIDHeader is the older name of [FairnessIDHeader],
	// read only when FairnessIDHeader is absent or empty.
	DeprecatedFairnessIDHeader = "x-gateway-inference-fairness-id"
	// DefaultObjectiveHeader names the inference objective whose priority
	// [HeaderClassifier.Objectives] maps, unless
	// [HeaderClassifier.ObjectiveHeader] names another header.
	DefaultObjectiveHeader = "x-llm-d-inference-objective"
	// DeprecatedObjectiveHeader is the older name of
	// [DefaultObjectiveHeader], read only when the objective header is
	// DefaultObjectiveHeader and it is absent or empty.
	DeprecatedObjectiveHeader = "x-gateway-inference-objective"
	// TTLHeader carries a request's own queue-wait bound, as a Go duration
	// (time.ParseDuration: "500ms", "30s", "1m30s"). It can only shorten
	// the wait: the controller waits for the smallest of it, the band's
	// TTL and its default TTL. A value that does not parse, or is zero or
	// negative, is an error of the classifier (400 Bad Request from a
	// [Handler]): a client that asked for a bound must not silently get
	// none. An absent or empty header sets no bound.
	TTLHeader = "x-llm-d-inference-ttl"
	// DefaultFlowID is the flow ID of a request that names none.
	DefaultFlowID = "default-flow"
)

// Canonical forms of the fixed header names, for map lookups.
var (
	canonicalFairnessID           = http.CanonicalHeaderKey(FairnessIDHeader)
	canonicalDeprecatedFairnessID = http.CanonicalHeaderKey(DeprecatedFairnessIDHeader)
	canonicalDefaultObjective     = http.CanonicalHeaderKey(DefaultObjectiveHeader)
	canonicalDeprecatedObjective  = http.CanonicalHeaderKey(DeprecatedObjectiveHeader)
	canonicalTTL                  = http.CanonicalHeaderKey(TTLHeader)
)

// Classification is what a classifier decides about a request before it is
// queued. The zero Classification asks for band 0 in flow "" with no TTL of
// its own, at cost 1.
type Classification struct {
	// Key is the flow key the request asks admission under:
	// [flowcontrol.Request.Key].
	Key flowcontrol.FlowKey
	// TTL is the request's own queue-wait TTL ([flowcontrol.Request.TTL]):
	// zero or negative means none. The controller waits for the smallest of
	// it and the band's and default TTLs, so it can only shorten the wait.
	TTL time.Duration
	// Cost is the request's cost ([flowcontrol.Request.Cost]): what the
	// cost capacities and a cost-aware fairness policy such as
	// [flowcontrol.DeficitRoundRobin] count, typically an estimate of its
	// tokens. Zero or negative counts as 1, so a classifier that sets no
	// cost (such as [HeaderClassifier]) counts requests.
	//
	// A classifier can estimate it without a tokenizer, from the body the
	// Handler has read: the prompt's bytes divided by 4 (roughly right for
	// English text and the common BPE tokenizers) plus the request's
	// max_tokens, the output it may generate. The estimate has to rank
	// tenants' demands, not bill them; see the example of [ClassifyFunc].
	Cost int64
	// Tag is the request's [flowcontrol.Request.Tag]: a value of the
	// caller's own, such as the labels its metrics count the request
	// under, that the controller hands back unread in the events its
	// Observer and Waiting hooks hear.
	Tag any
}

// ClassifyFunc classifies a request before it is queued. A non-nil error
// refuses the request with 400 Bad Request, before flow control sees it,
// and its text is the message of the error body.
//
// The [Handler] has read the body already (up to [Config.MaxBodyBytes]; a
// longer one is refused with 413 before the classifier runs) and r.Body
// replays it, so a classifier may read it, or take its bytes without a
// copy with [BodyBytes], for example to estimate the request's cost from
// the prompt; the wrapped handler still receives the whole body. With a negative MaxBodyBytes the body is not read
// beforehand, and a classifier that reads it takes it from the wrapped
// handler.
type ClassifyFunc func(r *http.Request) (Classification, error)

// HeaderClassifier classifies requests by their headers. It is the default
// classifier of a [Handler], and the Envoy ext_proc adapter in
// examples/extproc uses it too.
//
// The flow ID is the value of [FairnessIDHeader], else of
// [DeprecatedFairnessIDHeader], else [DefaultFlowID]. The priority is, in
// order: the decimal integer in PriorityHeader, when that is set and the
// value parses; the priority that Objectives maps the objective's name to
// (the value of ObjectiveHeader, or of [DefaultObjectiveHeader], else
// [DeprecatedObjectiveHeader]); otherwise DefaultPriority. The TTL is read
// from [TTLHeader], whose bad values are errors.
//
// Header names match in any letter case. When the map holds a name under
// several spellings (keys set directly, bypassing canonicalization), the
// value read is deterministic: the first value of the canonical key when
// that key has any value, else the first value of the smallest matching key
// in byte order; the rule ordering.Item.HeaderValue follows. An empty value
// counts as absent; a canonical key holding one empty value hides the other
// spellings.
//
// The zero HeaderClassifier puts every request in its fairness flow at
// priority 0, with the TTL its header asks for.
type HeaderClassifier struct {
	// PriorityHeader, when not empty, names a request header carrying the
	// priority as a decimal integer, such as "x-llm-d-priority". A value
	// that does not parse is ignored, as if the header were absent.
	PriorityHeader string
	// ObjectiveHeader names the header whose value Objectives is keyed by.
	// Empty means [DefaultObjectiveHeader]; that name (set or by default)
	// has [DeprecatedObjectiveHeader] as its alias, read when it is absent
	// or empty. Any other name is read alone.
	ObjectiveHeader string
	// Objectives maps an objective name (for example "chat" or "batch") to
	// its priority. An objective it does not list gets DefaultPriority.
	Objectives map[string]int
	// DefaultPriority is the priority of a request that nothing above
	// classifies.
	DefaultPriority int
}

// FlowKey returns the flow key of a request with headers h; the TTL is not
// read, so it never fails.
func (c HeaderClassifier) FlowKey(h http.Header) flowcontrol.FlowKey {
	key := flowcontrol.FlowKey{ID: DefaultFlowID, Priority: c.DefaultPriority}
	if id := headerValue(h, canonicalFairnessID); id != "" {
		key.ID = id
	} else if id := headerValue(h, canonicalDeprecatedFairnessID); id != "" {
		key.ID = id
	}
	if c.PriorityHeader != "" {
		v := headerValue(h, http.CanonicalHeaderKey(c.PriorityHeader))
		if p, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			key.Priority = p
			return key
		}
	}
	if len(c.Objectives) > 0 {
		if p, ok := c.Objectives[c.objective(h)]; ok {
			key.Priority = p
		}
	}
	return key
}

// objective returns the objective a request with headers h names, or "".
func (c HeaderClassifier) objective(h http.Header) string {
	name := canonicalDefaultObjective
	if c.ObjectiveHeader != "" {
		name = http.CanonicalHeaderKey(c.ObjectiveHeader)
	}
	v := headerValue(h, name)
	if v == "" && name == canonicalDefaultObjective {
		v = headerValue(h, canonicalDeprecatedObjective)
	}
	return v
}

// ClassifyHeader classifies a request with headers h: the flow key of
// [HeaderClassifier.FlowKey] and the TTL of [TTLHeader]. It fails only for
// a TTL header that does not hold a positive Go duration; the error names
// the header and quotes the value.
func (c HeaderClassifier) ClassifyHeader(h http.Header) (Classification, error) {
	ttl, err := headerTTL(h)
	if err != nil {
		return Classification{}, err
	}
	return Classification{Key: c.FlowKey(h), TTL: ttl}, nil
}

// Classify returns c.ClassifyHeader(r.Header); it is a [ClassifyFunc].
func (c HeaderClassifier) Classify(r *http.Request) (Classification, error) {
	return c.ClassifyHeader(r.Header)
}

// headerTTL reads TTLHeader from h: 0 when it is absent or empty.
func headerTTL(h http.Header) (time.Duration, error) {
	v := strings.TrimSpace(headerValue(h, canonicalTTL))
	if v == "" {
		return 0, nil
	}
	ttl, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, fmt.Errorf("flowhttp: %s %q: not a Go duration such as \"30s\" or \"500ms\"", TTLHeader, v)
	case ttl <= 0:
		return 0, fmt.Errorf("flowhttp: %s %q: not positive", TTLHeader, v)
	}
	return ttl, nil
}

// isZero reports whether c is the zero HeaderClassifier (an empty, non-nil
// Objectives map counts as zero).
func (c HeaderClassifier) isZero() bool {
	return c.PriorityHeader == "" && c.ObjectiveHeader == "" && len(c.Objectives) == 0 && c.DefaultPriority == 0
}

// headerValue returns the value of the header canonical (in canonical
// form) in h by header.Value's rule, or "" when there is none.
func headerValue(h http.Header, canonical string) string {
	v, _ := header.Value(h, canonical)
	return v
}

// validHeaderName reports whether name is a non-empty HTTP token (RFC 9110,
// section 5.6.2), as a header field name must be.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
