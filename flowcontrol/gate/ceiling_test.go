package gate_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// twoBands is a controller's bands: 10 (interactive) and 0 (batch).
var twoBands = []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}}

func submitN(fc *flowcontrol.FlowController, id string, priority, n int) []*call {
	calls := make([]*call, n)
	for i := range calls {
		calls[i] = submit(fc, id, priority)
	}
	return calls
}

// started counts the calls dispatched so far.
func started(calls []*call) int {
	n := 0
	for _, c := range calls {
		if c.done && c.err == nil {
			n++
		}
	}
	return n
}

// doneAll ends the admissions of the started calls not ended yet.
func doneAll(calls []*call) {
	for _, c := range calls {
		if c.done && c.adm != nil {
			c.adm.Done()
			c.adm = nil
		}
	}
}

// With MaxInFlight(10) and a holdback that gives band 0 the ceiling 0.5,
// band 0 alone fills 5 slots, and band 10 still reaches 10: a low band held
// back by its ceiling never stops a higher one, and strict priority decides
// who takes a freed slot.
func TestCeilingHoldsALowBandToItsShare(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: twoBands,
		Gate:  gate.Ceiling(gate.MaxInFlight(10), must(t, gate.PriorityHoldback, gate.PriorityHoldbackConfig{MinCeiling: 0.5})),
	})
	batch := submitN(fc, "batch", 0, 8)
	if got := fc.InFlight(); got != 5 {
		t.Fatalf("batch alone: %d in flight, want 5 (ceiling 0.5 of 10)", got)
	}
	chat := submitN(fc, "chat", 10, 6)
	if got, n := fc.InFlight(), started(chat); got != 10 || n != 5 {
		t.Fatalf("with chat: %d in flight, %d chat started; want 10 and 5", got, n)
	}
	// A batch request ends: the freed slot goes to the chat request
	// waiting, not to the batch ones.
	batch[0].adm.Done()
	batch[0].adm = nil
	if n, b := started(chat), started(batch); n != 6 || b != 5 {
		t.Fatalf("after one batch Done: %d chat and %d batch started, want 6 and 5", n, b)
	}
	// Chat ends: 4 batch requests run, and only one more starts.
	doneAll(chat)
	if got, b := fc.InFlight(), started(batch); got != 5 || b != 6 {
		t.Fatalf("after chat ended: %d in flight, %d batch started; want 5 and 6", got, b)
	}
	// A batch request ends: the next one takes its slot, and no more.
	batch[1].adm.Done()
	batch[1].adm = nil
	if got, b := fc.InFlight(), started(batch); got != 5 || b != 7 {
		t.Fatalf("after a batch Done: %d in flight, %d batch started; want 5 and 7", got, b)
	}
	doneAll(batch)
	if got, b := fc.InFlight(), started(batch); got != 0 || b != 8 {
		t.Fatalf("at the end: %d in flight, %d batch started; want 0 and 8", got, b)
	}
}

// The same through the saturation gate: its saturation is the share of
// the model servers' declared slots in use, and a low band stops once it
// reaches its ceiling — counting the starts no scrape has seen yet — while
// the high band, whose ceiling is 1, goes on using the room the start
// budget gives, even with every slot taken.
func TestCeilingOnTheSaturationGate(t *testing.T) {
	clock := newClock()
	sat, err := gate.Saturation(gate.SaturationConfig{QueueDepthThreshold: 10, SlotsPerEndpoint: 10, MetricsStalenessThreshold: time.Hour, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	fc := mustNew(t, flowcontrol.Config{
		Bands: twoBands,
		Clock: clock,
		Gate:  gate.Ceiling(sat, must(t, gate.PriorityHoldback, gate.PriorityHoldbackConfig{MinCeiling: 0.5})),
	})
	sat.Update("vllm-0", gate.Metrics{Running: 3}) // 3 of 10 slots, room 10
	batch := submitN(fc, "batch", 0, 3)
	if n := started(batch); n != 2 {
		t.Fatalf("at saturation %.2f: %d batch started, want 2 (3 running, 2 started: half the slots)", sat.Saturation(), n)
	}
	clock.Advance(time.Second)
	sat.Update("vllm-0", gate.Metrics{Running: 10, Waiting: 6}) // every slot taken, room 4
	batch = append(batch, submitN(fc, "batch", 0, 1)...)
	if n := started(batch); n != 2 {
		t.Fatalf("at saturation %.2f: %d batch started, want the 2 before", sat.Saturation(), n)
	}
	chat := submitN(fc, "chat", 10, 5)
	if n := started(chat); n != 4 {
		t.Fatalf("at saturation %.2f: %d chat started, want 4 (the room)", sat.Saturation(), n)
	}
	clock.Advance(time.Second)
	sat.Update("vllm-0", gate.Metrics{Running: 2}) // 2 of 10 slots, room 10: chat first, then batch to half
	if n, b := started(chat), started(batch); n != 5 || b != 4 {
		t.Fatalf("at saturation %.2f: %d chat and %d batch started, want 5 and 4", sat.Saturation(), n, b)
	}
	if s := sat.Saturation(); s != 0.5 {
		t.Fatalf("saturation %v after the last starts, want 0.5: 2 running and 3 started since the scrape, of 10", s)
	}
	doneAll(chat)
	doneAll(batch)
}

// A band provisioned at run time is ranked among the others from its
// first request: band 0, the lowest of two (ceiling 0.5), becomes the
// middle of three (0.75).
func TestCeilingRanksABandProvisionedAtRunTime(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: twoBands,
		Gate:  gate.Ceiling(gate.MaxInFlight(4), must(t, gate.PriorityHoldback, gate.PriorityHoldbackConfig{MinCeiling: 0.5})),
	})
	batch := submitN(fc, "batch", 0, 4)
	if n := started(batch); n != 2 {
		t.Fatalf("two bands: %d of band 0 started, want 2 (ceiling 0.5 of 4)", n)
	}
	if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: -5}); err != nil {
		t.Fatal(err)
	}
	fc.Nudge()
	if n := started(batch); n != 3 {
		t.Fatalf("three bands: %d of band 0 started, want 3 (ceiling 0.75 of 4)", n)
	}
	doneAll(batch)
}

// The soft-reflective policy through a controller: with two bands and 300
// of 400 slots taken by band 10, saturation 0.75 is past band 0's
// reflective ceiling 0.25, and band 0 starts one request in 3 of the offers
// it gets (period round(0.75/0.25)); the few it starts leave the period 3.
func TestCeilingSoftReflectiveOpensOneOfferInPeriod(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: twoBands,
		Gate:  gate.Ceiling(gate.MaxInFlight(400), gate.SoftReflectiveCeiling()),
	})
	chat := submitN(fc, "chat", 10, 300)
	before := fc.GateRefusals()
	batch := submitN(fc, "batch", 0, 9)
	n := started(batch)
	offers := int(fc.GateRefusals()-before) + n
	if n < 2 || n != offers/3 {
		t.Fatalf("band 0 started %d of %d offers, want one in 3", n, offers)
	}
	doneAll(chat)
	doneAll(batch)
}

// fixedPolicy gives every band one ceiling, whatever it is.
type fixedPolicy struct{ ceiling float64 }

func (p fixedPolicy) TypeName() string                    { return "fixed-usage-limit-policy" }
func (p fixedPolicy) Ceiling(float64, int, []int) float64 { return p.ceiling }

// A gate or a policy gone wrong fails closed: a saturation that is not a
// number in [0, 1] reads as 1, and a NaN ceiling refuses.
func TestCeilingFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		saturation float64
		ceiling    float64
		want       bool
	}{
		{"below", 0.4, 0.5, true},
		{"at", 0.5, 0.5, false},
		{"NaN saturation", math.NaN(), 1, false},
		{"negative saturation", -1, 0.5, false},
		{"saturation above 1", 7, 1, false},
		{"NaN ceiling", 0, math.NaN(), false},
		{"ceiling 0 at saturation 0", 0, 0, false},
	} {
		g := gate.Ceiling(fixedGate{saturation: tc.saturation}, fixedPolicy{ceiling: tc.ceiling})
		if got := g.TryAcquire(0); got != tc.want {
			t.Errorf("%s: TryAcquire = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The ceiling keeps its inner gate's optional interfaces, as All does.
func TestCeilingKeepsTheInnerGatesInterfaces(t *testing.T) {
	static, err := gate.StaticUsageLimit(1)
	if err != nil {
		t.Fatal(err)
	}
	conc := must(t, gate.Concurrency, gate.ConcurrencyConfig{Mode: gate.ModeTokens, MaxTokenConcurrency: 1000})
	g := gate.Ceiling(conc, static)
	m, ok := g.(gate.MeteredGate)
	if !ok {
		t.Fatal("Ceiling(Concurrency) is not a MeteredGate")
	}
	if _, ok := g.(gate.FirstTokenGate); ok {
		t.Error("Ceiling(Concurrency) is a FirstTokenGate: the controller would take a lock per first token for nothing")
	}
	if !m.TryAcquire(0) {
		t.Fatal("refused")
	}
	m.Took(gate.Slot{Cost: 600})
	if s := g.(gate.SaturationDetector).Saturation(); s != 0.6 {
		t.Errorf("Ceiling(Concurrency) saturation %v, want the inner gate's 0.6", s)
	}
	m.Returned(gate.Usage{Slot: gate.Slot{Cost: 600}})
	if n, c := conc.InFlight(); n != 0 || c != 0 {
		t.Errorf("after Returned: %d requests and %d cost in flight, want none", n, c)
	}

	ad, err := gate.Adaptive(gate.AdaptiveConfig{TargetFirstToken: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gate.Ceiling(ad, static).(gate.FirstTokenGate); !ok {
		t.Error("Ceiling(Adaptive) is not a FirstTokenGate")
	}

	ep := gate.Endpoints(0)
	e, ok := gate.Ceiling(gate.All(ep, gate.MaxInFlight(2)), static).(gate.EndpointGate)
	if !ok || !e.NoEndpoints() {
		t.Fatal("Ceiling(All(Endpoints(0), ...)) does not report no endpoints")
	}
	ep.SetAvailable(1)
	if e.NoEndpoints() {
		t.Error("Ceiling reports no endpoints after SetAvailable(1)")
	}

	// A plain inner gate gets its slot back with Release when the
	// admission ends.
	mif := gate.MaxInFlight(1)
	fc := mustNew(t, flowcontrol.Config{Bands: twoBands, Gate: gate.Ceiling(mif, static)})
	first := submit(fc, "a", 0)
	second := submit(fc, "a", 0)
	if !first.done || second.done {
		t.Fatal("MaxInFlight(1) through a ceiling of 1: want one started, one waiting")
	}
	first.adm.Done()
	if !second.done {
		t.Fatal("the slot did not come back to MaxInFlight when the admission ended")
	}
	second.adm.Done()
	if s := mif.(gate.SaturationDetector).Saturation(); s != 0 {
		t.Errorf("MaxInFlight saturation %v after every Done, want 0", s)
	}
}

func TestCeilingBindsOneController(t *testing.T) {
	static, err := gate.StaticUsageLimit(1)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.Ceiling(gate.MaxInFlight(4), static)
	mustNew(t, flowcontrol.Config{Bands: twoBands, Gate: g})
	if _, err := flowcontrol.New(flowcontrol.Config{Bands: twoBands, Gate: g}); err == nil || !strings.Contains(err.Error(), "another controller") {
		t.Errorf("a second controller: error %v, want a refusal", err)
	}

	// The soft-reflective policy's counts belong to one controller.
	soft := gate.SoftReflectiveCeiling()
	mustNew(t, flowcontrol.Config{Bands: twoBands, Gate: gate.Ceiling(gate.MaxInFlight(4), soft)})
	_, err = flowcontrol.New(flowcontrol.Config{Bands: twoBands, Gate: gate.Ceiling(gate.MaxInFlight(4), soft)})
	if err == nil || !strings.Contains(err.Error(), "soft-reflective-ceiling-policy") {
		t.Errorf("a soft-reflective policy shared by two controllers: error %v, want a refusal naming it", err)
	}

	// The inner gate's refusal is named.
	mif := gate.MaxInFlight(4)
	mustNew(t, flowcontrol.Config{Bands: twoBands, Gate: mif})
	_, err = flowcontrol.New(flowcontrol.Config{Bands: twoBands, Gate: gate.Ceiling(mif, static)})
	if err == nil || !strings.Contains(err.Error(), "Ceiling(MaxInFlight(4), static-usage-limit-policy)") || !strings.Contains(err.Error(), "already used") {
		t.Errorf("an inner gate already bound: error %v, want one naming the ceiling and the inner gate's refusal", err)
	}
}

func TestCeilingPanicsOnMisuse(t *testing.T) {
	static, _ := gate.StaticUsageLimit(1)
	for name, f := range map[string]func(){
		"nil inner":   func() { gate.Ceiling(nil, static) },
		"nil policy":  func() { gate.Ceiling(gate.MaxInFlight(1), nil) },
		"no detector": func() { gate.Ceiling(plainGate{}, static) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "gate: Ceiling: ") {
					t.Errorf("%s: recovered %v, want a panic starting with the function's name", name, r)
				}
			}()
			f()
		}()
	}
}

// BandCeiling reports the policy's ceiling of each band at the saturation
// now, and Lag the inner gate's, so that in-flight eviction sizes its
// decision from how far the saturation stands above a refused band's
// ceiling and waits out the inner gate's lag.
func TestCeilingTellsEvictionItsCeilingsAndLag(t *testing.T) {
	mif := gate.MaxInFlight(4)
	g := gate.Ceiling(mif, must(t, gate.PriorityHoldback, gate.PriorityHoldbackConfig{MinCeiling: 0.5}))
	cg, ok := g.(gate.CeilingGate)
	if !ok {
		t.Fatal("Ceiling is not a gate.CeilingGate")
	}
	// Bands 10 and -1; the batch band's ceiling 0.5, so 2 of 4 slots.
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}}, FallbackPriority: 10,
		Gate: g, Eviction: &flowcontrol.Eviction{MaxPerDecision: 8},
	})
	if c := cg.BandCeiling(10); c != 1 {
		t.Errorf("band 10 ceiling %v, want 1", c)
	}
	if c := cg.BandCeiling(-1); c != 0.5 {
		t.Errorf("band -1 ceiling %v, want 0.5", c)
	}
	if l, ok := g.(gate.LagGate); !ok || l.Lag() != 0 {
		t.Errorf("Ceiling(MaxInFlight) lag: %v %v, want a LagGate of lag 0", ok, l)
	}
	sat, err := gate.Saturation(gate.SaturationConfig{MetricsStalenessThreshold: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if l := gate.Ceiling(sat, must(t, gate.PriorityHoldback, gate.PriorityHoldbackConfig{MinCeiling: 0.5})).(gate.LagGate).Lag(); l != 300*time.Millisecond {
		t.Errorf("Ceiling(Saturation) lag %v, want its staleness threshold", l)
	}

	// Batch takes its 2 slots; chat fills the other 2 and a third chat
	// waits: the pool is full, and nothing stands above chat's ceiling of
	// 1 but the one waiting request, so one batch admission is revoked.
	batch := submitN(fc, "b", -1, 3)
	if started(batch) != 2 {
		t.Fatalf("%d batch requests started, want 2", started(batch))
	}
	chat := submitN(fc, "c", 10, 3)
	if started(chat) != 2 {
		t.Fatalf("%d chat requests started, want 2", started(chat))
	}
	revoked := 0
	for _, c := range batch[:2] {
		select {
		case <-c.adm.Revoked():
			revoked++
			c.adm.Done()
			c.adm = nil
		default:
		}
	}
	if revoked != 1 {
		t.Fatalf("%d batch admissions revoked, want 1", revoked)
	}
	if started(chat) != 3 {
		t.Fatal("the third chat request did not take the revoked slot")
	}
	doneAll(chat)
	doneAll(batch)
}
