package main

import (
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// gradientGate is the adaptive design gate.Adaptive was chosen over, kept
// here as the comparison row: a gradient on time to first token by
// Little's law. Over each window of responses, with Held their mean hold
// time and W = TTFT − target their queueing beyond the target,
//
//	gradient = clamp((Held − W) / Held, 0.5, 1.5)
//
// is the factor that would bring the requests queued at the servers to the
// target (the servers run in flight × (Held − wait)/Held requests; the
// rest queue), and the limit moves that way by gain per round trip (a
// window is window/limit of one). It grows only while at least half the
// limit is in use. It needs no baseline of the unloaded latency, which
// Netflix's Gradient2 keeps and which moves when prompts grow. It does need
// each response's hold time, known only when its admission ends, so unlike
// gate.Adaptive it cannot learn from first tokens as they arrive
// (gate.FirstTokenGate): it reacts a response's length later.
type gradientGate struct {
	limit, min, max float64
	target          time.Duration
	gain            float64
	window, n       int
	sumHeld, sumFT  time.Duration
	used, inFlight  int
}

func newGradient(initial, minLimit, maxLimit int, target time.Duration) *gradientGate {
	return &gradientGate{limit: float64(initial), min: float64(minLimit), max: float64(maxLimit), target: target, gain: 1, window: 10}
}

func (g *gradientGate) TryAcquire(int) bool {
	if g.inFlight >= int(g.limit) {
		return false
	}
	g.inFlight++
	g.used = max(g.used, g.inFlight)
	return true
}

func (g *gradientGate) Release(int)    { g.inFlight-- }
func (g *gradientGate) Took(gate.Slot) {}

func (g *gradientGate) Returned(u gate.Usage) {
	g.inFlight--
	if u.Unused {
		return
	}
	ft := u.FirstToken
	if ft == 0 {
		ft = u.Held
	}
	g.n++
	g.sumHeld += u.Held
	g.sumFT += ft
	if g.n < g.window {
		return
	}
	held := g.sumHeld.Seconds()
	excess := g.sumFT.Seconds() - float64(g.n)*g.target.Seconds()
	gradient := max(0.5, min(1.5, (held-excess)/held))
	used := g.used
	g.n, g.sumHeld, g.sumFT, g.used = 0, 0, 0, g.inFlight
	if gradient > 1 && float64(used) < g.limit/2 {
		return // the limit is not in use: no evidence it may grow
	}
	step := g.gain * float64(g.window) / g.limit
	g.limit = max(g.min, min(g.max, g.limit*(1+step*(gradient-1))))
}

func (g *gradientGate) Limit() int { return int(g.limit) }
