package sim

import (
	"slices"
	"time"
)

// Scrape reads every server's metrics every interval, all of them at the
// same instant, from time 0, and hands each reading to read with the
// server's index, as a router's scraper would. It reads on past until
// until every request has ended: a gate fed by the readings fails closed
// once they stop, and would strand the requests still waiting. Call it
// before Run.
func (s *Sim) Scrape(every, until time.Duration, read func(server int, m ServerMetrics)) {
	pool, clock := s.Pool(), s.Clock()
	var tick func()
	tick = func() {
		for i := range pool.Servers() {
			read(i, pool.Metrics(i))
		}
		if clock.Elapsed() < until || !allEnded(s.Records()) {
			clock.After(every, tick)
		}
	}
	clock.At(0, tick)
}

// allEnded reports whether every record has ended.
func allEnded(recs []*Record) bool {
	for _, r := range slices.Backward(recs) {
		if !r.Done {
			return false
		}
	}
	return true
}
