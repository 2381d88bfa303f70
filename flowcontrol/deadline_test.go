package flowcontrol_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"
	"github.com/sluicegate/sluice/ordering"
)

// Giving way by deadline (Eviction's "Giving way by deadline"), on the
// manual clock: every Submit below is decided on the test's goroutine,
// and the clock moves only when the test moves it.

var deadlineEpoch = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// withSLO returns a request of id at priority carrying the TTFT
// objective slo in x-llm-d-slo-ttft-ms.
func withSLO(id string, priority int, slo time.Duration) flowcontrol.Request {
	h := http.Header{}
	h.Set(ordering.SLOTTFTHeader, strconv.FormatInt(slo.Milliseconds(), 10))
	return flowcontrol.Request{Key: key(id, priority), Header: h}
}

// deadlinePool is a controller with chat at 10 and batch at -1 (and the
// bands of extra) behind MaxInFlight(n) on a manual clock, evicting as e
// says, with n batch admissions running whose mean service time is
// measured as batchService: n batch requests ran that long and ended,
// and n more started at once.
type deadlinePool struct {
	fc    *flowcontrol.FlowController
	clock *clocktest.Clock
	rec   *revocations
	batch []*flowcontrol.Admission
}

func newDeadlinePool(t *testing.T, n int, batchService time.Duration, e flowcontrol.Eviction, chat flowcontrol.BandConfig) *deadlinePool {
	t.Helper()
	p := &deadlinePool{clock: clocktest.New(deadlineEpoch), rec: &revocations{}}
	chat.Priority = 10
	p.fc = mustNew(t, flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{chat, {Priority: -1}},
		FallbackPriority: -1,
		Gate:             gate.MaxInFlight(n),
		Clock:            p.clock,
		Eviction:         &e,
		Revocations:      p.rec.record,
	})
	ctx := context.Background()
	for round := range 2 {
		var started []*flowcontrol.Admission
		for i := range n {
			a, err := p.fc.EnqueueAndWait(ctx, req(fmt.Sprint("b", round, "-", i), -1))
			if err != nil {
				t.Fatal(err)
			}
			started = append(started, a)
		}
		if round == 0 {
			p.clock.Advance(batchService)
			for _, a := range started {
				a.Done()
			}
		}
		p.batch = started
	}
	return p
}

// confirm calls Done on every revoked batch admission not confirmed yet
// and returns how many there were.
func (p *deadlinePool) confirm() int {
	n := 0
	for i, a := range p.batch {
		if a != nil && revoked(a) {
			n++
			a.Done()
			p.batch[i] = nil
		}
	}
	return n
}

// While every waiter has slack — its deadline less the margin is further
// off than its place in line over the release rate — nothing is revoked,
// and the waiter starts with the next release.
func TestDeadlineSlackRevokesNothing(t *testing.T) {
	// μ = 4 running ÷ 1s = 4/s; the chat request's slack is 1s − 150ms:
	// ⌈1 − 4×0.85⌉ < 0.
	p := newDeadlinePool(t, 4, time.Second, flowcontrol.Eviction{ByDeadline: true}, flowcontrol.BandConfig{TTFTObjective: time.Second})
	chat := submit(context.Background(), p.fc, req("chat", 10))
	for range 6 { // through the slack, a wake-up included
		p.clock.Advance(100 * time.Millisecond)
		if n := p.rec.count(flowcontrol.RevocationIssued); n != 0 {
			t.Fatalf("%v after the chat request came: %d revocations with slack left", p.clock.Now().Sub(deadlineEpoch), n)
		}
	}
	p.batch[0].Done() // a release
	p.batch[0] = nil
	if !chat.finished() || chat.err != nil {
		t.Fatalf("the chat request did not take the released slot: %v", chat.err)
	}
	// Once its slack is spent, a waiter is revoked for.
	late := submit(context.Background(), p.fc, req("late", 10))
	p.clock.Advance(time.Second)
	if n := p.rec.count(flowcontrol.RevocationIssued); n != 1 {
		t.Fatalf("a waiter whose slack ran out got %d revocations, want 1", n)
	}
	p.confirm()
	if !late.finished() || late.err != nil {
		t.Fatalf("the waiter did not take the revoked slot: %v", late.err)
	}
}

// A burst that would miss its deadlines gets, in one decision, the
// slots the stated rule sizes: the largest ⌈k − μ·(dₖ − margin − now)⌉.
func TestDeadlineRevokesTheDeficit(t *testing.T) {
	ctx := context.Background()
	p := newDeadlinePool(t, 64, 10*time.Second, flowcontrol.Eviction{ByDeadline: true, MaxPerDecision: 32}, flowcontrol.BandConfig{})
	// A first request whose deadline is within the margin needs a slot at
	// once: one revocation, left unconfirmed, so that the decision after
	// its confirmation sees the whole burst.
	first := submit(ctx, p.fc, withSLO("first", 10, 100*time.Millisecond))
	if n := p.rec.count(flowcontrol.RevocationIssued); n != 1 {
		t.Fatalf("%d revocations for a request due within the margin, want 1", n)
	}
	var burst []*call
	for i := range 20 {
		burst = append(burst, submit(ctx, p.fc, withSLO(fmt.Sprint("c", i), 10, 2*time.Second)))
	}
	if n := p.rec.count(flowcontrol.RevocationIssued); n != 1 {
		t.Fatalf("%d revocations while the first awaits its confirmation, want 1", n)
	}
	p.confirm()
	if !first.finished() {
		t.Fatal("the first request did not take the revoked slot")
	}
	// Now 63 batch admissions of 10s and the first chat one, whose band
	// has no service time measured (1s): μ = 6.3 + 1 = 7.3/s. The 20
	// waiters have 2s − 150ms of slack: the 20th needs ⌈20 − 7.3×1.85⌉ =
	// ⌈6.495⌉ = 7 slots at once.
	mu := 63.0/10 + 1
	want := int(math.Ceil(20 - mu*1.85))
	if got := p.rec.count(flowcontrol.RevocationIssued) - 1; got != want {
		t.Fatalf("the burst's decision revoked %d, want ⌈20 − μ·1.85⌉ = %d", got, want)
	}
	if n := p.confirm(); n != want {
		t.Fatalf("%d revoked admissions confirmed, want %d", n, want)
	}
	started := 0
	for _, c := range burst {
		if c.finished() {
			started++
		}
	}
	if started != want {
		t.Fatalf("%d of the burst started on the revoked slots, want %d", started, want)
	}
}

// Victims that have produced no output go first, then the most recently
// dispatched.
func TestDeadlineVictimOrder(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(deadlineEpoch)
	rec := &revocations{}
	fc := mustNew(t, flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}, {Priority: -5}},
		FallbackPriority: 10,
		Gate:             gate.MaxInFlight(5),
		Clock:            clock,
		Eviction:         &flowcontrol.Eviction{ByDeadline: true},
		Revocations:      rec.record,
	})
	var batch []*flowcontrol.Admission
	for i, p := range []int{-1, -5, -1, -1, -5} { // dispatched a second apart
		a, err := fc.EnqueueAndWait(ctx, req(fmt.Sprint("v", i), p))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, a)
		clock.Advance(time.Second)
	}
	batch[3].FirstToken() // the newest of band -1 and the newest of all
	batch[4].FirstToken() // have output
	// Each chat request is due within the margin: one revocation each.
	var order []string
	for i := range len(batch) {
		submit(ctx, fc, withSLO(fmt.Sprint("chat", i), 10, 100*time.Millisecond))
		for j, a := range batch {
			if revoked(a) && !strings.Contains(strings.Join(order, ","), fmt.Sprint("v", j)) {
				order = append(order, fmt.Sprint("v", j))
				a.Done()
			}
		}
	}
	if got, want := strings.Join(order, ","), "v2,v1,v0,v4,v3"; got != want {
		t.Fatalf("revoked %s, want %s: without output, newest first, then with output, newest first", got, want)
	}
}

// The bound Eviction states: while slots are released at the measured
// rate or faster, a waiter with a deadline starts by its deadline less
// the margin. Batch admissions of 8s, staggered a second apart, release a
// slot every second (μ = 1/s); bursts of every size up to the pool's
// arrive with a 2s objective, and each of their requests holds its slot.
func TestDeadlineBoundHolds(t *testing.T) {
	const slots, service = 8, 8 * time.Second
	for burst := 1; burst <= slots; burst++ {
		t.Run(fmt.Sprint("burst=", burst), func(t *testing.T) {
			ctx := context.Background()
			clock := clocktest.New(deadlineEpoch)
			rec := &revocations{}
			fc := mustNew(t, flowcontrol.Config{
				Bands:            []flowcontrol.BandConfig{{Priority: 10, TTFTObjective: 2 * time.Second}, {Priority: -1}},
				FallbackPriority: 10,
				Gate:             gate.MaxInFlight(slots),
				Clock:            clock,
				Eviction:         &flowcontrol.Eviction{ByDeadline: true, MaxPerDecision: slots},
				Revocations:      rec.record,
			})
			// Batch requests, each run for service; a client sends its
			// next as one ends, so the slots stay staggered.
			type job struct {
				adm *flowcontrol.Admission
				end time.Time
			}
			var jobs []*job
			run := func(at time.Time) {
				a, err := fc.EnqueueAndWait(ctx, req("batch", -1))
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, &job{adm: a, end: at.Add(service)})
			}
			for i := range slots {
				run(clock.Now())
				if i < slots-1 {
					clock.Advance(service / slots)
				}
			}
			step := func() {
				clock.Advance(10 * time.Millisecond)
				for _, j := range jobs {
					switch {
					case j.adm == nil:
					case revoked(j.adm):
						j.adm.Done()
						j.adm = nil
					case !clock.Now().Before(j.end):
						j.adm.Done()
						j.adm = nil
						if len(jobs) < 4*slots { // the first runs measure the service time
							run(clock.Now())
						}
					}
				}
			}
			for len(jobs) < 4*slots {
				step()
			}
			arrived := clock.Now()
			var chat []*call
			for i := range burst {
				chat = append(chat, submit(ctx, fc, req(fmt.Sprint("chat", i), 10)))
			}
			latest := arrived.Add(2*time.Second - flowcontrol.DefaultDeadlineMargin)
			for !clock.Now().After(latest) {
				step()
			}
			for i, c := range chat {
				if !c.finished() {
					t.Fatalf("chat%d of %d had not started %v after its arrival (%d revocations)", i, burst,
						clock.Now().Sub(arrived), rec.count(flowcontrol.RevocationIssued))
				}
			}
			// The bound needs at most ⌈burst − μ×1.85⌉ revocations, and
			// a burst of 4 or more cannot do with the releases alone.
			got, most := rec.count(flowcontrol.RevocationIssued), max(0, int(math.Ceil(float64(burst)-1.85)))
			if got > most || burst >= 4 && got == 0 {
				t.Fatalf("%d revocations for a burst of %d, want 1 to %d", got, burst, most)
			}
		})
	}
}

// A guarantee takes its share back only from the bands below
// Eviction.Below, unless GuaranteesIgnoreBelow says otherwise.
func TestGuaranteeSparesBandsAtOrAboveBelow(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprint("GuaranteesIgnoreBelow=", ignore), func(t *testing.T) {
			ctx := context.Background()
			clock := clocktest.New(deadlineEpoch)
			rec := &revocations{}
			fc := mustNew(t, flowcontrol.Config{
				Bands:       []flowcontrol.BandConfig{{Priority: 10, Guarantee: 0.5}, {Priority: 0}, {Priority: -1}},
				Gate:        gate.MaxInFlight(4),
				Clock:       clock,
				Eviction:    &flowcontrol.Eviction{GuaranteesIgnoreBelow: ignore},
				Revocations: rec.record,
			})
			standard := make([]*flowcontrol.Admission, 3)
			for i := range standard {
				a, err := fc.EnqueueAndWait(ctx, req(fmt.Sprint("std", i), 0))
				if err != nil {
					t.Fatal(err)
				}
				standard[i] = a
			}
			batch, err := fc.EnqueueAndWait(ctx, req("batch", -1))
			if err != nil {
				t.Fatal(err)
			}
			// Chat, short of its guarantee of 2 slots, waits for 2.
			submit(ctx, fc, req("c0", 10))
			submit(ctx, fc, req("c1", 10))
			if !revoked(batch) {
				t.Fatal("the guarantee did not take back the batch slot")
			}
			batch.Done()
			clock.Advance(time.Second)
			fc.Nudge()
			n := 0
			for _, a := range standard {
				if revoked(a) {
					n++
				}
			}
			if want := map[bool]int{false: 0, true: 1}[ignore]; n != want {
				t.Fatalf("the guarantee revoked %d standard (priority 0 ≥ Below) admissions, want %d", n, want)
			}
		})
	}
}

// A sheddable band short of its guarantee (a floor) takes the next slot
// before a higher band only while the higher band's waiters keep their
// deadlines without it.
func TestFloorYieldsToADeadline(t *testing.T) {
	for _, tc := range []struct {
		objective time.Duration
		chatFirst bool
	}{
		{time.Second, true},       // with 3 running of 10s, μ = 0.3/s: ⌈2 − 0.3×0.85⌉ > 0
		{60 * time.Second, false}, // ⌈2 − 0.3×59.85⌉ ≤ 0: the floor goes first
	} {
		t.Run(fmt.Sprint("objective=", tc.objective), func(t *testing.T) {
			ctx := context.Background()
			clock := clocktest.New(deadlineEpoch)
			fc := mustNew(t, flowcontrol.Config{
				Bands: []flowcontrol.BandConfig{{Priority: 10, TTFTObjective: tc.objective},
					{Priority: -1, Guarantee: 0.5}},
				FallbackPriority: 10,
				Gate:             gate.MaxInFlight(4),
				Clock:            clock,
			})
			var chat []*flowcontrol.Admission
			for i := range 4 {
				a, err := fc.EnqueueAndWait(ctx, req(fmt.Sprint("c", i), 10))
				if err != nil {
					t.Fatal(err)
				}
				chat = append(chat, a)
			}
			clock.Advance(10 * time.Second)
			batch := submit(ctx, fc, req("batch", -1))
			waiter := submit(ctx, fc, req("chat", 10))
			chat[0].Done() // chat's service time: 10s
			if got := waiter.finished(); got != tc.chatFirst {
				t.Fatalf("chat took the slot: %v, want %v (batch took it: %v)", got, tc.chatFirst, batch.finished())
			}
			if batch.finished() == tc.chatFirst {
				t.Fatalf("batch took the slot: %v, want %v", batch.finished(), !tc.chatFirst)
			}
		})
	}
}

// The new fields are validated, naming the field.
func TestDeadlineConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg   flowcontrol.Config
		field string
	}{
		{flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, TTFTObjective: -time.Second}}}, "Bands[0].TTFTObjective"},
		{flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Eviction: &flowcontrol.Eviction{Margin: -1}}, "Eviction.Margin"},
	} {
		_, err := flowcontrol.New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New: %v, want an error naming %s", err, tc.field)
		}
	}
}

// A band with deadlines holds back slots from the bands below it while it
// holds fewer (⌊λ·S⌋, where the bands below release slots often enough):
// its next arrival starts at once; as its arrival rate decays, the slots
// go back to the bands below, by a wake-up, with no other event.
func TestHoldbackKeepsSlotsForABandWithDeadlines(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(deadlineEpoch)
	fc := mustNew(t, flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{{Priority: 10, TTFTObjective: time.Second}, {Priority: -1}},
		FallbackPriority: 10,
		Gate:             gate.MaxInFlight(10),
		Clock:            clock,
		Eviction:         &flowcontrol.Eviction{ByDeadline: true},
	})
	var batch []*flowcontrol.Admission
	for i := range 10 {
		a, err := fc.EnqueueAndWait(ctx, req(fmt.Sprint("b", i), -1))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, a)
	}
	var waiting []*call
	for i := range 10 { // refused: the pool holds 10
		waiting = append(waiting, submit(ctx, fc, req(fmt.Sprint("w", i), -1)))
	}
	// 8 chat requests at once: an arrival rate of 8 ÷ τ = 4/s.
	var chat []*call
	for i := range 8 {
		chat = append(chat, submit(ctx, fc, req(fmt.Sprint("c", i), 10)))
	}
	for _, a := range batch[:8] {
		a.Done()
	}
	for i, c := range chat {
		if !c.finished() {
			t.Fatalf("chat %d did not start on a released slot", i)
		}
	}
	// A second later the chat requests end: S = 1s, λ = 4·e^(−½) ≈ 2.43/s,
	// x = λ·S ≈ 2.43 and x + 2√x ≈ 5.55. Batch, none of whose requests has
	// ended by itself, has a service time of 1s, the age of its oldest:
	// with 7 of its requests running they release 7/s, 5.95 in the 0.85s
	// a chat request may wait (its 1s objective less the margin), more
	// than the 5.55 − 2.43 the peaks need beyond the mean. So chat holds
	// back ⌊2.43⌋ = 2 slots: 8 of the 10 go to batch.
	clock.Advance(time.Second)
	for _, c := range chat {
		c.adm.Done()
	}
	if n := fc.InFlight(); n != 8 {
		t.Fatalf("%d in flight, want 8: 2 slots held back for chat", n)
	}
	next := submit(ctx, fc, req("next", 10))
	if !next.finished() {
		t.Fatal("a chat arrival did not take a held slot at once")
	}
	next.adm.Done()
	// The holdback decays with the arrival rate; the wake-ups hand the
	// slots back to batch.
	clock.Advance(5 * time.Second)
	if n := fc.InFlight(); n != 10 {
		t.Fatalf("%d in flight 5s after chat went quiet, want 10", n)
	}
	started := 0
	for _, c := range waiting {
		if c.finished() {
			started++
		}
	}
	if started != 8 {
		t.Fatalf("%d of the 10 waiting batch requests started, want 8", started)
	}
}

// Where the bands below seldom release a slot — their requests have run
// for long — a band with deadlines holds back for its peaks, x + 2√x for
// x = λ·S, less what they release while its request may wait, rather than
// the mean x alone: a burst above the mean then starts in held slots
// instead of revoking requests that have decoded for long.
func TestHoldbackCoversPeaksWhenReleasesAreSlow(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(deadlineEpoch)
	fc := mustNew(t, flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{{Priority: 10, TTFTObjective: time.Second}, {Priority: -1}},
		FallbackPriority: 10,
		Gate:             gate.MaxInFlight(10),
		Clock:            clock,
		Eviction:         &flowcontrol.Eviction{ByDeadline: true},
	})
	var batch []*flowcontrol.Admission
	for i := range 10 {
		a, err := fc.EnqueueAndWait(ctx, req(fmt.Sprint("b", i), -1))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, a)
	}
	var waiting []*call
	for i := range 10 {
		waiting = append(waiting, submit(ctx, fc, req(fmt.Sprint("w", i), -1)))
	}
	// The batch requests run for 100s: batch's service time is 100s.
	clock.Advance(100 * time.Second)
	var chat []*call
	for i := range 8 {
		chat = append(chat, submit(ctx, fc, req(fmt.Sprint("c", i), 10)))
	}
	for _, a := range batch[:8] {
		a.Done()
	}
	for i, c := range chat {
		if !c.finished() {
			t.Fatalf("chat %d did not start on a released slot", i)
		}
	}
	// As before x ≈ 2.43 and x + 2√x ≈ 5.55; but batch releases a slot
	// per 100s per running request, 5 of them 0.0425 in the 0.85s a chat
	// request may wait: chat holds back ⌊5.55 − 0.04⌋ = 5 slots.
	clock.Advance(time.Second)
	for _, c := range chat {
		c.adm.Done()
	}
	if n := fc.InFlight(); n != 5 {
		t.Fatalf("%d in flight, want 5: 5 slots held back for chat", n)
	}
	var next []*call
	for i := range 5 {
		next = append(next, submit(ctx, fc, req(fmt.Sprint("n", i), 10)))
	}
	for i, c := range next {
		if !c.finished() {
			t.Fatalf("chat arrival %d of a burst of 5 did not take a held slot at once", i)
		}
		c.adm.Done()
	}
	// The holdback decays with the arrival rate; the wake-ups hand the
	// slots back to batch.
	clock.Advance(20 * time.Second)
	if n := fc.InFlight(); n != 10 {
		t.Fatalf("%d in flight 20s after chat went quiet, want 10", n)
	}
	started := 0
	for _, c := range waiting {
		if c.finished() {
			started++
		}
	}
	if started != 8 {
		t.Fatalf("%d of the 10 waiting batch requests started, want 8", started)
	}
}

// A band with deadlines of its own, below one that holds slots back, is
// held back while its waiters have slack, and takes a held slot once they
// need it to start by their deadlines.
func TestHoldbackYieldsToDeadlinesBelow(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(deadlineEpoch)
	fc := mustNew(t, flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{{Priority: 10, TTFTObjective: time.Second}, {Priority: 0}, {Priority: -1}},
		FallbackPriority: 10,
		Gate:             gate.MaxInFlight(10),
		Clock:            clock,
		Eviction:         &flowcontrol.Eviction{ByDeadline: true},
	})
	var batch []*flowcontrol.Admission
	for i := range 10 {
		a, err := fc.EnqueueAndWait(ctx, req(fmt.Sprint("b", i), -1))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, a)
	}
	for i := range 10 {
		submit(ctx, fc, req(fmt.Sprint("w", i), -1))
	}
	var chat []*call
	for i := range 8 {
		chat = append(chat, submit(ctx, fc, req(fmt.Sprint("c", i), 10)))
	}
	for _, a := range batch[:8] {
		a.Done()
	}
	clock.Advance(time.Second)
	for _, c := range chat {
		c.adm.Done()
	}
	// As in TestHoldbackKeepsSlotsForABandWithDeadlines: 2 slots held
	// back for chat, 8 in flight.
	if n := fc.InFlight(); n != 8 {
		t.Fatalf("%d in flight, want 8: 2 slots held back for chat", n)
	}
	slack := submit(ctx, fc, withSLO("s-slack", 0, 5*time.Second))
	if slack.finished() {
		t.Fatal("a standard request with 5s of slack took a slot held back for chat")
	}
	// A request whose objective is within the margin needs a slot now:
	// the band takes held slots while it does, for the one first in line
	// (the request with slack, in this band's order), then for it.
	urgent := submit(ctx, fc, withSLO("s-urgent", 0, 100*time.Millisecond))
	if !urgent.finished() || !slack.finished() {
		t.Fatalf("urgent started %v, the one before it %v: want both", urgent.finished(), slack.finished())
	}
	if n := fc.InFlight(); n != 10 {
		t.Fatalf("%d in flight, want 10", n)
	}
}

// Without ByDeadline, eviction is sized by the waiting requests, deadlines
// or not: a request with all its slack left is revoked for at once.
func TestDeadlinesNeedByDeadline(t *testing.T) {
	p := newDeadlinePool(t, 4, time.Second, flowcontrol.Eviction{}, flowcontrol.BandConfig{TTFTObjective: time.Minute})
	submit(context.Background(), p.fc, withSLO("chat", 10, time.Minute))
	if n := p.rec.count(flowcontrol.RevocationIssued); n != 1 {
		t.Fatalf("the zero-value Eviction revoked %d for one waiting request, want 1", n)
	}
}
