package main

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outlier detection, after Envoy's: a backend that answers 5xx
// consecutive5xx times in a row is taken out of the pick for the base
// ejection time multiplied by the times it has been ejected, unless that
// would eject more than the max ejection percent of the backends; at
// least one always stays. A response the backend failed to give (the
// proxy's 502: a refused or reset connection) counts as a 5xx, as Envoy
// counts a locally originated error by default.
const (
	// DefaultConsecutive5xx is -outlier-consecutive-5xx, Envoy's
	// consecutive_5xx default.
	DefaultConsecutive5xx = 5
	// DefaultBaseEjectionTime is -outlier-base-ejection-time, Envoy's
	// base_ejection_time default.
	DefaultBaseEjectionTime = 30 * time.Second
	// DefaultMaxEjectionPercent is -outlier-max-ejection-percent. Envoy's
	// default is 10%, which with the handful of backends one gateway
	// fronts would eject none: half of them may go, and one always stays.
	DefaultMaxEjectionPercent = 50
	// maxEjectionTime bounds an ejection however often the backend was
	// ejected (Envoy's max_ejection_time default), unless the base time is
	// longer.
	maxEjectionTime = 300 * time.Second
	// warnEvery is the least time between two warnings of a backend's 5xx.
	warnEvery = 10 * time.Second
)

// outlierConfig configures a pool's outlier detection; the zero value
// turns it off.
type outlierConfig struct {
	// consecutive5xx is how many 5xx in a row eject a backend; 0: never.
	consecutive5xx int
	// baseEjectionTime is the first ejection's length; 0 means
	// DefaultBaseEjectionTime.
	baseEjectionTime time.Duration
	// maxEjectionPercent bounds the backends ejected at once; 0 means
	// DefaultMaxEjectionPercent.
	maxEjectionPercent int
}

// outlier is what the pool knows of a backend's answers.
type outlier struct {
	// responses counts the responses by status class: [0] 1xx ... [4] 5xx.
	responses [5]atomic.Uint64
	// consecutive5xx counts the 5xx since the last other answer or the
	// last ejection.
	consecutive5xx atomic.Int64
	// ejectedUntil is when the current ejection ends, in Unix
	// nanoseconds; 0 when the backend is not ejected.
	ejectedUntil atomic.Int64
	// lastEjectionEnd and ejections time the next ejection: ejections
	// counts those since the backend last stayed in the pick for as long
	// as its last ejection lasted.
	lastEjectionEnd atomic.Int64
	ejections       atomic.Int64
	// ejectionsTotal counts every ejection, for the metric.
	ejectionsTotal atomic.Uint64
	// lastWarn is when a 5xx of the backend was last logged at warn.
	lastWarn atomic.Int64
}

// ejectedAt reports whether the backend is out of the pick at now.
func (o *outlier) ejectedAt(now int64) bool {
	until := o.ejectedUntil.Load()
	return until != 0 && now < until
}

// record counts b's answer with status code, and ejects b after its
// consecutive5xx-th 5xx in a row.
func (p *pool) record(b *backend, code int, path string) {
	class := code / 100
	if class >= 1 && class <= 5 {
		b.responses[class-1].Add(1)
	}
	if class != 5 {
		b.consecutive5xx.Store(0)
		return
	}
	n := b.consecutive5xx.Add(1)
	now := p.clock.Now().UnixNano()
	if last := b.lastWarn.Load(); n == 1 && now-last >= int64(warnEvery) && b.lastWarn.CompareAndSwap(last, now) {
		p.log.Warn("backend answered 5xx", "backend", b.name, "status", code, "path", path)
	}
	if c := p.outlier.consecutive5xx; c > 0 && n >= int64(c) {
		p.eject(b, n)
	}
}

// eject takes b out of the pick, unless it is out already or that would
// eject more than the max ejection percent of the backends, or the last.
func (p *pool) eject(b *backend, in5xx int64) {
	p.ejectMu.Lock()
	defer p.ejectMu.Unlock()
	now := p.clock.Now()
	ns := now.UnixNano()
	if b.ejectedAt(ns) {
		return
	}
	list := p.list()
	ejected := 0
	for _, o := range list {
		if o.ejectedAt(ns) {
			ejected++
		}
	}
	if ejected+1 >= len(list) || (ejected+1)*100 > p.outlier.maxEjectionPercent*len(list) {
		p.log.Debug("backend not ejected: the max ejection percent is reached", "backend", b.name,
			"ejected", ejected, "backends", len(list), "max_percent", p.outlier.maxEjectionPercent)
		return
	}
	base := p.outlier.baseEjectionTime
	k := b.ejections.Load()
	if end := b.lastEjectionEnd.Load(); end != 0 && ns-end >= int64(base)*k {
		k = 0 // it stayed in as long as its last ejection lasted
	}
	k++
	b.ejections.Store(k)
	d := min(base*time.Duration(k), max(maxEjectionTime, base))
	b.ejectedUntil.Store(now.Add(d).UnixNano())
	b.lastEjectionEnd.Store(now.Add(d).UnixNano())
	b.consecutive5xx.Store(0)
	b.ejectionsTotal.Add(1)
	p.log.Warn("backend ejected: it answered 5xx in a row", "backend", b.name, "in_a_row", in5xx, "for", d, "ejections", k)
}

// returned reports whether b is in the pick at now, and logs its return
// from an ejection that has ended.
func (p *pool) returned(b *backend, now int64) bool {
	until := b.ejectedUntil.Load()
	if until == 0 {
		return true
	}
	if now < until {
		return false
	}
	if b.ejectedUntil.CompareAndSwap(until, 0) {
		p.log.Info("backend returns from its ejection", "backend", b.name)
	}
	return true
}

var (
	backendResponsesDesc = prometheus.NewDesc("sluice_gateway_backend_responses_total",
		"Responses of a backend by status class (1xx to 5xx); a request the backend failed to answer counts as the 502 the gateway answered.",
		[]string{"backend", "code_class"}, nil)
	backendEjectionsDesc = prometheus.NewDesc("sluice_gateway_backend_outlier_ejections_total",
		"Times outlier detection took a backend out of the pick for answering 5xx in a row.", []string{"backend"}, nil)
	backendEjectedDesc = prometheus.NewDesc("sluice_gateway_backend_outlier_ejected",
		"1 while outlier detection keeps a backend out of the pick, else 0.", []string{"backend"}, nil)
	codeClasses = [5]string{"1xx", "2xx", "3xx", "4xx", "5xx"}
)
