package flowcontrol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
)

func TestOutcomeStrings(t *testing.T) {
	// One stem per outcome: the constant is Outcome + the stem, the
	// sentinel Err + the stem, and String() the stem as llm-d's dropped
	// reason spells it.
	cases := []struct {
		o        flowcontrol.Outcome
		str      string
		status   int
		sentinel error
	}{
		{flowcontrol.OutcomeDispatched, "dispatched", 200, nil},
		{flowcontrol.OutcomeRejectedSaturated, "rejected-saturated", 429, flowcontrol.ErrRejectedSaturated},
		{flowcontrol.OutcomeRejectedTTLExpired, "rejected-ttl-expired", 429, flowcontrol.ErrRejectedTTLExpired},
		{flowcontrol.OutcomeRejectedContextCancelled, "rejected-context-cancelled", 503, flowcontrol.ErrRejectedContextCancelled},
		{flowcontrol.OutcomeRejectedShuttingDown, "rejected-shutting-down", 503, flowcontrol.ErrRejectedShuttingDown},
		{flowcontrol.OutcomeRejectedNoEndpoints, "rejected-no-endpoints", 503, flowcontrol.ErrRejectedNoEndpoints},
		{flowcontrol.OutcomeEvicted, "evicted", 429, flowcontrol.ErrEvicted},
		{flowcontrol.OutcomeEvictedPriority, "evicted-priority", 429, flowcontrol.ErrEvictedPriority},
		{flowcontrol.Outcome(99), "Outcome(99)", 0, nil},
	}
	for _, tc := range cases {
		if tc.o.String() != tc.str || tc.o.HTTPStatus() != tc.status {
			t.Errorf("%d: %q %d; want %q %d", int(tc.o), tc.o.String(), tc.o.HTTPStatus(), tc.str, tc.status)
		}
		if tc.sentinel == nil {
			continue
		}
		err := error(&flowcontrol.RejectionError{Outcome: tc.o, Requested: key("x", 1), Effective: key("x", 0)})
		if !errors.Is(err, tc.sentinel) {
			t.Errorf("%v: errors.Is(%v, its sentinel) is false", tc.o, err)
		}
		if !strings.Contains(err.Error(), tc.str) || !strings.Contains(err.Error(), "priority 1 (band 0)") {
			t.Errorf("%v: error text %q", tc.o, err)
		}
	}
	// The outcomes are numbered from 0 without a gap, so that code that
	// counts them (an array by outcome, a metric's label values) can stop
	// at the first value without a name.
	for o := flowcontrol.OutcomeDispatched; o <= flowcontrol.OutcomeEvictedPriority; o++ {
		if strings.HasPrefix(o.String(), "Outcome(") {
			t.Errorf("outcome %d has no name, below OutcomeEvictedPriority", int(o))
		}
	}
	if next := flowcontrol.OutcomeEvictedPriority + 1; !strings.HasPrefix(next.String(), "Outcome(") {
		t.Errorf("outcome %d is %q: a new outcome belongs in this test's table", int(next), next)
	}
	if flowcontrol.DroppedReasonHeader != "x-llm-d-request-dropped-reason" {
		t.Fatal(flowcontrol.DroppedReasonHeader)
	}
}
