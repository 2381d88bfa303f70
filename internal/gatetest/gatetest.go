// Package gatetest holds the test gates that the tests of several Sluice
// packages share. Only tests import it.
package gatetest

import (
	"sync"

	"github.com/sluicegate/sluice/flowcontrol"
)

// UsageGate is a MeteredGate with unlimited slots that keeps the usage it
// hears from Returned.
type UsageGate struct {
	mu       sync.Mutex
	returned []flowcontrol.Usage
}

func (*UsageGate) TryAcquire(int) bool   { return true }
func (*UsageGate) Release(int)           {}
func (*UsageGate) Took(flowcontrol.Slot) {}

// Returned keeps u.
func (g *UsageGate) Returned(u flowcontrol.Usage) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.returned = append(g.returned, u)
}

// Returns is what Returned heard, in order.
func (g *UsageGate) Returns() []flowcontrol.Usage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]flowcontrol.Usage(nil), g.returned...)
}
