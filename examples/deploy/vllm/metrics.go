package vllm

import "github.com/sluicegate/sluice/flowcontrol/gate"

// Metrics is one reading of an endpoint: the saturation gate's own type, so
// that a reading goes to a *gate.SaturationGate unchanged. ReadAt is when
// the scrape started (just before its request was sent), on [Config.Now]'s
// clock: the earliest instant at which the page's values could have been
// true, so that a reading never looks younger than it is, however long its
// page took to arrive. Give the scraper the gate's clock so that the gate
// times staleness on the clock it stamps with.
type Metrics = gate.Metrics

// A *gate.SaturationGate is a Sink.
var _ Sink = (*gate.SaturationGate)(nil)
