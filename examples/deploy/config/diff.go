package config

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/ordering"
)

// FlowChange is what moving a running controller from one configuration to
// another takes. A binary that reloads its file applies it all or not at
// all: with any Restart reason it keeps the running configuration.
type FlowChange struct {
	// Provision lists the bands to give [flowcontrol.FlowController.ProvisionBand]:
	// each new band, and each band whose capacities or TTL changed.
	Provision []flowcontrol.BandConfig
	// Added lists the priorities of the new bands, which a metrics
	// exporter starts to watch.
	Added []int
	// Live describes each change Provision makes, for a log.
	Live []string
	// Restart describes each change a running controller cannot make.
	Restart []string
}

// DiffFlow compares the controller configuration a binary runs with the one
// a reloaded file gives. Bands may be added, and their capacities and TTLs
// changed, while the controller runs; everything else — a band removed, a
// band's ordering, queue or fairness, the controller-wide capacities and
// TTLs, the fallback, displacement — takes a restart. The gates are not
// compared: see [Gate.String] for describing them.
func DiffFlow(old, next flowcontrol.Config) FlowChange {
	var c FlowChange
	restart := func(format string, args ...any) { c.Restart = append(c.Restart, fmt.Sprintf(format, args...)) }
	live := func(format string, args ...any) { c.Live = append(c.Live, fmt.Sprintf(format, args...)) }

	limit := func(name string, a, b capacity.Limit) {
		if a != b {
			restart("controller-wide %s %s → %s", name, a, b)
		}
	}
	limit("maxRequests", old.RequestCapacity, next.RequestCapacity)
	limit("maxBytes", old.ByteCapacity, next.ByteCapacity)
	limit("maxCost", old.CostCapacity, next.CostCapacity)
	if old.DefaultTTL != next.DefaultTTL {
		restart("defaultTTL %s → %s", old.DefaultTTL, next.DefaultTTL)
	}
	if old.NoEndpointsTTL != next.NoEndpointsTTL {
		restart("noEndpointsTTL %s → %s", old.NoEndpointsTTL, next.NoEndpointsTTL)
	}
	if old.FallbackPriority != next.FallbackPriority {
		restart("fallbackPriority %d → %d", old.FallbackPriority, next.FallbackPriority)
	}
	if old.NeverPromote != next.NeverPromote {
		restart("neverPromote %t → %t", old.NeverPromote, next.NeverPromote)
	}
	if old.NoDisplacement != next.NoDisplacement {
		restart("displacement %t → %t", !old.NoDisplacement, !next.NoDisplacement)
	}

	band := func(bands []flowcontrol.BandConfig, p int) (flowcontrol.BandConfig, bool) {
		i := slices.IndexFunc(bands, func(b flowcontrol.BandConfig) bool { return b.Priority == p })
		if i < 0 {
			return flowcontrol.BandConfig{}, false
		}
		return bands[i], true
	}
	for _, ob := range old.Bands {
		if _, ok := band(next.Bands, ob.Priority); !ok {
			restart("band %d removed", ob.Priority)
		}
	}
	for _, nb := range next.Bands {
		ob, ok := band(old.Bands, nb.Priority)
		if !ok {
			c.Provision = append(c.Provision, nb)
			c.Added = append(c.Added, nb.Priority)
			live("band %d added (maxRequests %s, ttl %s, %s)", nb.Priority, nb.RequestCapacity, nb.TTL, PolicyName(nb.Policy))
			continue
		}
		if a, b := PolicyName(ob.Policy), PolicyName(nb.Policy); a != b {
			restart("band %d ordering %s → %s", nb.Priority, a, b)
		}
		if a, b := queueKind(ob), queueKind(nb); a != b {
			restart("band %d queue %s → %s", nb.Priority, a, b)
		}
		if a, b := fairnessOf(ob), fairnessOf(nb); !reflect.DeepEqual(a, b) {
			restart("band %d fairness %s → %s (or its weights or quantum)", nb.Priority, a.TypeName(), b.TypeName())
		}
		changed := false
		bandLimit := func(name string, a, b capacity.Limit) {
			if a != b {
				changed = true
				live("band %d %s %s → %s", nb.Priority, name, a, b)
			}
		}
		bandLimit("maxRequests", ob.RequestCapacity, nb.RequestCapacity)
		bandLimit("maxBytes", ob.ByteCapacity, nb.ByteCapacity)
		bandLimit("maxCost", ob.CostCapacity, nb.CostCapacity)
		bandLimit("maxFlowRequests", ob.FlowRequestCapacity, nb.FlowRequestCapacity)
		if ob.TTL != nb.TTL {
			changed = true
			live("band %d ttl %s → %s", nb.Priority, ob.TTL, nb.TTL)
		}
		if changed {
			c.Provision = append(c.Provision, nb)
		}
	}
	return c
}

// PolicyName is the type name of a band's ordering policy; nil is FCFS.
func PolicyName(p ordering.Policy) string {
	if p == nil {
		return ordering.FCFSPolicyName
	}
	return p.TypeName()
}

// queueKind is the queue a band runs: its own, or its policy's default.
func queueKind(b flowcontrol.BandConfig) ordering.QueueKind {
	if b.Queue != "" {
		return b.Queue
	}
	p := b.Policy
	if p == nil {
		p = ordering.FCFS()
	}
	return ordering.DefaultQueueKind(p)
}

// fairnessOf is the fairness policy a band runs; nil is global strict.
func fairnessOf(b flowcontrol.BandConfig) flowcontrol.Fairness {
	if b.Fairness == nil {
		return flowcontrol.GlobalStrict()
	}
	return b.Fairness
}

// String names the gates of g with their settings, for messages: "none",
// or a list such as "[maxInFlight 4 saturation (…)]".
func (g Gate) String() string {
	var parts []string
	if g.MaxInFlight != nil {
		parts = append(parts, fmt.Sprintf("maxInFlight %d", *g.MaxInFlight))
	}
	if s := g.Saturation; s != nil {
		parts = append(parts, fmt.Sprintf("saturation (queueDepthThreshold %d, kvCacheUtilThreshold %v, metricsStalenessThreshold %s)",
			s.QueueDepthThreshold, s.KVCacheUtilThreshold, s.MetricsStalenessThreshold))
	}
	if c := g.Concurrency; c != nil {
		per := ""
		if c.PerEndpoint {
			per = " per endpoint"
		}
		parts = append(parts, fmt.Sprintf("concurrency (%s, maxConcurrency %d, maxTokenConcurrency %d%s)",
			c.Mode, c.MaxConcurrency, c.MaxTokenConcurrency, per))
	}
	if len(parts) == 0 {
		return "none"
	}
	return fmt.Sprint(parts)
}
