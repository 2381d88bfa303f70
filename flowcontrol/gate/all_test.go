package gate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"pgregory.net/rapid"
)

// countGate is a plain gate of limit slots whose count the test reads.
type countGate struct{ n, limit int }

func (g *countGate) TryAcquire(int) bool {
	if g.n >= g.limit {
		return false
	}
	g.n++
	return true
}

func (g *countGate) Release(int) {
	if g.n--; g.n < 0 {
		panic("countGate released more than it granted")
	}
}

// TestAllAccountingIsExact drives All over two concurrency gates, a plain
// gate and a saturation gate, in a drawn order, against a model of each:
// All admits exactly when every gate would, and after every step each
// gate holds exactly the slots, cost and budget of the admissions in
// flight, whatever was refused, handed back or returned unused.
func TestAllAccountingIsExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := newClock()
		maxRequests := rapid.IntRange(1, 5).Draw(t, "maxRequests")
		maxTokens := rapid.Int64Range(10, 200).Draw(t, "maxTokens")
		requests, _ := gate.Concurrency(gate.ConcurrencyConfig{MaxConcurrency: maxRequests})
		tokens, _ := gate.Concurrency(gate.ConcurrencyConfig{Mode: gate.ModeTokens, MaxTokenConcurrency: maxTokens})
		plain := &countGate{limit: rapid.IntRange(0, 6).Draw(t, "plainLimit")}
		sat, _ := gate.Saturation(gate.SaturationConfig{Clock: clock, MetricsStalenessThreshold: time.Hour})
		children := []gate.Gate{requests, tokens, plain, sat}
		order := rapid.Permutation(children).Draw(t, "order")
		all := All(order...)

		var inFlight []int64 // the costs of the admissions in flight
		var cost int64
		satLeft := int64(0)

		scrape := func(t *rapid.T) {
			waiting := rapid.IntRange(0, 7).Draw(t, "waiting")
			clock.Advance(time.Millisecond)
			sat.Update("e", gate.Metrics{Waiting: waiting})
			satLeft = int64(max(5-waiting, 0))
		}
		acquire := func(t *rapid.T, handBack bool) {
			c := rapid.Int64Range(1, 80).Draw(t, "cost")
			want := len(inFlight) < maxRequests && cost < maxTokens && plain.n < plain.limit && satLeft > 0
			if got := all.TryAcquire(0); got != want {
				t.Fatalf("TryAcquire = %v, want %v (in flight %d, cost %d, plain %d/%d, budget %d)",
					got, want, len(inFlight), cost, plain.n, plain.limit, satLeft)
			} else if got && handBack {
				all.Returned(gate.Usage{Unused: true}) // a gate composed after All refused
			} else if got {
				all.Took(gate.Slot{Cost: c})
				inFlight = append(inFlight, c)
				cost += c
				satLeft--
			}
		}
		scrape(t)
		t.Repeat(map[string]func(*rapid.T){
			"acquire":  func(t *rapid.T) { acquire(t, false) },
			"handBack": func(t *rapid.T) { acquire(t, true) },
			"scrape":   scrape,
			"return": func(t *rapid.T) {
				if len(inFlight) == 0 {
					t.Skip("nothing in flight")
				}
				i := rapid.IntRange(0, len(inFlight)-1).Draw(t, "which")
				unused := rapid.Bool().Draw(t, "unused")
				c := inFlight[i]
				all.Returned(gate.Usage{Slot: gate.Slot{Cost: c}, Unused: unused, Held: time.Second})
				inFlight = append(inFlight[:i], inFlight[i+1:]...)
				cost -= c
				if unused {
					satLeft++ // a start that never ran comes back
				}
			},
			"": func(t *rapid.T) {
				if n, c := requests.InFlight(); n != len(inFlight) || c != cost {
					t.Fatalf("requests gate holds %d, %d; want %d, %d", n, c, len(inFlight), cost)
				}
				if n, c := tokens.InFlight(); n != len(inFlight) || c != cost {
					t.Fatalf("tokens gate holds %d, %d; want %d, %d", n, c, len(inFlight), cost)
				}
				if plain.n != len(inFlight) {
					t.Fatalf("plain gate holds %d, want %d", plain.n, len(inFlight))
				}
				if b := sat.Status().Budget; b != max(satLeft, 0) {
					t.Fatalf("saturation budget %d, want %d", b, satLeft)
				}
			},
		})
	})
}

// All is gate.All, as a MeteredGate.
func All(gates ...gate.Gate) gate.MeteredGate {
	return gate.All(gates...).(gate.MeteredGate)
}

// bandGate refuses band closed while shut, and nudges nothing.
type bandGate struct {
	closed int
	shut   bool
}

func (g *bandGate) TryAcquire(p int) bool { return !(g.shut && p == g.closed) }
func (g *bandGate) Release(int)           {}

func TestAllKeepsStrictPriority(t *testing.T) {
	bands := &bandGate{closed: 10, shut: true}
	budget, _ := gate.Concurrency(gate.ConcurrencyConfig{MaxConcurrency: 5})
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}},
		Gate:  gate.All(budget, bands),
	})
	high := submit(fc, "high", 10)
	low := submit(fc, "low", 0)
	if high.done || low.done {
		t.Fatal("a request started past a refused higher band")
	}
	if n, _ := budget.InFlight(); n != 0 {
		t.Fatalf("the budget holds %d slots after refused offers, want 0", n)
	}
	bands.shut = false
	fc.Nudge()
	if high.outcome(t) != flowcontrol.OutcomeDispatched || low.outcome(t) != flowcontrol.OutcomeDispatched {
		t.Fatal("not dispatched once the band opened")
	}
	high.adm.Done()
	low.adm.Done()
	if n, c := budget.InFlight(); n != 0 || c != 0 {
		t.Fatalf("budget holds %d, %d after every Done", n, c)
	}
}

type panicGate struct{}

func (panicGate) TryAcquire(int) bool { panic("boom") }
func (panicGate) Release(int)         {}

func TestAllHandsBackSlotsWhenAGatePanics(t *testing.T) {
	budget, _ := gate.Concurrency(gate.ConcurrencyConfig{MaxConcurrency: 5})
	plain := &countGate{limit: 5}
	all := gate.All(budget, plain, panicGate{})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the gate's panic", r)
			}
		}()
		all.TryAcquire(0)
	}()
	if n, _ := budget.InFlight(); n != 0 || plain.n != 0 {
		t.Fatalf("after the panic: budget %d, plain %d slots held, want none", n, plain.n)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "gates[1] is nil") {
				t.Fatalf("All with a nil gate: %v", r)
			}
		}()
		gate.All(budget, nil)
	}()
}

func TestAllBindsAndReportsEndpoints(t *testing.T) {
	clock := newClock()
	sat, _ := gate.Saturation(gate.SaturationConfig{Clock: clock})
	budget, _ := gate.Concurrency(gate.ConcurrencyConfig{})
	fc := mustNew(t, flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{{Priority: 0}},
		Gate:           gate.All(budget, sat),
		Clock:          clock,
		NoEndpointsTTL: time.Second,
	})
	c := submit(fc, "a", 0)
	clock.Advance(time.Second)
	if got := c.outcome(t); got != flowcontrol.OutcomeRejectedNoEndpoints {
		t.Fatalf("outcome %v, want rejected-no-endpoints through All", got)
	}
	// The saturation gate was bound through All: its Update nudges.
	waiting := submit(fc, "b", 0)
	sat.Update("e", gate.Metrics{})
	if waiting.outcome(t) != flowcontrol.OutcomeDispatched {
		t.Fatal(waiting.err)
	}
	waiting.adm.Done()

	_, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.All(budget)})
	if err == nil || !strings.Contains(err.Error(), "gates[0]") {
		t.Fatalf("a bound gate reused through All: %v, want an error naming gates[0]", err)
	}
	if gate.All().(gate.EndpointGate).NoEndpoints() || !gate.All().TryAcquire(0) {
		t.Fatal("All() must admit everything and report endpoints")
	}
}
