package main

import (
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/headroom"
)

// bandCounters counts the flow-control outcomes of one band, as the
// controller's Observer reports them.
type bandCounters struct {
	outcomes [flowcontrol.OutcomeRejectedShuttingDown + 1]atomic.Int64 // by Outcome
	fallback atomic.Int64                                              // requests for an unprovisioned priority
}

// bandRow is one band's line of the per-second table.
type bandRow struct {
	queued, capacity, headroom int64
	counts                     [flowcontrol.OutcomeRejectedShuttingDown + 1]int64
	fallback                   int64
}

// rows reads every band now, in the order of bands.
func (s *system) rows() []bandRow {
	rows := make([]bandRow, len(bands))
	for i, b := range bands {
		r := &rows[i]
		if snap, err := s.fc.CapacitySnapshot(b.priority); err == nil {
			r.queued = snap.QueuedRequests
			r.capacity, _ = snap.RequestCapacity.Value()
			r.headroom, _ = headroom.FromSnapshot(snap)
		}
		c := s.counters[b.priority]
		for o := range r.counts {
			r.counts[o] = c.outcomes[o].Load()
		}
		r.fallback = c.fallback.Load()
	}
	return rows
}

const tableHeader = "time  band  queued/cap  headroom  seen  dispatched  saturated  expired  cancelled  fallback  SLO met"

// printTable prints one block of the per-second table: a row per band. stats
// is nil when there is no load generator.
func printTable(w io.Writer, elapsed time.Duration, rows []bandRow, stats clientStats) {
	for i, b := range bands {
		r := rows[i]
		when := ""
		if i == 0 {
			when = strconv.Itoa(int(elapsed.Round(time.Second)/time.Second)) + "s"
		}
		fmt.Fprintf(w, "%4s  %4d  %10s  %8d  %4s  %10d  %9d  %7d  %9d  %8d  %7s\n",
			when, b.priority, fmt.Sprintf("%d/%d", r.queued, r.capacity), r.headroom, stats.seen(b.priority),
			r.counts[flowcontrol.OutcomeDispatched], r.counts[flowcontrol.OutcomeRejectedSaturated],
			r.counts[flowcontrol.OutcomeRejectedTTLExpired], r.counts[flowcontrol.OutcomeRejectedContextCancelled],
			r.fallback, stats.sloMet(b.priority))
	}
}

// seen returns the headroom value a client last received from band, or "-".
func (cs clientStats) seen(band int) string {
	value, at := "-", time.Time{}
	if cs == nil {
		return value
	}
	for i, c := range classes {
		if c.band != band {
			continue
		}
		s := cs[i]
		s.mu.Lock()
		if s.lastHeadroom != "" && s.lastAt.After(at) {
			value, at = s.lastHeadroom, s.lastAt
		}
		s.mu.Unlock()
	}
	return value
}

// sloMet returns the share of requests with an SLO served by band that met
// it, or "-". A request that was rejected or failed missed its SLO.
func (cs clientStats) sloMet(band int) string {
	met, done := 0, 0
	if cs == nil {
		return "-"
	}
	for i, c := range classes {
		if c.band != band || len(c.slosMS) == 0 {
			continue
		}
		s := cs[i]
		s.mu.Lock()
		met, done = met+s.sloMet, done+s.sloDone
		s.mu.Unlock()
	}
	return percent(met, done)
}

func percent(n, of int) string {
	if of == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(n)/float64(of), 'f', 1, 64) + "%"
}

// printSummary prints what every class of clients saw: load was offered for
// elapsed, and the last request ended at drained.
func printSummary(w io.Writer, elapsed, drained time.Duration, stats clientStats, capacity float64) {
	var sent, completed, seen, bad int
	for _, s := range stats {
		s.mu.Lock()
		sent, completed = sent+s.sent, completed+s.completed
		seen, bad = seen+s.headroomSeen, bad+s.headroomBad
		s.mu.Unlock()
	}
	fmt.Fprintf(w, "\nsummary: sent %d in %.1fs (%.1f/s); completed %d by %.1fs (%.1f/s); capacity for this mix about %.1f/s\n",
		sent, elapsed.Seconds(), float64(sent)/elapsed.Seconds(),
		completed, drained.Seconds(), float64(completed)/drained.Seconds(), capacity)
	fmt.Fprintln(w, "class          priority→band  sent  completed  saturated  expired  cancelled  shutdown  failed  SLO met  TTFT p50    p95")
	for i, c := range classes {
		s := stats[i]
		s.mu.Lock()
		slo := "-"
		if len(c.slosMS) > 0 {
			slo = percent(s.sloMet, s.sloDone)
		}
		fmt.Fprintf(w, "%-13s  %13s  %4d  %9d  %9d  %7d  %9d  %8d  %6d  %7s  %8s  %5s\n",
			c.name, fmt.Sprintf("%d→%d", c.priority, c.band), s.sent, s.completed,
			s.dropped[flowcontrol.OutcomeRejectedSaturated.String()],
			s.dropped[flowcontrol.OutcomeRejectedTTLExpired.String()],
			s.dropped[flowcontrol.OutcomeRejectedContextCancelled.String()],
			s.dropped[flowcontrol.OutcomeRejectedShuttingDown.String()],
			s.failed, slo, millis(percentile(s.ttfts, 0.5)), millis(percentile(s.ttfts, 0.95)))
		s.mu.Unlock()
	}
	fmt.Fprintf(w, "%s on %d of %d completed responses; %d malformed or above the band's capacity (the model servers all send 999)\n",
		headroom.HeaderName, seen, completed, bad)
}

func millis(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}
