package config

import (
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/flowcontrol"
)

// evictionKnobs reads Sluice's eviction mapping (controller.eviction, or
// flowControl.eviction in the llm-d form) into a [flowcontrol.Eviction]:
// sheddableBelow (Below), maxRevocationsPerDecision (MaxPerDecision, at
// least 1), confirmationGrace (Grace; 0 written is none, which the
// Eviction spells negative, since its 0 is the gate's own lag) and
// confirmationTimeout (Timeout, above zero). Unset keys keep llm-d-router's
// defaults, the zero Eviction's.
func (d *decoder) evictionKnobs(n *yaml.Node, path string) *flowcontrol.Eviction {
	e := &flowcontrol.Eviction{}
	d.mapping(n, path, []field{
		{"sheddableBelow", func(n *yaml.Node, p string) { e.Below, _ = d.intValue(n, p, math.MinInt, math.MaxInt) }},
		{"maxRevocationsPerDecision", func(n *yaml.Node, p string) {
			v, ok := d.intValue(n, p, math.MinInt, math.MaxInt)
			if ok && v < 1 {
				d.errorf(n, p, "must be at least 1, got %d: a decision that may revoke nothing frees nothing", v)
				return
			}
			e.MaxPerDecision = v
		}},
		{"confirmationGrace", func(n *yaml.Node, p string) {
			if v, ok := d.duration(n, p); ok {
				e.Grace = v
				if v == 0 {
					e.Grace = -1
				}
			}
		}},
		{"confirmationTimeout", d.positiveDuration(&e.Timeout)},
	})
	return e
}

// eviction reads Sluice's controller.eviction: true (llm-d-router's
// defaults), false (none, as when it is absent) or a mapping of knobs
// (see evictionKnobs).
func (d *decoder) eviction(n *yaml.Node, path string) *flowcontrol.Eviction {
	if n.Kind == yaml.MappingNode {
		return d.evictionKnobs(n, path)
	}
	if n.Kind == yaml.ScalarNode && n.Tag != "!!bool" {
		d.errorf(n, path, "want true, false or a mapping of sheddableBelow, maxRevocationsPerDecision, confirmationGrace and confirmationTimeout, got %s", kindName(n))
		return nil
	}
	if on, ok := d.boolean(n, path); ok && on {
		return &flowcontrol.Eviction{}
	}
	return nil
}

// guarantee returns a reader of a band's guarantee: a fraction in [0, 1].
func (d *decoder) guarantee(dst *float64) func(*yaml.Node, string) {
	return func(n *yaml.Node, p string) {
		v, ok := d.float(n, p)
		if !ok {
			return
		}
		if v < 0 || v > 1 {
			d.errorf(n, p, "%v is out of range: want a fraction of the gate's capacity in [0, 1]", v)
			return
		}
		*dst = v
	}
}

// guaranteeSlack is how far past 1 the bands' guarantees may add up, for
// fractions that do not sum exactly in binary (0.7 + 0.2 + 0.1), as
// flowcontrol.New allows.
const guaranteeSlack = 1e-9

// checkGuarantees reports the band whose guarantee takes the bands'
// guarantees past 1, paths[i] being band i's place.
func (d *decoder) checkGuarantees(bands []flowcontrol.BandConfig, paths []string) {
	sum := 0.0
	for i, bc := range bands {
		if bc.Guarantee == 0 {
			continue
		}
		sum += bc.Guarantee
		if sum > 1+guaranteeSlack {
			p := join(paths[i], "guarantee")
			d.errorf(d.at[p], p, "%v takes the bands' guarantees to %s, past 1: together they share out the gate's capacity once",
				bc.Guarantee, strconv.FormatFloat(sum, 'g', 6, 64))
			return
		}
	}
}

// anyGuarantee reports whether a band has a guarantee.
func anyGuarantee(bands []flowcontrol.BandConfig) bool {
	for _, bc := range bands {
		if bc.Guarantee != 0 {
			return true
		}
	}
	return false
}

// evictionString describes what e runs, its defaults applied, for
// messages: "none", or its four settings.
func evictionString(e *flowcontrol.Eviction) string {
	if e == nil {
		return "none"
	}
	below, maxPer, grace, timeout := evictionSettings(e)
	return fmt.Sprintf("sheddableBelow %d, maxRevocationsPerDecision %d, confirmationGrace %s, confirmationTimeout %s", below, maxPer, grace, timeout)
}

// evictionSettings returns e's settings as the controller runs them, in
// the file's spelling: a grace of 0 is the gate's own lag ("gate"), a
// negative one "none".
func evictionSettings(e *flowcontrol.Eviction) (below, maxPer int, grace, timeout string) {
	maxPer = e.MaxPerDecision
	if maxPer == 0 {
		maxPer = flowcontrol.DefaultMaxRevocationsPerDecision
	}
	switch {
	case e.Grace == 0:
		grace = "gate"
	case e.Grace < 0:
		grace = "none"
	default:
		grace = e.Grace.String()
	}
	t := e.Timeout
	if t == 0 {
		t = flowcontrol.DefaultRevocationTimeout
	}
	return e.Below, maxPer, grace, t.String()
}
