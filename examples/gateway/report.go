package main

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/headroom"
)

// numOutcomes is the number of flow-control outcomes the demo counts.
const numOutcomes = int(flowcontrol.OutcomeRejectedNoEndpoints) + 1

// flowCounters counts the flow-control outcomes of one flow in one band, as
// the controller's Observer reports them, and keeps the queue times of its
// dispatched requests.
type flowCounters struct {
	// outcomes counts by Outcome, but for the displacements, which end
	// rejected-saturated and are counted in displaced instead.
	outcomes  [numOutcomes]atomic.Int64
	displaced atomic.Int64

	mu         sync.Mutex
	queueTimes []time.Duration
}

func (f *flowCounters) count(ev flowcontrol.Event) {
	if ev.Outcome == flowcontrol.OutcomeRejectedSaturated && ev.Queued {
		// Only a displacement by a fairer flow is rejected-saturated
		// after it queued (flowcontrol.ErrDisplaced).
		f.displaced.Add(1)
		return
	}
	f.outcomes[ev.Outcome].Add(1)
	if ev.Outcome == flowcontrol.OutcomeDispatched {
		f.mu.Lock()
		f.queueTimes = append(f.queueTimes, ev.QueueTime)
		f.mu.Unlock()
	}
}

// bandCounters holds the counters of one band's flows: one per tenant of
// the classes it serves, and one for every other flow (curl, say).
type bandCounters struct {
	flows map[string]*flowCounters // read-only after start
	other flowCounters
}

func newBandCounters(priority int) *bandCounters {
	c := &bandCounters{flows: map[string]*flowCounters{}}
	for _, cl := range classes {
		if cl.band == priority {
			c.flows[cl.tenant] = &flowCounters{}
		}
	}
	return c
}

// flow returns the counters of flow id.
func (c *bandCounters) flow(id string) *flowCounters {
	if f := c.flows[id]; f != nil {
		return f
	}
	return &c.other
}

// flowRow is one tenant's line of the per-second table.
type flowRow struct {
	tenant    string
	class     int                // index in classes; -1 for the other flows
	counts    [numOutcomes]int64 // by Outcome, displacements apart
	displaced int64
	p95Queue  time.Duration
}

// bandRow is one band's lines of the per-second table.
type bandRow struct {
	queued, capacity, headroom int64
	flows                      []flowRow
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
		for ci, cl := range classes {
			if cl.band == b.priority {
				r.flows = append(r.flows, readFlow(cl.tenant, ci, c.flows[cl.tenant]))
			}
		}
		if other := readFlow("(other)", -1, &c.other); other.counts != ([numOutcomes]int64{}) {
			r.flows = append(r.flows, other)
		}
	}
	return rows
}

func readFlow(tenant string, class int, f *flowCounters) flowRow {
	r := flowRow{tenant: tenant, class: class}
	for o := range r.counts {
		r.counts[o] = f.outcomes[o].Load()
	}
	r.displaced = f.displaced.Load()
	f.mu.Lock()
	r.p95Queue = percentile(f.queueTimes, 0.95)
	f.mu.Unlock()
	return r
}

const tableHeader = "time  band  queued/cap  headroom  seen  tenant       sent  dispatched  saturated  displaced  expired  queue p95  SLO met"

// statusPrefix starts the line under each block of the table that shows the
// model servers' load and the gate's view.
const statusPrefix = "      servers: "

// printTable prints one block of the per-second table: a line per tenant,
// under its band's queue, capacity and headroom, then the line of status
// (the servers' load and the gate's view). stats is nil when there is no
// load generator.
func printTable(w io.Writer, elapsed time.Duration, rows []bandRow, stats clientStats, status string) {
	for i, b := range bands {
		r := rows[i]
		for j, f := range r.flows {
			when, band, queued, room, seen := "", "", "", "", ""
			if i == 0 && j == 0 {
				when = strconv.Itoa(int(elapsed.Round(time.Second)/time.Second)) + "s"
			}
			if j == 0 {
				band, queued = strconv.Itoa(b.priority), fmt.Sprintf("%d/%d", r.queued, r.capacity)
				room, seen = strconv.FormatInt(r.headroom, 10), stats.seen(b.priority)
			}
			fmt.Fprintf(w, "%4s  %4s  %10s  %8s  %4s  %-11s  %4s  %10d  %9d  %9d  %7d  %9s  %7s\n",
				when, band, queued, room, seen, f.tenant, stats.sent(f.class),
				f.counts[flowcontrol.OutcomeDispatched], f.counts[flowcontrol.OutcomeRejectedSaturated],
				f.displaced, f.counts[flowcontrol.OutcomeRejectedTTLExpired],
				queueP95(f), stats.sloMet(f.class))
		}
	}
	fmt.Fprintln(w, statusPrefix+status)
}

// status is the model servers' load and the gate's view now: a line of the
// table.
func (s *system) status() string {
	return serversLine(s.models) + "; gate: " + s.gates.status(s.fc)
}

// printServers prints what the model servers did: their peaks, as they
// were read every scrapeEvery.
func printServers(w io.Writer, s *system) {
	p := s.reader.peak()
	fmt.Fprintf(w, "model servers, read every %v: at most %d waiting and %d running on one server, KV cache at most %.0f%% full\n",
		scrapeEvery, p.Waiting, p.Running, 100*p.KVCacheUsage)
}

// sent returns the requests the clients of class sent, or "-".
func (cs clientStats) sent(class int) string {
	if cs == nil || class < 0 {
		return "-"
	}
	s := cs[class]
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.Itoa(s.sent)
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

// sloMet returns the share of the requests with an SLO of class that met
// it, or "-". A request that was rejected or failed missed its SLO.
func (cs clientStats) sloMet(class int) string {
	if cs == nil || class < 0 || len(classes[class].slosMS) == 0 {
		return "-"
	}
	s := cs[class]
	s.mu.Lock()
	defer s.mu.Unlock()
	return percent(s.sloMet, s.sloDone)
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
	fmt.Fprintln(w, "class          priority→band  tenant       sent  completed  success  saturated  expired  cancelled  shutdown  failed  SLO met  TTFT p50    p95")
	for i, c := range classes {
		s := stats[i]
		s.mu.Lock()
		slo := "-"
		if len(c.slosMS) > 0 {
			slo = percent(s.sloMet, s.sloDone)
		}
		shutdown := s.dropped[flowcontrol.OutcomeRejectedShuttingDown.String()]
		// Requests still queued when the load stopped say nothing of the
		// gateway: success counts the others.
		// A displacement answers rejected-saturated, as it never reached
		// a server: the client counts it saturated.
		fmt.Fprintf(w, "%-13s  %13s  %-11s  %4d  %9d  %7s  %9d  %7d  %9d  %8d  %6d  %7s  %8s  %5s\n",
			c.name, fmt.Sprintf("%d→%d", c.priority, c.band), c.tenant, s.sent, s.completed,
			percent(s.completed, s.sent-shutdown),
			s.dropped[flowcontrol.OutcomeRejectedSaturated.String()],
			s.dropped[flowcontrol.OutcomeRejectedTTLExpired.String()],
			s.dropped[flowcontrol.OutcomeRejectedContextCancelled.String()],
			shutdown, s.failed, slo, millis(percentile(s.ttfts, 0.5)), millis(percentile(s.ttfts, 0.95)))
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

// queueP95 returns the 95th percentile of a flow's queue times, "0ms"
// included, or "-" when nothing was dispatched.
func queueP95(f flowRow) string {
	if f.counts[flowcontrol.OutcomeDispatched] == 0 {
		return "-"
	}
	return strconv.FormatInt(f.p95Queue.Milliseconds(), 10) + "ms"
}
