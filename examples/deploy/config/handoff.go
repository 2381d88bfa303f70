package config

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// PriorityHandoffFlag turns the priority hand-off on (or, =false, off)
// whatever gateway.priorityHandoff.enabled says; the file's map and
// bounds still apply.
const PriorityHandoffFlag = "priority-handoff"

// priorityHandoff reads gateway.priorityHandoff: true, false, or a
// mapping of enabled, map (band → vLLM priority), min and max
// ([flowhttp.PriorityHandoff]). A map, min or max is kept when enabled is
// false, so that -priority-handoff can turn the file's mapping on; it is
// checked either way: bounds in order, every value within them, and the
// map monotone (a higher band never mapped to a greater value, which vLLM
// serves later).
func (d *decoder) priorityHandoff(n *yaml.Node, path string) flowhttp.PriorityHandoff {
	var p flowhttp.PriorityHandoff
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		p.Enabled, _ = d.boolean(n, path)
		return p
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want true, false or a mapping of enabled, map, min and max, got %s", kindName(n))
		return p
	}
	entries := map[int]*yaml.Node{}
	d.mapping(n, path, []field{
		{"enabled", func(n *yaml.Node, p2 string) { p.Enabled, _ = d.boolean(n, p2) }},
		{"map", func(n *yaml.Node, p2 string) {
			d.entries(n, p2, func(k, v *yaml.Node) {
				band, err := strconv.Atoi(k.Value)
				if k.Tag != "!!int" || err != nil {
					d.errorf(k, p2, "key %s: want a band's priority, an integer", kindName(k))
					return
				}
				at := index(p2, band)
				d.remember(at, k)
				if isNull(v) {
					d.errorf(k, at, "want the vLLM priority of band %d, an integer, got null", band)
					return
				}
				value, ok := d.integer(resolve(v), at, math.MinInt64, math.MaxInt64)
				if !ok {
					return
				}
				if p.Map == nil {
					p.Map = map[int]int64{}
				}
				p.Map[band], entries[band] = value, k
			})
		}},
		{"min", func(n *yaml.Node, p2 string) { p.Min, _ = d.integer(n, p2, math.MinInt64, math.MaxInt64) }},
		{"max", func(n *yaml.Node, p2 string) { p.Max, _ = d.integer(n, p2, math.MinInt64, math.MaxInt64) }},
	})
	lo, hi := p.Bounds()
	if lo > hi {
		d.errorf(d.at[join(path, "min")], join(path, "min"), "%d is above max %d", lo, hi)
		return p
	}
	bands := slices.Sorted(maps.Keys(p.Map))
	for i, b := range bands {
		v, at := p.Map[b], index(join(path, "map"), b)
		if v < lo || v > hi {
			d.errorf(entries[b], at, "%d is outside [%d, %d] (min, max)", v, lo, hi)
			continue
		}
		if i > 0 && v > p.Map[bands[i-1]] {
			below := bands[i-1]
			d.errorf(entries[b], at, "band %d maps to %d, above band %d's %d: vLLM serves the lower value first, "+
				"so a higher band must map to a value no greater than a lower band's", b, v, below, p.Map[below])
		}
	}
	return p
}

// Handoff returns the priority hand-off a binary runs, given the file's
// (gateway.priorityHandoff): on when -priority-handoff says so, or when it
// is not given and the file enables it; off (the zero value, which
// [flowhttp.New] takes) otherwise.
func (f *Flags) Handoff(file flowhttp.PriorityHandoff) flowhttp.PriorityHandoff {
	if f.PriorityHandoffSet {
		file.Enabled = f.PriorityHandoff
	}
	if !file.Enabled {
		return flowhttp.PriorityHandoff{}
	}
	return file
}

// writeHandoff prints what the priority hand-off runs, for
// [Effective.Write]: off, or its mapping and the value each band's
// requests carry.
func writeHandoff(line func(int, string, ...any), p flowhttp.PriorityHandoff, bands []int) {
	if !p.Enabled {
		line(0, "priorityHandoff: off # the body's priority field goes to the model server as the client wrote it")
		return
	}
	line(0, "priorityHandoff: # the body's top-level priority (vLLM's: run it with --scheduling-policy priority, or it refuses a priority other than 0) is the admitting band's; a client's own is replaced")
	lo, hi := p.Bounds()
	line(1, "min: %d", lo)
	line(1, "max: %d", hi)
	if len(p.Map) == 0 {
		line(1, "map: default # priority = -band, clamped to [min, max]")
	} else {
		line(1, "map: # an unlisted band takes the nearest listed band's below it, else the lowest's")
		for _, b := range slices.Backward(slices.Sorted(maps.Keys(p.Map))) {
			line(2, "%d: %d", b, p.Map[b])
		}
	}
	line(1, "bands: # the priority each band's requests carry to the model server")
	for _, b := range slices.Backward(slices.Sorted(slices.Values(bands))) {
		line(2, "%d: %d", b, p.Value(b))
	}
}
