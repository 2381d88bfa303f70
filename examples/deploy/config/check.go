package config

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// CheckConfigFlag is the flag both binaries take to check their
// configuration and print what they would run, without starting, as
// nginx -t and promtool check config do.
const CheckConfigFlag = "check-config"

// Exit codes of a -check-config run: the configuration is valid (warnings
// or not), or it is not.
const (
	CheckOK      = 0
	CheckInvalid = 2
)

// Effective is what a binary runs once its flags and file are applied and
// checked, for -check-config to print ([Effective.Write]).
type Effective struct {
	// Binary names the program, for the first line.
	Binary string
	// ConfigPath is the -config file; "" for none.
	ConfigPath string
	// Form is the file's form; "" without a file.
	Form Form
	// Listen lists the addresses the binary would listen on, by what they
	// serve, in order, such as {"http", "127.0.0.1:8080"}.
	Listen [][2]string
	// Running is the controller, the gate and the gateway settings.
	Running
	// Inference are the routes flow control admits (-inference-path); none
	// means [DefaultInferenceRoutes], as the binaries read it.
	Inference InferenceRoutes
	// Classifier is how a request's flow and band are read from its
	// headers (-priority-header, -objective, -default-priority, and
	// sluice-extproc's -objective-header).
	Classifier flowhttp.HeaderClassifier
	// Cost says what a request costs (what a concurrency gate in tokens
	// mode, a cost capacity and deficit round robin count); "" leaves it
	// out.
	Cost string
	// Warnings are the file's and the binary's, formatted.
	Warnings []string
}

// Write prints e as YAML, in a fixed order and spelling, so that two runs
// over the same configuration print the same bytes and a diff of two
// outputs is a diff of what two configurations run: the listeners, the
// backends and how they are read, the grace period and drain delay of a
// shutdown, which requests are inference requests and how they are
// classified, the priority hand-off with the value each band carries, the
// fleet the binary is a replica of, the controller-wide capacities and
// TTLs, in-flight eviction
// with its defaults applied, each band as it runs (its capacities, its
// queue-wait TTL with the default applied, its ordering, queue, fairness
// and guarantee), the gate, and the warnings. Durations are Go durations
// ("none" for no TTL), capacities a whole number or "unbounded".
func (e Effective) Write(w io.Writer) error {
	var b strings.Builder
	line := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("  ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	// list prints a top-level sequence of quoted strings, [] when empty.
	list := func(name string, items []string) {
		if len(items) == 0 {
			line(0, "%s: []", name)
			return
		}
		line(0, "%s:", name)
		for _, item := range items {
			line(1, "- %s", quote(item))
		}
	}
	fmt.Fprintf(&b, "# %s -%s: the configuration is valid; this is what it runs.\n", e.Binary, CheckConfigFlag)
	if e.ConfigPath == "" {
		line(0, "config: none")
	} else {
		line(0, "config: %s", quote(e.ConfigPath))
		line(0, "form: %s", quote(string(e.Form)))
	}
	line(0, "listen:")
	for _, l := range e.Listen {
		line(1, "%s: %s", l[0], quote(l[1]))
	}
	list("backends", e.Backends)
	line(0, "scrapeInterval: %s", e.ScrapeInterval)
	line(0, "scrapeTimeout: %s", e.ScrapeTimeout)
	line(0, "gracePeriod: %s", e.GracePeriod)
	line(0, "drainDelay: %s", e.DrainDelay)
	routes := e.Inference.Routes()
	if len(routes) == 0 {
		routes = DefaultInferenceRoutes().Routes()
	}
	line(0, "inference: # admitted through flow control; every other request passes at once, neither queued nor gated")
	for _, r := range routes {
		line(1, "- %s", quote(r.String()))
	}
	c := e.Classifier
	line(0, "classification:")
	line(1, "flowHeader: %s # else %s; without either, flow %s", quote(flowhttp.FairnessIDHeader), flowhttp.DeprecatedFairnessIDHeader, quote(flowhttp.DefaultFlowID))
	if c.PriorityHeader == "" {
		line(1, "priorityHeader: none")
	} else {
		line(1, "priorityHeader: %s # an integer priority; wins over the objective", quote(c.PriorityHeader))
	}
	if c.ObjectiveHeader == "" || strings.EqualFold(c.ObjectiveHeader, flowhttp.DefaultObjectiveHeader) {
		line(1, "objectiveHeader: %s # else %s", quote(flowhttp.DefaultObjectiveHeader), flowhttp.DeprecatedObjectiveHeader)
	} else {
		line(1, "objectiveHeader: %s", quote(c.ObjectiveHeader))
	}
	if len(c.Objectives) == 0 {
		line(1, "objectives: {}")
	} else {
		line(1, "objectives:")
		for _, name := range slices.Sorted(maps.Keys(c.Objectives)) {
			line(2, "%s: %d", quote(name), c.Objectives[name])
		}
	}
	line(1, "defaultPriority: %d", c.DefaultPriority)
	line(1, "ttlHeader: %s # can only shorten the queue wait", quote(flowhttp.TTLHeader))
	if e.Cost != "" {
		line(1, "cost: %s", quote(e.Cost))
	}

	bands := make([]int, len(e.Flow.Bands))
	for i, bc := range e.Flow.Bands {
		bands[i] = bc.Priority
	}
	writeHandoff(line, e.PriorityHandoff, bands)
	writeFleet(line, e.Fleet, e.PriorityHandoff.Enabled)

	f := e.Flow
	line(0, "controller:")
	line(1, "maxRequests: %s", limit(f.RequestCapacity))
	line(1, "maxBytes: %s", limit(f.ByteCapacity))
	line(1, "maxCost: %s", limit(f.CostCapacity))
	line(1, "defaultTTL: %s", ttl(f.DefaultTTL))
	line(1, "noEndpointsTTL: %s", ttl(f.NoEndpointsTTL))
	line(1, "fallbackPriority: %d", f.FallbackPriority)
	line(1, "neverPromote: %t", f.NeverPromote)
	line(1, "displacement: %t", !f.NoDisplacement)
	if e := f.Eviction; e == nil {
		line(1, "eviction: none # a running request keeps its slot until it ends")
	} else {
		below, maxPer, grace, timeout := evictionSettings(e)
		line(1, "eviction:")
		line(2, "sheddableBelow: %d", below)
		line(2, "maxRevocationsPerDecision: %d", maxPer)
		if grace == "gate" {
			line(2, "confirmationGrace: gate # the gate's own lag, none for a gate that counts its slots")
		} else {
			line(2, "confirmationGrace: %s", grace)
		}
		line(2, "confirmationTimeout: %s", timeout)
	}
	line(1, "bands:")
	for _, bc := range f.Bands {
		wait := BandWait(bc, f.DefaultTTL)
		line(1, "- priority: %d", bc.Priority)
		line(2, "maxRequests: %s", limit(bc.RequestCapacity))
		line(2, "maxBytes: %s", limit(bc.ByteCapacity))
		line(2, "maxCost: %s", limit(bc.CostCapacity))
		line(2, "maxFlowRequests: %s", limit(bc.FlowRequestCapacity))
		line(2, "ttl: %s", ttl(wait))
		line(2, "ordering: %s", PolicyName(bc.Policy))
		line(2, "queue: %s", queueKind(bc))
		line(2, "fairness: %s", fairnessOf(bc).TypeName())
		line(2, "guarantee: %s", strconv.FormatFloat(bc.Guarantee, 'g', -1, 64))
	}

	g := e.Gate
	if !g.hasGate() {
		line(0, "gate: none # every request starts at once")
	} else {
		line(0, "gate:")
		handsOff := e.PriorityHandoff.Enabled
		if g.MaxInFlight != nil && handsOff {
			line(1, "maxInFlight: %d # the servers schedule by priority: a higher band passes the slots while a lower one runs", *g.MaxInFlight)
		} else if g.MaxInFlight != nil {
			line(1, "maxInFlight: %d", *g.MaxInFlight)
		}
		if s := g.Saturation; s != nil {
			line(1, "saturation:")
			line(2, "queueDepthThreshold: %d", s.QueueDepthThreshold)
			line(2, "kvCacheUtilThreshold: %s", strconv.FormatFloat(s.KVCacheUtilThreshold, 'g', -1, 64))
			line(2, "metricsStalenessThreshold: %s", s.MetricsStalenessThreshold)
			switch {
			case s.SlotsPerEndpoint > 0 && handsOff:
				line(2, "slotsPerEndpoint: %d # the servers schedule by priority: a higher band passes the lower ones' queued work", s.SlotsPerEndpoint)
			case s.SlotsPerEndpoint > 0:
				line(2, "slotsPerEndpoint: %d # band ceilings, guarantees and eviction count the servers' slots", s.SlotsPerEndpoint)
			default:
				line(2, "slotsPerEndpoint: none # band ceilings, guarantees and eviction count the servers' KV cache")
			}
		}
		if c := g.Concurrency; c != nil {
			line(1, "concurrency:")
			line(2, "concurrencyMode: %s", c.Mode)
			line(2, "maxConcurrency: %d", c.MaxConcurrency)
			line(2, "maxTokenConcurrency: %d", c.MaxTokenConcurrency)
			line(2, "perEndpoint: %t", c.PerEndpoint)
		}
		if u := g.UsageLimit; u != nil {
			line(1, "usageLimit:")
			line(2, "type: %s", u.Type)
			switch u.Type {
			case gate.StaticUsageLimitPolicyName:
				line(2, "threshold: %s", strconv.FormatFloat(u.Threshold, 'g', -1, 64))
			case gate.PriorityHoldbackPolicyName:
				line(2, "shape: %s", cmp.Or(u.Shape, gate.ShapeLinear))
				line(2, "domain: %s", cmp.Or(u.Domain, gate.DomainRank))
				line(2, "minCeiling: %s", strconv.FormatFloat(u.MinCeiling, 'g', -1, 64))
				line(2, "maxCeiling: %s", strconv.FormatFloat(u.MaxCeiling, 'g', -1, 64))
			}
		}
	}
	list("warnings", e.Warnings)
	_, err := io.WriteString(w, b.String())
	return err
}

// BandWait returns how long a request may wait in band b of a controller
// whose default TTL is defaultTTL: the smaller of the band's TTL and the
// default, as the controller bounds it; 0 for no bound. A band of
// llm-d-router's form has no TTL of its own, so it waits
// defaultRequestTTL.
func BandWait(b flowcontrol.BandConfig, defaultTTL time.Duration) time.Duration {
	wait := b.TTL
	if wait <= 0 || (defaultTTL > 0 && defaultTTL < wait) {
		wait = defaultTTL
	}
	return max(wait, 0)
}

func limit(l capacity.Limit) string { return l.String() }

func ttl(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return d.String()
}

// quote writes s as a YAML double-quoted scalar: Go's escapes for
// printable text are YAML's.
func quote(s string) string { return strconv.QuoteToASCII(s) }

// writeFleet prints the fleet the binary takes part in (gateway.fleet and
// the -fleet-* flags), for [Effective.Write]: never the password, only the
// file it is read from. handoff says the hand-off is on, which lets a
// higher band pass the replica's share (fleet.Config.PriorityScheduling).
func writeFleet(line func(int, string, ...any), f *Fleet, handoff bool) {
	if f == nil || f.Redis == "" {
		line(0, "fleet: none # this replica alone: its capacities, gate and headroom are its own")
		return
	}
	line(0, "fleet: # replicas that share one view on Redis; while it cannot be read, a static share")
	line(1, "redis: %s", quote(f.Redis))
	if f.PasswordFile == "" {
		line(1, "passwordFile: none")
	} else {
		line(1, "passwordFile: %s", quote(f.PasswordFile))
	}
	line(1, "prefix: %s", quote(f.Prefix))
	line(1, "id: %s", quote(f.ID))
	line(1, "replicas: %d # in fallback, this replica takes 1/replicas of the fleet's capacities and in-flight budget", f.Replicas)
	line(1, "period: %s", f.Period)
	line(1, "lease: %s", f.Lease)
	line(1, "overdraft: %d # requests of a band that may start beyond this replica's share while a lower band holds one of its slots", f.Overdraft)
	if handoff {
		line(1, "# with the hand-off, a band also passes this replica's share while a lower band holds one of its slots and the fleet holds fewer of its own and higher bands than the budget (fleet.Config.PriorityScheduling)")
	}
}
