package flowhttp

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/sluicegate/sluice/flowcontrol"
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
	DefaultObjectiveHeader = "x-gateway-inference-objective"
	// DefaultFlowID is the flow ID of a request that names none.
	DefaultFlowID = "default-flow"
)

// ClassifyFunc turns a request into the flow key it asks admission under. It
// runs before the request is queued and must not read the body; the body is
// sized separately (see [Config.MaxBodyBytes]). A non-nil error refuses the
// request with 400 Bad Request, before flow control sees it.
type ClassifyFunc func(r *http.Request) (flowcontrol.FlowKey, error)

// HeaderClassifier classifies requests by their headers. It is the default
// classifier of a [Handler], and follows the same rules as the Envoy ext_proc
// adapter in examples/extproc.
//
// The flow ID is the first non-empty value of [FairnessIDHeader], else of
// [DeprecatedFairnessIDHeader], else [DefaultFlowID]. The priority is, in
// order: the decimal integer in PriorityHeader, when that is set and the
// value parses; the priority that Objectives maps the objective header's
// value to; otherwise DefaultPriority. Header names match in any letter case.
//
// The zero HeaderClassifier puts every request in its fairness flow at
// priority 0.
type HeaderClassifier struct {
	// PriorityHeader, when not empty, names a request header carrying the
	// priority as a decimal integer, such as "x-llm-d-priority". A value
	// that does not parse is ignored, as if the header were absent.
	PriorityHeader string
	// ObjectiveHeader names the header whose value Objectives is keyed by;
	// empty means [DefaultObjectiveHeader].
	ObjectiveHeader string
	// Objectives maps an objective name (for example "chat" or "batch") to
	// its priority. An objective it does not list gets DefaultPriority.
	Objectives map[string]int
	// DefaultPriority is the priority of a request that nothing above
	// classifies.
	DefaultPriority int
}

// FlowKey classifies a request by its headers h.
func (c HeaderClassifier) FlowKey(h http.Header) flowcontrol.FlowKey {
	key := flowcontrol.FlowKey{ID: DefaultFlowID, Priority: c.DefaultPriority}
	if id := headerValue(h, FairnessIDHeader); id != "" {
		key.ID = id
	} else if id := headerValue(h, DeprecatedFairnessIDHeader); id != "" {
		key.ID = id
	}
	if c.PriorityHeader != "" {
		if p, err := strconv.Atoi(strings.TrimSpace(headerValue(h, c.PriorityHeader))); err == nil {
			key.Priority = p
			return key
		}
	}
	if len(c.Objectives) > 0 {
		name := c.ObjectiveHeader
		if name == "" {
			name = DefaultObjectiveHeader
		}
		if objective := headerValue(h, name); objective != "" {
			if p, ok := c.Objectives[objective]; ok {
				key.Priority = p
			}
		}
	}
	return key
}

// Classify returns c.FlowKey(r.Header) and a nil error; it is a
// [ClassifyFunc].
func (c HeaderClassifier) Classify(r *http.Request) (flowcontrol.FlowKey, error) {
	return c.FlowKey(r.Header), nil
}

// isZero reports whether c is the zero HeaderClassifier (an empty, non-nil
// Objectives map counts as zero).
func (c HeaderClassifier) isZero() bool {
	return c.PriorityHeader == "" && c.ObjectiveHeader == "" && len(c.Objectives) == 0 && c.DefaultPriority == 0
}

// headerValue returns the first value of the header name in h, matching the
// name in any letter case: canonical keys through Get, and keys set directly
// in the map in another form by a scan.
func headerValue(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	for key, vs := range h {
		if len(vs) > 0 && len(key) == len(name) && strings.EqualFold(key, name) {
			return vs[0]
		}
	}
	return ""
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
