package flowcontrol

import (
	"math"
	"math/bits"
)

// Guaranteed shares (BandConfig.Guarantee) are the reclaimer's: a band
// short of its guarantee goes first, and takes back what others borrowed
// by revocation (reclaimFor). These are its hooks in dispatch and enqueue.

// head returns the band whose head dispatch offers when desc[i] is the
// highest band with waiters: a band short of its guarantee at or below it,
// if any, goes first, unless it is sheddable and a band above it needs
// the slot for its deadlines (floorYields); otherwise desc[i]. Called
// with mu held.
func (r *reclaimer) head(c *FlowController, desc []*band, i int) *band {
	if r.lending {
		if g := c.guaranteedHead(i); g != nil && !c.floorYields(g, i) {
			return g
		}
	}
	return desc[i]
}

// first reports whether a request for band b would be the head dispatch
// offers first, when top is the highest band with waiters: see isFirst.
// Called with mu held.
func (r *reclaimer) first(c *FlowController, b *band, top int) bool {
	if !r.lending {
		return top > b.index
	}
	if g := c.guaranteedHead(top); g != nil && g.index <= b.index && !c.floorYields(g, top) {
		return false
	}
	return top > b.index || c.shortOfGuarantee(b) && !c.floorYields(b, top)
}

// guaranteedHead returns the highest band at index from or below that has
// waiters and is short of its guarantee, or nil. Called with mu held.
func (c *FlowController) guaranteedHead(from int) *band {
	desc := c.bands.Load().desc
	for w := from / 64; w < len(c.nonEmpty); w++ {
		word := c.nonEmpty[w]
		if w == from/64 {
			word &^= 1<<(from%64) - 1
		}
		for word != 0 {
			i := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if b := desc[i]; c.shortOfGuarantee(b) {
				return b
			}
		}
	}
	return nil
}

// shortOfGuarantee reports whether b uses less than its guarantee: its
// running admissions, each counted at the mean footprint (the gate's
// saturation ÷ the requests in flight; without a SaturationDetector, its
// share of the requests in flight), come to less than its guarantee.
func (c *FlowController) shortOfGuarantee(b *band) bool {
	if b.guarantee <= 0 {
		return false
	}
	if c.inFlight == 0 {
		return true
	}
	return float64(b.running.n)*c.reclaim.saturation() < b.guarantee*float64(c.inFlight)
}

// guaranteed returns how many admissions of b its guarantee covers at the
// footprint credit: ⌈guarantee ÷ credit⌉.
func guaranteed(b *band, credit float64) int {
	if b.guarantee <= 0 {
		return 0
	}
	return int(math.Ceil(b.guarantee/credit - 1e-9))
}

// checkGuarantees checks that band b, or a new band when b is nil, may have
// guarantee g: the controller tracks guarantees, and all of them together,
// with g for b's, come to at most 1. Called with mu held.
func (c *FlowController) checkGuarantees(b *band, g float64) error {
	if g == 0 {
		return nil
	}
	if c.reclaim == nil || !c.reclaim.lending {
		return configError("BandConfig.Guarantee", g, "the controller was created with no guarantee: it tracks none")
	}
	sum := g
	for _, o := range c.bands.Load().desc {
		if o != b {
			sum += o.guarantee
		}
	}
	if sum > 1+1e-9 {
		return configError("BandConfig.Guarantee", g, "takes the bands' guarantees past 1")
	}
	return nil
}

// checkGuarantee validates a band's guarantee.
func checkGuarantee(name string, g float64) error {
	if !(g >= 0 && g <= 1) || math.IsNaN(g) {
		return configError(name, g, "not a fraction in [0, 1]")
	}
	return nil
}
