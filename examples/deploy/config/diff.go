package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/ordering"
)

// Running is what a binary runs that a reload compares: the controller's
// configuration, the gate's, and the settings of its gateway section.
type Running struct {
	Flow flowcontrol.Config
	Gate Gate
	// Backends are the model servers' URLs as written.
	Backends       []string
	ScrapeInterval time.Duration
	ScrapeTimeout  time.Duration
	GracePeriod    time.Duration
	DrainDelay     time.Duration
	// PriorityHandoff is the hand-off that runs ([Flags.Handoff]).
	PriorityHandoff flowhttp.PriorityHandoff
}

// Change is what moving a running binary from one configuration to another
// takes. A binary that reloads its file applies it all or not at all: with
// any Restart reason it keeps the running configuration.
type Change struct {
	// Provision lists the bands to give [flowcontrol.FlowController.ProvisionBand]:
	// each new band, and each band whose capacities or TTL changed.
	Provision []flowcontrol.BandConfig
	// Added lists the priorities of the new bands, which a metrics
	// exporter starts to watch.
	Added []int
	// Live describes each change that applies at once, for a log: those
	// of Provision, and new backends, grace period or drain delay, which the binary
	// applies itself.
	Live []string
	// Restart describes each change only a restart can make.
	Restart []string
}

// Diff compares what a binary runs with what a reloaded file gives. Bands
// may be added, their capacities and TTLs changed, and the backends and
// the grace period and drain delay replaced while the binary runs; everything else — the
// priority hand-off, a
// band removed, a band's ordering, queue, fairness or guarantee, the
// controller-wide capacities and TTLs, the fallback, displacement,
// in-flight eviction, the gate, the scrape interval and timeout, and the
// number of backends when a per-endpoint concurrency budget multiplies by
// it — takes a restart. A new band may have a guarantee only if a running
// band has one: a controller started with none tracks none.
func Diff(old, next Running) Change {
	c := diffFlow(old.Flow, next.Flow)
	var restart []string
	restartf := func(format string, args ...any) { restart = append(restart, fmt.Sprintf(format, args...)) }
	if old.ScrapeInterval != next.ScrapeInterval {
		restartf("gateway.scrapeInterval %s → %s", old.ScrapeInterval, next.ScrapeInterval)
	}
	if old.ScrapeTimeout != next.ScrapeTimeout {
		restartf("gateway.scrapeTimeout %s → %s", old.ScrapeTimeout, next.ScrapeTimeout)
	}
	if !reflect.DeepEqual(old.Gate, next.Gate) {
		restartf("the gate: %s → %s", old.Gate, next.Gate)
	} else if cc := next.Gate.Concurrency; cc != nil && cc.PerEndpoint && len(old.Backends) != len(next.Backends) {
		restartf("the number of backends %d → %d, by which the concurrency gate's per-endpoint budgets are multiplied",
			len(old.Backends), len(next.Backends))
	}
	if !reflect.DeepEqual(old.PriorityHandoff, next.PriorityHandoff) {
		restartf("gateway.priorityHandoff %s → %s", old.PriorityHandoff, next.PriorityHandoff)
	}
	c.Restart = append(restart, c.Restart...)
	if !slices.Equal(old.Backends, next.Backends) {
		c.Live = append(c.Live, fmt.Sprintf("backends %v → %v", old.Backends, next.Backends))
	}
	if old.GracePeriod != next.GracePeriod {
		c.Live = append(c.Live, fmt.Sprintf("grace period %s → %s", old.GracePeriod, next.GracePeriod))
	}
	if old.DrainDelay != next.DrainDelay {
		c.Live = append(c.Live, fmt.Sprintf("drain delay %s → %s", old.DrainDelay, next.DrainDelay))
	}
	return c
}

// Apply makes the controller's part of c live: it provisions c.Provision on
// fc and calls watch, if not nil, with each added band. With any Restart
// reason it changes nothing and returns an error listing them.
func (c Change) Apply(fc *flowcontrol.FlowController, watch func(priority int)) error {
	if len(c.Restart) > 0 {
		return fmt.Errorf("it changes what only a restart can change: %s", strings.Join(c.Restart, "; "))
	}
	for _, bc := range c.Provision {
		if err := fc.ProvisionBand(bc); err != nil {
			return err
		}
	}
	if watch != nil {
		for _, p := range c.Added {
			watch(p)
		}
	}
	return nil
}

// diffFlow compares the controllers' configurations.
func diffFlow(old, next flowcontrol.Config) Change {
	var c Change
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
	if !reflect.DeepEqual(old.Eviction, next.Eviction) {
		restart("eviction %s → %s", evictionString(old.Eviction), evictionString(next.Eviction))
	}
	// Guarantees are shared out once: moving one band's to another, band
	// by band, could pass through a sum above 1, which the controller
	// refuses halfway through a reload. So they change only at a restart,
	// but for a new band's, which a controller that tracks guarantees
	// takes within the file's checked sum.
	lending := anyGuarantee(old.Bands)

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
			if nb.Guarantee != 0 && !lending {
				restart("band %d added with guarantee %v: the controller, started with no guarantee, tracks none", nb.Priority, nb.Guarantee)
				continue
			}
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
		if ob.Guarantee != nb.Guarantee {
			restart("band %d guarantee %v → %v", nb.Priority, ob.Guarantee, nb.Guarantee)
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
		slots := ""
		if s.SlotsPerEndpoint > 0 {
			slots = fmt.Sprintf(", slotsPerEndpoint %d", s.SlotsPerEndpoint)
		}
		parts = append(parts, fmt.Sprintf("saturation (queueDepthThreshold %d, kvCacheUtilThreshold %v, metricsStalenessThreshold %s%s)",
			s.QueueDepthThreshold, s.KVCacheUtilThreshold, s.MetricsStalenessThreshold, slots))
	}
	if c := g.Concurrency; c != nil {
		per := ""
		if c.PerEndpoint {
			per = " per endpoint"
		}
		parts = append(parts, fmt.Sprintf("concurrency (%s, maxConcurrency %d, maxTokenConcurrency %d%s)",
			c.Mode, c.MaxConcurrency, c.MaxTokenConcurrency, per))
	}
	if u := g.UsageLimit; u != nil {
		parts = append(parts, "usageLimit ("+u.String()+")")
	}
	if len(parts) == 0 {
		return "none"
	}
	return fmt.Sprint(parts)
}
