package metrics_test

// Every label is bounded in count and in length, the overflow counted as
// "other", whatever clients send (issue 21, defects 5 and 6).

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
	"github.com/sluicegate/sluice/flowcontrol"
)

// scrape returns the text exposition of m.
func scrape(t testing.TB, m *metrics.Metrics) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m))
	families, err := reg.Gather()
	require.NoError(t, err)
	var sb strings.Builder
	for _, f := range families {
		_, err := expfmt.MetricFamilyToText(&sb, f)
		require.NoError(t, err)
	}
	return sb.String()
}

// Fifty requests with 64 KiB fairness ids made one scrape 60 MB (defect
// 5). A fairness id longer than the length cap, or not UTF-8, is "other"
// and takes no place under the count cap; one at the cap keeps its label.
func TestLongFairnessIDsAreOther(t *testing.T) {
	m := metrics.New(metrics.Options{QueueDurationBuckets: []float64{1}})
	for i := range 50 {
		m.Observe(event(fmt.Sprintf("%d-%s", i, strings.Repeat("x", 64<<10)), 0, flowcontrol.OutcomeDispatched, 0))
	}
	atCap := strings.Repeat("a", metrics.DefaultMaxLabelLength)
	m.Observe(event(atCap, 0, flowcontrol.OutcomeDispatched, 0))
	m.Observe(event(atCap+"b", 0, flowcontrol.OutcomeDispatched, 0))
	m.Observe(event("bad\xff", 0, flowcontrol.OutcomeDispatched, 0))

	wantCounts(t, m, queueDuration, map[string]float64{
		"fairness_id=" + atCap + ",model_name=,outcome=Dispatched,priority=0,target_model_name=": 1,
		"fairness_id=other,model_name=,outcome=Dispatched,priority=0,target_model_name=":         50 + 1 + 1,
	})
	page := scrape(t, m)
	require.Less(t, len(page), 16<<10, "the page holds no long id")

	short := metrics.New(metrics.Options{MaxLabelLength: 4, MaxFairnessIDs: 1})
	short.Observe(event("tooLong", 0, flowcontrol.OutcomeDispatched, 0))
	short.Observe(event("ok", 0, flowcontrol.OutcomeDispatched, 0)) // the long one took no place
	wantCounts(t, short, queueDuration, map[string]float64{
		"fairness_id=ok,model_name=,outcome=Dispatched,priority=0,target_model_name=":    1,
		"fairness_id=other,model_name=,outcome=Dispatched,priority=0,target_model_name=": 1,
	})
}

// With NeverPromote a client's own priority reaches the metrics, and the
// series cache grew with every one and copied itself each time: 328 KB
// per request after 6,000 distinct priorities (defect 6). Past the cap,
// a new priority costs no allocation at all.
func TestManyPrioritiesAllocateNothing(t *testing.T) {
	m := metrics.New(metrics.Options{QueueDurationBuckets: []float64{1}})
	for p := range 6000 {
		m.Observe(event("f", -p, flowcontrol.OutcomeRejectedSaturated, 0))
	}
	next := -6000
	allocs := testing.AllocsPerRun(1000, func() {
		m.Observe(event("f", next, flowcontrol.OutcomeRejectedSaturated, 0))
		next--
	})
	require.Zero(t, allocs, "allocations per Observe of a new priority past the cap")
	got := counts(t, m, requestsTotal)
	require.Len(t, got, metrics.DefaultMaxPriorities+1)
	require.Equal(t, float64(6000-metrics.DefaultMaxPriorities+1001), got["outcome=RejectedCapacity,priority=other"])
}

// The class property, over 200 seeded draws: whatever flow ids and
// priorities arrive, the series
// stay within the caps — at most MaxFairnessIDs + 2 fairness_id values
// ("" and "other" besides), MaxPriorities + 1 priority values, no label
// value longer than MaxLabelLength — and no event is lost.
func TestLabelsStayBounded(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 21))
		maxIDs, maxLen, maxPrios := 1+rng.IntN(8), 1+rng.IntN(16), 1+rng.IntN(8)
		m := metrics.New(metrics.Options{MaxFairnessIDs: maxIDs, MaxLabelLength: maxLen, MaxPriorities: maxPrios,
			QueueDurationBuckets: []float64{1}, Outcomes: metrics.DroppedReasons})
		n := rng.IntN(200)
		for range n {
			id := make([]byte, rng.IntN(40))
			for i := range id {
				id[i] = byte(rng.IntN(256)) // any byte: UTF-8 or not
			}
			prio := int(rng.Uint64())
			if rng.IntN(2) == 0 {
				prio = rng.IntN(20) - 10 // some priorities repeat
			}
			m.Observe(event(string(id), prio, flowcontrol.OutcomeRejectedSaturated, 0))
		}
		ids, prios := map[string]bool{}, map[string]bool{}
		var total float64
		for series, c := range counts(t, m, queueDuration) {
			total += c
			for kv := range strings.SplitSeq(series, ",") {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "fairness_id":
					ids[v] = true
					if len(v) > maxLen && v != "other" {
						t.Fatalf("seed %d: fairness_id of %d bytes, cap %d", seed, len(v), maxLen)
					}
				case "priority":
					prios[v] = true
				}
			}
		}
		if len(ids) > maxIDs+2 || len(prios) > maxPrios+1 {
			t.Fatalf("seed %d: %d fairness ids (cap %d), %d priorities (cap %d)", seed, len(ids), maxIDs, len(prios), maxPrios)
		}
		if total != float64(n) {
			t.Fatalf("seed %d: %v events counted, want %d", seed, total, n)
		}
	}
}
