package gate

import (
	"errors"
	"math"
)

// SoftReflectiveCeilingPolicyName is the type name of
// [SoftReflectiveCeiling]'s policy, llm-d-router's.
const SoftReflectiveCeilingPolicyName = "soft-reflective-ceiling-policy"

// SoftReflectiveCeiling returns llm-d-router's
// soft-reflective-ceiling-policy, which has no parameters: the highest band
// is never held back, and a lower band is held back more the fuller the
// gate is. With N bands and saturation s, the band of rank i (0 the
// highest) has the reflective ceiling
//
//	r = 1 − i × s / (N − 1)
//
// While s < r the band is open (ceiling 1). From r on it is open on one
// offer in period = max(1, round(s / (1 − s))) and closed (ceiling 0) on
// the others, so that it starts about one request in period while the
// saturation stays there: at s = 0.75, one in 3; at s = 0.9, one in 9. At
// s = 1 it is closed. A lone band is never held back. With two bands the
// low one reaches its reflective ceiling 1 − s at s = 0.5.
//
// The policy counts each band's offers past its reflective ceiling, so it
// has state: it serves the one [Ceiling] gate it is given to, and through
// it one controller, whose lock guards the counts; a second controller is
// refused when it binds the gate. llm-d-router counts one tick per band in
// each dispatch cycle; Sluice, which has no cycle, counts the offers of the
// band itself, so a band starts one in period of the offers it gets (one
// at each enqueue or Done while it is the highest band waiting). The
// alternation makes the ceilings of adjacent bands not always fall with
// the priority, as llm-d's do not; a band is offered only when no band
// above it waits, so a closed band above never hides an open one below.
func SoftReflectiveCeiling() UsageLimitPolicy { return &softReflective{} }

type softReflective struct {
	ticks []uint64 // by rank; guarded by the owner's lock
	owner binding
}

func (*softReflective) TypeName() string { return SoftReflectiveCeilingPolicyName }

func (p *softReflective) bind(c Controller) error {
	if !p.owner.claim(c) {
		return errors.New("the policy already serves another controller: give each Ceiling its own")
	}
	return nil
}

func (p *softReflective) unbind(c Controller) { p.owner.release(c) }

func (p *softReflective) Ceiling(s float64, rank int, priorities []int) float64 {
	n := len(priorities)
	if rank == 0 || n <= 1 {
		return 1
	}
	reflective := 1 - float64(rank)*s/float64(n-1)
	switch {
	case s < reflective:
		return 1
	case s >= 1:
		return 0
	}
	// 1e-9 keeps the period finite as s nears 1, as llm-d does.
	period := uint64(max(1, math.Round(s/(1-s+1e-9))))
	if rank >= len(p.ticks) {
		p.ticks = append(p.ticks, make([]uint64, rank+1-len(p.ticks))...) // only when a band is added
	}
	p.ticks[rank]++
	if p.ticks[rank]%period == 0 {
		return 1
	}
	return 0
}
