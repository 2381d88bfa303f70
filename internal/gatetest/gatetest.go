// Package gatetest holds the test gates that the tests of several Sluice
// packages share. Only tests import it.
package gatetest

import (
	"sync"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// UsageGate is a MeteredGate with unlimited slots that keeps the usage it
// hears from Returned.
type UsageGate struct {
	mu       sync.Mutex
	returned []gate.Usage
}

func (*UsageGate) TryAcquire(int) bool { return true }
func (*UsageGate) Release(int)         {}
func (*UsageGate) Took(gate.Slot)      {}

// Returned keeps u.
func (g *UsageGate) Returned(u gate.Usage) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.returned = append(g.returned, u)
}

// Returns is what Returned heard, in order.
func (g *UsageGate) Returns() []gate.Usage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gate.Usage(nil), g.returned...)
}
