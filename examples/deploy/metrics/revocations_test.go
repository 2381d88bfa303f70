package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
)

// The five families of in-flight eviction, by name.
var revocationFamilies = []string{
	metrics.Prefix + "flow_control_revocations_issued_total",
	metrics.Prefix + "flow_control_revocations_total",
	metrics.Prefix + "flow_control_reclaim_target",
	metrics.Prefix + "flow_control_pending_reclaim",
	metrics.Prefix + "flow_control_revocation_confirmation_seconds",
}

// revocationExposition is the exposition of the revocation families in
// pool-a after one revocation for band 10: the pending reclaim and the
// reclaim target as given; ended, how the revocation ended ("" while it
// is outstanding); and confirmation, the confirmation histogram's lines
// ("" when it observed nothing).
func revocationExposition(pending, target int, ended, confirmation string) string {
	text := fmt.Sprintf(`
# HELP llm_d_epp_flow_control_pending_reclaim What the revocations not yet seen by the gate free, outstanding or in their grace after confirmation, in the gate's saturation units: read from the watched controller at each scrape, otherwise as of the last revocation step.
# TYPE llm_d_epp_flow_control_pending_reclaim gauge
llm_d_epp_flow_control_pending_reclaim{inference_pool="pool-a"} %d
# HELP llm_d_epp_flow_control_reclaim_target What the last revocation decision set out to free, in the gate's saturation units.
# TYPE llm_d_epp_flow_control_reclaim_target gauge
llm_d_epp_flow_control_reclaim_target{inference_pool="pool-a"} %d
# HELP llm_d_epp_flow_control_revocations_issued_total In-flight admissions revoked to make room for a higher band, by the priority of the band they were revoked for.
# TYPE llm_d_epp_flow_control_revocations_issued_total counter
llm_d_epp_flow_control_revocations_issued_total{inference_pool="pool-a",priority="10"} 1
`, pending, target) + confirmation
	if ended != "" {
		text += fmt.Sprintf(`# HELP llm_d_epp_flow_control_revocations_total Revocations by how they ended: confirmed (the holder stopped the request) or timed_out (it did not within the timeout). Each issued revocation ends once.
# TYPE llm_d_epp_flow_control_revocations_total counter
llm_d_epp_flow_control_revocations_total{inference_pool="pool-a",outcome=%q} 1
`, ended)
	}
	return text
}

// evicting is a controller with one slot (MaxInFlight(1)), an interactive
// band 10 and a sheddable band -1, with in-flight eviction as e says,
// counted by m; and a registry holding m.
type evicting struct {
	c     *flowcontrol.FlowController
	clock *clocktest.Clock
	reg   *prometheus.Registry
}

func newEvicting(t *testing.T, m *metrics.Metrics, e flowcontrol.Eviction) *evicting {
	t.Helper()
	clock := clocktest.New(time.Unix(1_000_000, 0))
	c, err := flowcontrol.New(flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
		FallbackPriority: 10,
		Gate:             gate.MaxInFlight(1),
		Clock:            clock,
		Eviction:         &e,
		Observer:         m.Observe,
		Waiting:          m.Waiting,
		Revocations:      m.Revocations,
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	return &evicting{c: c, clock: clock, reg: reg}
}

// evictOnce makes every revocation family of m exist: a revocation
// confirmed, on a controller of its own.
func evictOnce(t *testing.T, m *metrics.Metrics) {
	t.Helper()
	e := newEvicting(t, m, flowcontrol.Eviction{})
	batch, chat := e.revokeBatch(t)
	batch.Done()
	require.NotNil(t, chat.adm)
	chat.adm.Done()
}

// revokeBatch admits a batch request (band -1) into the one slot, then
// submits an interactive one (band 10), which revokes it. It returns the
// batch admission, revoked, and the interactive request's result, which
// is filled in once it is dispatched.
func (e *evicting) revokeBatch(t *testing.T) (batch *flowcontrol.Admission, chat *result) {
	t.Helper()
	ctx := context.Background()
	batch, err := e.c.EnqueueAndWait(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "batch", Priority: -1}})
	require.NoError(t, err)
	chat = &result{}
	e.c.Submit(ctx, flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "chat", Priority: 10}}, chat.done)
	require.Nil(t, chat.adm, "the interactive request started while the batch one held the slot")
	select {
	case <-batch.Revoked():
	default:
		t.Fatal("the batch admission was not revoked for the waiting interactive request")
	}
	return batch, chat
}

type result struct {
	adm *flowcontrol.Admission
	err error
}

func (r *result) done(a *flowcontrol.Admission, err error) { r.adm, r.err = a, err }

// A revocation confirmed 300ms after its issue: one issued for band 10,
// one confirmed, its wait in the histogram, the decision's target (one
// slot of one: saturation 1), and nothing pending once confirmed. The
// evicted request is Dispatched once in flow_control_requests_total, as
// llm-d-router counts it.
func TestRevocationConfirmedMetrics(t *testing.T) {
	m := metrics.New(metrics.Options{InferencePool: "pool-a"})
	e := newEvicting(t, m, flowcontrol.Eviction{})
	batch, chat := e.revokeBatch(t)

	issued := revocationExposition(1, 1, "", "")
	require.NoError(t, testutil.GatherAndCompare(e.reg, strings.NewReader(issued), revocationFamilies...))

	e.clock.Advance(300 * time.Millisecond)
	batch.Done() // confirms; the slot goes to the interactive request
	require.NoError(t, chat.err)
	require.NotNil(t, chat.adm, "the interactive request did not start once the batch one confirmed")
	chat.adm.Done()

	confirmed := revocationExposition(0, 1, "confirmed", `# HELP llm_d_epp_flow_control_revocation_confirmation_seconds Time from a revocation to its confirmation, when the holder stopped the request; timeouts are not observed.
# TYPE llm_d_epp_flow_control_revocation_confirmation_seconds histogram
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="0.005"} 0
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="0.01"} 0
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="0.025"} 0
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="0.05"} 0
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="0.1"} 0
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="0.25"} 0
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="0.5"} 1
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="1"} 1
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="2.5"} 1
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="5"} 1
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="10"} 1
llm_d_epp_flow_control_revocation_confirmation_seconds_bucket{inference_pool="pool-a",le="+Inf"} 1
llm_d_epp_flow_control_revocation_confirmation_seconds_sum{inference_pool="pool-a"} 0.3
llm_d_epp_flow_control_revocation_confirmation_seconds_count{inference_pool="pool-a"} 1
`)
	require.NoError(t, testutil.GatherAndCompare(e.reg, strings.NewReader(confirmed), revocationFamilies...))
	wantCounts(t, m, requestsTotal, map[string]float64{
		"inference_pool=pool-a,outcome=Dispatched,priority=-1": 1,
		"inference_pool=pool-a,outcome=Dispatched,priority=10": 1,
	}, "an evicted request is counted once, Dispatched, as llm-d-router counts it")
	// The histograms observed each request once, at its dispatch.
	require.Equal(t, 2, testutil.CollectAndCount(m, queueDuration))
}

// With the dropped reasons as outcome labels, the evicted request is
// counted a second time, under evicted-priority, in its own band.
func TestRevocationCountsEvictedPriorityAsDroppedReason(t *testing.T) {
	m := metrics.New(metrics.Options{Outcomes: metrics.DroppedReasons})
	e := newEvicting(t, m, flowcontrol.Eviction{})
	batch, chat := e.revokeBatch(t)
	batch.Done()
	require.NotNil(t, chat.adm)
	chat.adm.Done()
	wantCounts(t, m, requestsTotal, map[string]float64{
		"outcome=dispatched,priority=-1":       1,
		"outcome=dispatched,priority=10":       1,
		"outcome=evicted-priority,priority=-1": 1,
	})
	wantCounts(t, m, queueDuration, map[string]float64{
		"fairness_id=batch,model_name=,outcome=dispatched,priority=-1,target_model_name=": 1,
		"fairness_id=chat,model_name=,outcome=dispatched,priority=10,target_model_name=":  1,
	}, "no histogram observes the eviction")
}

// A revocation whose holder does not stop the request within the timeout
// ends timed_out, which the histogram does not observe; its Done, later,
// is no confirmation. A second interactive request waits behind the
// first: the decision it would take waits for the revocation, and the
// controller wakes at the timeout to take it.
func TestRevocationTimedOutMetrics(t *testing.T) {
	m := metrics.New(metrics.Options{InferencePool: "pool-a"})
	e := newEvicting(t, m, flowcontrol.Eviction{Timeout: time.Second})
	batch, chat := e.revokeBatch(t)
	chat2 := &result{}
	e.c.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "chat", Priority: 10}}, chat2.done)

	e.clock.Advance(999 * time.Millisecond)
	wantCounts(t, m, metrics.Prefix+"flow_control_revocations_total", map[string]float64{}, "ended before its timeout")
	e.clock.Advance(time.Millisecond) // the timeout: the controller's wake-up retires it

	timedOut := revocationExposition(0, 1, "timed_out", "")
	require.NoError(t, testutil.GatherAndCompare(e.reg, strings.NewReader(timedOut), revocationFamilies...))
	require.Nil(t, chat.adm, "the batch request still holds its slot")

	batch.Done()
	require.NotNil(t, chat.adm, "the slot went to the interactive request at the batch one's Done")
	chat.adm.Done()
	require.NotNil(t, chat2.adm)
	chat2.adm.Done()
	require.NoError(t, testutil.GatherAndCompare(e.reg, strings.NewReader(timedOut), revocationFamilies...),
		"a Done after the timeout is no confirmation")
}

// A controller that revokes nothing exports none of the families, and an
// issue the controller reports after its own confirmation (the holder
// stopped at once, on another goroutine) does not put back the pending
// reclaim the confirmation cleared.
func TestRevocationGauges(t *testing.T) {
	m := metrics.New(metrics.Options{})
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(""), revocationFamilies...))

	victim := flowcontrol.FlowKey{ID: "batch", Priority: -1}
	m.Revocations(flowcontrol.Revocation{Step: flowcontrol.RevocationConfirmed, Victim: victim, For: 10,
		Outcome: flowcontrol.OutcomeEvictedPriority, Waited: time.Millisecond, Pending: 0})
	m.Revocations(flowcontrol.Revocation{Step: flowcontrol.RevocationIssued, Victim: victim, For: 10,
		Outcome: flowcontrol.OutcomeEvictedPriority, Target: 0.5, Pending: 0.5})
	wantCounts(t, m, metrics.Prefix+"flow_control_pending_reclaim", map[string]float64{"": 0})
	wantCounts(t, m, metrics.Prefix+"flow_control_reclaim_target", map[string]float64{"": 0.5})

	m.Revocations(flowcontrol.Revocation{Step: flowcontrol.RevocationIssued, Victim: victim, For: 10, Target: 0.5, Pending: 0.5})
	wantCounts(t, m, metrics.Prefix+"flow_control_pending_reclaim", map[string]float64{"": 0.5}, "a later issue is written")
	m.Revocations(flowcontrol.Revocation{Step: 99, Pending: 7}) // a step this package does not know
	wantCounts(t, m, metrics.Prefix+"flow_control_pending_reclaim", map[string]float64{"": 0.5})
	wantCounts(t, m, metrics.Prefix+"flow_control_revocations_issued_total", map[string]float64{"priority=10": 2})
}

// The priority label of revocations_issued_total shares the cap of every
// other family's.
func TestRevocationPriorityIsBounded(t *testing.T) {
	m := metrics.New(metrics.Options{MaxPriorities: 2})
	for p := range 5 {
		m.Revocations(flowcontrol.Revocation{Step: flowcontrol.RevocationIssued, For: p})
	}
	require.Equal(t, map[string]float64{"priority=0": 1, "priority=1": 1, "priority=other": 3},
		counts(t, m, metrics.Prefix+"flow_control_revocations_issued_total"))
}

// With the controller watched, a scrape reads the pending reclaim from it:
// a confirmed revocation's share is pending through its grace, and gone
// once the grace has passed, though no step says so.
func TestRevocationPendingReadAtScrape(t *testing.T) {
	m := metrics.New(metrics.Options{})
	e := newEvicting(t, m, flowcontrol.Eviction{Grace: time.Second})
	m.Watch(e.c, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}}, FallbackPriority: 10})
	batch, chat := e.revokeBatch(t)
	batch.Done()
	require.NotNil(t, chat.adm)
	pending := metrics.Prefix + "flow_control_pending_reclaim"
	wantCounts(t, m, pending, map[string]float64{"": 1}, "within the grace")
	e.clock.Advance(time.Second)
	wantCounts(t, m, pending, map[string]float64{"": 0}, "once the grace has passed")
	chat.adm.Done()
}
