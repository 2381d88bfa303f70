package sim

import (
	"math"
	"slices"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
)

// Summary is the aggregate of a set of records: what every table prints.
type Summary struct {
	// Requests counts the records that ended; Served those served.
	Requests, Served int
	// WithSLO counts the ended requests of tenants with an SLO, MetSLO
	// those whose first token came within it (retries included).
	WithSLO, MetSLO int
	// Good counts the requests that met their SLO, or were served if they
	// had none.
	Good int
	// Attempts, Retries (attempts after the first), WastedRetries (retries
	// not served either) and GaveUp (requests that ended unserved).
	Attempts, Retries, WastedRetries, GaveUp int
	// Drops counts the attempts the controller dropped, by outcome;
	// Failures those that failed on a server; Displaced the drops
	// displaced from their queue by a fairer flow, which Drops counts as
	// rejected-saturated.
	Drops     [NumOutcomes]int
	Failures  int
	Displaced int
	// Aborts counts the attempts aborted after their admission,
	// WastedTokens the output tokens they had decoded and WastedPrefill
	// the time their prefills ran ([Pool.Abort]).
	Aborts        int
	WastedTokens  int
	WastedPrefill time.Duration
	// Tokens measure the work. ServedTokens sums the output tokens of the
	// served requests, and GoodTokens those of the Good ones (goodput in
	// tokens: within the SLO, or served if none); a request that is not
	// served counts nothing, whatever it decoded. Preemptions and
	// RecomputedTokens sum the records' (prefill tokens computed again
	// after a preemption by a server).
	ServedTokens, GoodTokens      int
	Preemptions, RecomputedTokens int
	// Latency holds the end-to-end latencies of the served requests, from
	// the first attempt to the end of the last, sorted; QueueTimes their
	// served attempts' queue times, sorted.
	Latency, QueueTimes []time.Duration
}

// Summarize aggregates the ended records for which keep returns true (all
// of them when keep is nil).
func Summarize(records []*Record, keep func(*Record) bool) Summary {
	var s Summary
	for _, r := range records {
		if !r.Done || (keep != nil && !keep(r)) {
			continue
		}
		s.Requests++
		s.Attempts += r.Attempts
		s.Retries += r.Attempts - 1
		s.WastedRetries += r.Wasted
		s.Failures += r.Failures
		s.Displaced += r.Displaced
		s.Aborts += r.Aborts
		s.WastedTokens += r.WastedTokens
		s.WastedPrefill += r.WastedPrefill
		s.Preemptions += r.Preemptions
		s.RecomputedTokens += r.RecomputedTokens
		for o, n := range r.Drops {
			s.Drops[o] += n
		}
		if r.GaveUp {
			s.GaveUp++
		}
		good := r.Served
		if r.SLO > 0 {
			s.WithSLO++
			ttft, served := r.TTFT()
			good = served && ttft <= r.SLO
			if good {
				s.MetSLO++
			}
		}
		if r.Served {
			s.Served++
			s.ServedTokens += r.OutputTokens
			s.Latency = append(s.Latency, r.Latency())
			s.QueueTimes = append(s.QueueTimes, r.QueueTime)
		}
		if good {
			s.Good++
			s.GoodTokens += r.OutputTokens
		}
	}
	slices.Sort(s.Latency)
	slices.Sort(s.QueueTimes)
	return s
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted values by
// the nearest-rank method, or 0 for no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(n) * p / 100))
	return sorted[min(max(rank, 1), n)-1]
}

// Mean returns the mean of values, or 0 for none.
func Mean(values []time.Duration) time.Duration {
	if len(values) == 0 {
		return 0
	}
	var sum time.Duration
	for _, v := range values {
		sum += v
	}
	return sum / time.Duration(len(values))
}

// CapacityRejections returns the attempts rejected for capacity at the
// door: the rejected-saturated drops but the displacements (Displaced).
func (s Summary) CapacityRejections() int {
	return s.Drops[flowcontrol.OutcomeRejectedSaturated] - s.Displaced
}

// SLOShare returns MetSLO / WithSLO, or 0 with no SLOs.
func (s Summary) SLOShare() float64 {
	if s.WithSLO == 0 {
		return 0
	}
	return float64(s.MetSLO) / float64(s.WithSLO)
}

// Goodput returns Good per second of span.
func (s Summary) Goodput(span time.Duration) float64 {
	if span <= 0 {
		return 0
	}
	return float64(s.Good) / span.Seconds()
}
