package config

import (
	"fmt"
	"slices"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// Check judges what a binary runs from the file — its bands once the
// binary has provisioned the ones it adds, and its gate once the flags
// have replaced the file's — on the combinations a file cannot be judged
// on alone. It returns an [*Error] at the file's key for a configuration
// that cannot do what it says, and a [Warning] at the key for one that is
// legal and likely wrong, which the binary logs at start and
// -check-config prints:
//
//   - Error: in-flight eviction with no band to take victims from — no
//     band below sheddableBelow, or only one band — and no guarantee,
//     whose revocations it would pace: nothing would ever be revoked.
//   - Warning: eviction or guarantees behind a saturation gate with no
//     gate that counts slots (maxInFlight, concurrency). A revocation
//     there frees a place in a model server's waiting queue, not a
//     running slot: behind vLLM's first-come scheduler the request that
//     takes it is the next in that queue, and the band eviction was for
//     still waits for a slot. Behind vLLM's priority scheduler with
//     priority hand-off the server preempts for the higher band itself:
//     with the hand-off on (r.PriorityHandoff), no warning.
//   - Warning: a static-usage-limit-policy over several bands: one
//     ceiling for all of them holds the highest back as much as the
//     lowest, and protects none from another.
//   - Warning: the priority hand-off behind a saturation gate without
//     slotsPerEndpoint and with no gate that counts slots. The gate reads
//     the depth of the servers' queues, which the lower bands' work
//     fills, and holds the higher bands at the router although the
//     servers would run them first; with slotsPerEndpoint it lets them
//     past ([gate.SaturationConfig.PriorityScheduling]).
//   - Warning: band ceilings behind a saturation gate without
//     slotsPerEndpoint, which then read the servers' KV-cache use, not
//     their slots.
//   - Warning: eviction with the hand-off on behind gates that let a
//     higher band past the lower bands' work ([gate.PreemptingGate]):
//     the servers preempt for it themselves, and eviction revokes
//     nothing.
//
// The priority-holdback-policy without minCeiling, or with 0, and a
// static threshold of 0, which would close a band for good, are errors
// when the file is read.
func (f *File) Check(r Running) ([]Warning, error) {
	if err := f.checkVictims(r.Flow); err != nil {
		return nil, err
	}
	var ws []Warning
	warn := func(path, format string, args ...any) {
		ws = append(ws, Warning(*f.ErrorAt(path, format, args...)))
	}
	g := r.Gate
	slotGate := g.MaxInFlight != nil || g.Concurrency != nil
	if g.Saturation != nil && !slotGate && !r.PriorityHandoff.Enabled {
		const why = "behind the saturation gate alone, which counts no slots, a revocation frees a place in a model server's waiting queue, not a running slot: " +
			"behind vLLM's first-come scheduler the next request in that queue takes it, and the waiting band still waits for a slot. " +
			"Add a gate that counts slots, sized to the servers' (-max-inflight, gate.maxInFlight or gate.concurrency), " +
			"or run vLLM's priority scheduler with priority hand-off, which preempts for the higher band itself"
		if r.Flow.Eviction != nil {
			warn(evictionPath(f.Form), "in-flight eviction %s", why)
		}
		if anyGuarantee(r.Flow.Bands) {
			warn(f.guaranteePath(r.Flow.Bands), "a band's guarantee is taken back by revocation, and %s", why)
		}
	}
	if s := g.Saturation; s != nil && s.SlotsPerEndpoint == 0 && !slotGate && r.PriorityHandoff.Enabled {
		warn(f.saturationPath(), "with priority hand-off the model servers run the higher bands first, but the saturation gate reads the depth of their queues, which the lower bands fill, "+
			"and holds the higher bands at the router behind that work: declare gate.saturation.slotsPerEndpoint (vLLM's --max-num-seqs; Sluice's gate section), and the gate lets a higher band past the lower bands' queued work")
	}
	if r.Flow.Eviction != nil && r.PriorityHandoff.Enabled && preempting(g) {
		warn(evictionPath(f.Form), "in-flight eviction revokes nothing here: with priority hand-off the gate lets a higher band past the lower bands' work, "+
			"and the model servers preempt for it themselves, keeping what the lower band decoded, where a revocation would throw it away; "+
			"remove the eviction, or keep it for the guarantees it paces")
	}
	if u := g.UsageLimit; u != nil {
		if u.Type == gate.StaticUsageLimitPolicyName && len(r.Flow.Bands) > 1 {
			warn(f.usageLimitPath(), "static-usage-limit-policy gives the %d bands (%s) one ceiling, %v: it holds the highest back as much as the lowest, and protects none from another; "+
				"to keep room for the higher bands, give the lower ones lower ceilings (priority-holdback-policy)",
				len(r.Flow.Bands), priorities(r.Flow.Bands), u.Threshold)
		}
		if s := g.Saturation; s != nil && s.SlotsPerEndpoint == 0 && !slotGate {
			warn(f.usageLimitPath(), "the band ceilings read the saturation gate's share of the pool in use, which without gate.saturation.slotsPerEndpoint is the servers' KV-cache use: "+
				"declare slotsPerEndpoint (vLLM's --max-num-seqs) for a share of their slots")
		}
	}
	return ws, nil
}

// preempting reports whether the gates g sets, built for the hand-off,
// let a higher band past the lower bands' work (gate.PreemptingGate).
func preempting(g Gate) bool {
	gs, err := g.Build(BuildOptions{Endpoints: 1, PriorityScheduling: true})
	if err != nil || gs.Gate == nil {
		return false
	}
	pg, ok := gs.Gate.(gate.PreemptingGate)
	return ok && pg.ServersPreempt()
}

// checkVictims returns the error for eviction that could never revoke
// anything in flow, at the file's key.
func (f *File) checkVictims(flow flowcontrol.Config) error {
	if path, msg := victimProblem(f.Form, flow, f.Wrote); msg != "" {
		return f.ErrorAt(path, "%s", msg)
	}
	return nil
}

// victimProblem returns where and why eviction in flow, read from a file
// of form whose keys wrote reports, would never revoke anything: no band
// below sheddableBelow, or one band, and no guarantee for it to pace. msg
// is "" when it can revoke.
func victimProblem(form Form, flow flowcontrol.Config, wrote func(string) bool) (path, msg string) {
	e := flow.Eviction
	if e == nil || anyGuarantee(flow.Bands) || len(flow.Bands) == 0 {
		return "", ""
	}
	if msg = victimless(flow.Bands, e.Below); msg == "" {
		return "", ""
	}
	path = evictionPath(form)
	if p := join(path, "sheddableBelow"); wrote(p) {
		path = p
	} else if p := "flowControl.eviction.sheddableBelow"; wrote(p) {
		path = p
	}
	return path, msg
}

// victimless says why eviction over bands, taking victims below below,
// would never revoke anything; "" when it can.
func victimless(bands []flowcontrol.BandConfig, below int) string {
	if len(bands) == 1 {
		return fmt.Sprintf("in-flight eviction over one band (priority %d) never revokes: a band's requests are revoked only for a higher band; add the sheddable band it takes victims from", bands[0].Priority)
	}
	lowest := slices.MinFunc(bands, func(a, b flowcontrol.BandConfig) int { return a.Priority - b.Priority }).Priority
	if lowest < below {
		return ""
	}
	return fmt.Sprintf("in-flight eviction takes victims only from bands below sheddableBelow %d, and no band is (bands: %s), so nothing is ever revoked: "+
		"add a band below it, or raise sheddableBelow", below, priorities(bands))
}

// evictionPath is where a file of form turns eviction on: Sluice's
// controller.eviction, or llm-d-router's flowControl.enableEviction.
func evictionPath(form Form) string {
	if form == FormLLMD {
		return "flowControl.enableEviction"
	}
	return "controller.eviction"
}

// guaranteePath is where the file writes the first guarantee among bands,
// which list the file's bands first, in its order; else where it lists
// its bands.
func (f *File) guaranteePath(bands []flowcontrol.BandConfig) string {
	list := "controller.bands"
	if f.Form == FormLLMD {
		list = "flowControl.priorityBands"
	}
	for i, bc := range bands {
		if p := fmt.Sprintf("%s[%d].guarantee", list, i); bc.Guarantee != 0 && f.Wrote(p) {
			return p
		}
	}
	return list
}

// saturationPath is where the file sets its saturation gate: Sluice's
// gate section, or llm-d-router's saturationDetector.
func (f *File) saturationPath() string {
	for _, p := range []string{"flowControl.saturationDetector", "saturationDetector"} {
		if f.Wrote(p) {
			return p
		}
	}
	return "gate.saturation"
}

// usageLimitPath is where the file sets its band ceilings: the gate
// section's usageLimit, or llm-d-router's usageLimitPolicyPluginRef.
func (f *File) usageLimitPath() string {
	if p := "flowControl.usageLimitPolicyPluginRef"; f.Wrote(p) {
		return p
	}
	return "gate.usageLimit"
}
