package flowcontrol_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/internal/clocktest"

	"github.com/sluicegate/sluice/flowcontrol"
)

// revocations records what Config.Revocations hears.
type revocations struct{ heard[flowcontrol.Revocation] }

func (r *revocations) record(v flowcontrol.Revocation) { r.add(v) }

func (r *revocations) count(step flowcontrol.RevocationStep) int {
	return r.countIf(func(v flowcontrol.Revocation) bool { return v.Step == step })
}

// evicting returns a controller with bands 10 and -1 under MaxInFlight(n),
// evicting as e says.
func evicting(t *testing.T, n int, e flowcontrol.Eviction, rec *revocations, obs *recorder) *flowcontrol.FlowController {
	t.Helper()
	cfg := flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
		FallbackPriority: 10,
		Gate:             gate.MaxInFlight(n),
		Eviction:         &e,
	}
	if rec != nil {
		cfg.Revocations = rec.record
	}
	if obs != nil {
		cfg.Observer = obs.observe
	}
	return mustNew(t, cfg)
}

func revoked(a *flowcontrol.Admission) bool {
	select {
	case <-a.Revoked():
		return true
	default:
		return false
	}
}

// A waiting interactive request revokes the most recently dispatched
// batch admission; its holder hears of it, confirms with Done, and the
// interactive request takes the slot.
func TestEvictionRevokesTheNewestSheddable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &revocations{}
		obs := &recorder{}
		fc := evicting(t, 2, flowcontrol.Eviction{}, rec, obs)
		ctx := context.Background()
		older, err := fc.EnqueueAndWait(ctx, req("batch", -1))
		if err != nil {
			t.Fatal(err)
		}
		newer, err := fc.EnqueueAndWait(ctx, req("batch", -1))
		if err != nil {
			t.Fatal(err)
		}
		chat := start(ctx, fc, req("chat", 10))
		synctest.Wait()
		if chat.finished() {
			t.Fatal("chat started with the pool full")
		}
		if revoked(older) || !revoked(newer) {
			t.Fatalf("revoked: older %v, newer %v; want the newer only", revoked(older), revoked(newer))
		}
		var rej *flowcontrol.RejectionError
		if err := newer.Err(); !errors.As(err, &rej) || rej.Outcome != flowcontrol.OutcomeEvictedPriority || !errors.Is(err, flowcontrol.ErrEvictedPriority) {
			t.Fatalf("Err = %v, want evicted-priority", err)
		}
		if rej.RetryAfter != time.Second {
			t.Fatalf("RetryAfter = %v, want 1s: the band has room to queue it", rej.RetryAfter)
		}
		if older.Err() != nil {
			t.Fatalf("older.Err = %v", older.Err())
		}
		newer.Done()
		synctest.Wait()
		if chat.outcome(t) != flowcontrol.OutcomeDispatched {
			t.Fatalf("chat: %v", chat.err)
		}
		if got := rec.count(flowcontrol.RevocationIssued); got != 1 {
			t.Fatalf("issued %d", got)
		}
		if got := rec.count(flowcontrol.RevocationConfirmed); got != 1 {
			t.Fatalf("confirmed %d", got)
		}
		if got := obs.count(flowcontrol.OutcomeEvictedPriority); got != 1 {
			t.Fatalf("observer heard %d evictions", got)
		}
		newer.Done() // a second Done changes nothing
		chat.adm.Done()
		older.Done()
		if n := fc.InFlight(); n != 0 {
			t.Fatalf("in flight %d", n)
		}
		fc.Close()
	})
}

// Bands at or above Below, and bands not below the waiting one, are never
// revoked.
func TestEvictionSparesBandsNotBelow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands:    []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}, {Priority: -1}, {Priority: -5}},
			Gate:     gate.MaxInFlight(2),
			Eviction: &flowcontrol.Eviction{},
		})
		ctx := context.Background()
		zero, _ := fc.EnqueueAndWait(ctx, req("z", 0))
		minus1, _ := fc.EnqueueAndWait(ctx, req("m", -1))
		if zero.Revoked() != nil {
			t.Fatal("a band at 0 can be revoked")
		}
		low := start(ctx, fc, req("low", -5)) // below the victim: nothing to revoke for it
		synctest.Wait()
		if revoked(minus1) {
			t.Fatal("a band -5 request revoked band -1")
		}
		chat := start(ctx, fc, req("chat", 10))
		synctest.Wait()
		if !revoked(minus1) || revoked(zero) {
			t.Fatalf("revoked: band -1 %v, band 0 %v", revoked(minus1), revoked(zero))
		}
		minus1.Done()
		synctest.Wait()
		if chat.outcome(t) != flowcontrol.OutcomeDispatched {
			t.Fatal(chat.err)
		}
		chat.adm.Done()
		synctest.Wait()
		if low.outcome(t) != flowcontrol.OutcomeDispatched {
			t.Fatal(low.err)
		}
		low.adm.Done()
		zero.Done()
		fc.Close()
	})
}

// A decision is paced: the next waits for the confirmation of the last,
// or its timeout.
func TestEvictionWaitsForConfirmationOrTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &revocations{}
		fc := evicting(t, 3, flowcontrol.Eviction{MaxPerDecision: 1, Timeout: time.Second}, rec, nil)
		ctx := context.Background()
		var batch []*flowcontrol.Admission
		for range 3 {
			a, err := fc.EnqueueAndWait(ctx, req("b", -1))
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, a)
		}
		c1 := start(ctx, fc, req("c1", 10))
		synctest.Wait()
		c2 := start(ctx, fc, req("c2", 10))
		synctest.Wait()
		if n := rec.count(flowcontrol.RevocationIssued); n != 1 {
			t.Fatalf("issued %d before the first was confirmed, want 1", n)
		}
		time.Sleep(time.Second) // the timeout passes: the next decision may come
		synctest.Wait()
		if n := rec.count(flowcontrol.RevocationTimedOut); n != 1 {
			t.Fatalf("timed out %d", n)
		}
		if n := rec.count(flowcontrol.RevocationIssued); n != 2 {
			t.Fatalf("issued %d after the timeout, want 2", n)
		}
		if !revoked(batch[2]) || !revoked(batch[1]) || revoked(batch[0]) {
			t.Fatal("wrong victims")
		}
		batch[2].Done() // after its timeout: not a confirmation
		batch[1].Done()
		synctest.Wait()
		if n := rec.count(flowcontrol.RevocationConfirmed); n != 1 {
			t.Fatalf("confirmed %d, want 1", n)
		}
		for _, c := range []*call{c1, c2} {
			if c.outcome(t) != flowcontrol.OutcomeDispatched {
				t.Fatal(c.err)
			}
			c.adm.Done()
		}
		batch[0].Done()
		fc.Close()
	})
}

// A band short of its guarantee takes it back from a band below that
// borrowed it, never past its guarantee nor into the lender's own.
func TestGuaranteeIsTakenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &revocations{}
		fc := mustNew(t, flowcontrol.Config{
			Bands:            []flowcontrol.BandConfig{{Priority: 10, Guarantee: 0.5}, {Priority: -1, Guarantee: 0.25}},
			FallbackPriority: 10,
			Gate:             gate.MaxInFlight(4),
			Revocations:      rec.record,
		})
		ctx := context.Background()
		var batch []*flowcontrol.Admission
		for range 4 { // the idle guarantee is lent
			a, err := fc.EnqueueAndWait(ctx, req("b", -1))
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, a)
		}
		var chats []*call
		for i := range 3 {
			chats = append(chats, start(ctx, fc, req("c", 10)))
			synctest.Wait()
			// Each revocation is confirmed at once.
			for _, a := range batch {
				if revoked(a) {
					if err := a.Err(); !errors.Is(err, flowcontrol.ErrEvicted) {
						t.Fatalf("Err = %v, want evicted", err)
					}
					a.Done()
				}
			}
			synctest.Wait()
			if want := min(i+1, 2); rec.count(flowcontrol.RevocationConfirmed) != want {
				t.Fatalf("after chat %d: %d confirmed, want %d", i, rec.count(flowcontrol.RevocationConfirmed), want)
			}
		}
		if !chats[0].finished() || !chats[1].finished() || chats[2].finished() {
			t.Fatal("want the first two chats started, the third waiting")
		}
		for _, c := range chats[:2] {
			c.adm.Done()
		}
		synctest.Wait()
		if chats[2].outcome(t) != flowcontrol.OutcomeDispatched {
			t.Fatal(chats[2].err)
		}
		chats[2].adm.Done()
		for _, a := range batch {
			a.Done()
		}
		if n := fc.InFlight(); n != 0 {
			t.Fatalf("in flight %d", n)
		}
		fc.Close()
	})
}

// PendingReclaim counts a revocation's footprint from its issue until the
// grace after its confirmation has passed, without a step to say so.
func TestPendingReclaimEndsWithTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := evicting(t, 4, flowcontrol.Eviction{Grace: time.Second}, nil, nil)
		ctx := context.Background()
		var batch []*flowcontrol.Admission
		for range 4 {
			a, _ := fc.EnqueueAndWait(ctx, req("b", -1))
			batch = append(batch, a)
		}
		chat := start(ctx, fc, req("c", 10))
		synctest.Wait()
		if p := fc.PendingReclaim(); p != 0.25 {
			t.Fatalf("pending %v after one revocation at saturation 1 over 4, want 0.25", p)
		}
		batch[3].Done()
		synctest.Wait()
		if p := fc.PendingReclaim(); p != 0.25 {
			t.Fatalf("pending %v within the grace, want 0.25", p)
		}
		time.Sleep(time.Second)
		if p := fc.PendingReclaim(); p != 0 {
			t.Fatalf("pending %v after the grace, want 0", p)
		}
		<-chat.done
		chat.adm.Done()
		for _, a := range batch[:3] {
			a.Done()
		}
		fc.Close()
	})
}

// A band short of its guarantee goes before the bands above it; but when
// the gate refuses it for a reason of its own, the band strict priority
// would offer still starts.
func TestGuaranteedBandRefusedDoesNotHoldBackTheTop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &switchGate{}
		g.set(1)
		fc := mustNew(t, flowcontrol.Config{
			Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1, Guarantee: 0.5}},
			FallbackPriority: 10,
			Gate:             g,
		})
		ctx := context.Background()
		first, err := fc.EnqueueAndWait(ctx, req("c", 10))
		if err != nil {
			t.Fatal(err)
		}
		batch := start(ctx, fc, req("b", -1)) // short of its guarantee
		chat := start(ctx, fc, req("c", 10))
		synctest.Wait()
		g.set(2, -1) // room, but not for band -1
		fc.Nudge()
		synctest.Wait()
		if chat.outcome(t) != flowcontrol.OutcomeDispatched || batch.finished() {
			t.Fatal("the refused guaranteed band held back the band above it")
		}
		g.set(2)
		first.Done()
		synctest.Wait()
		if batch.outcome(t) != flowcontrol.OutcomeDispatched {
			t.Fatal(batch.err)
		}
		chat.adm.Done()
		batch.adm.Done()
		fc.Close()
	})
}

// A request evicted from a full band is told the band's next promise, as
// a refusal of the band is; from a band with room, 1s.
func TestEvictedFromAFullBandWaitsItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1, RequestCapacity: bounded(1)}},
			FallbackPriority: 10,
			Gate:             gate.MaxInFlight(1),
			Eviction:         &flowcontrol.Eviction{},
		})
		ctx := context.Background()
		running, err := fc.EnqueueAndWait(ctx, req("b", -1))
		if err != nil {
			t.Fatal(err)
		}
		queued := start(ctx, fc, req("b", -1)) // the band is full
		synctest.Wait()
		// Two refusals take the band's first two promises: 1s and 2s
		// (the prior: one admission in flight per second).
		for want := time.Second; want <= 2*time.Second; want += time.Second {
			_, err := fc.EnqueueAndWait(ctx, req("b", -1))
			var rej *flowcontrol.RejectionError
			if !errors.As(err, &rej) || rej.RetryAfter != want {
				t.Fatalf("refusal: %v, want Retry-After %v", err, want)
			}
		}
		chat := start(ctx, fc, req("c", 10))
		synctest.Wait()
		var rej *flowcontrol.RejectionError
		if !errors.As(running.Err(), &rej) || rej.RetryAfter != 3*time.Second {
			t.Fatalf("evicted from a full band: %v, want the next promise, 3s", running.Err())
		}
		running.Done()
		synctest.Wait()
		chat.adm.Done()
		synctest.Wait()
		queued.adm.Done()
		fc.Close()
	})
}

// TestHugeEvictionTimesArmNoTimerPerEvent: a Timeout or a Grace of any
// size, up to the largest Duration, never wraps an instant into the past.
// While a revocation awaits a confirmation that never comes, the refused
// offers that follow arm no timer of their own, and the wake-up of a
// timeout that never comes arms none at all.
func TestHugeEvictionTimesArmNoTimerPerEvent(t *testing.T) {
	for name, e := range map[string]flowcontrol.Eviction{
		"timeout": {Timeout: time.Duration(math.MaxInt64), MaxPerDecision: 1},
		"grace":   {Grace: time.Duration(math.MaxInt64), MaxPerDecision: 1},
	} {
		t.Run(name, func(t *testing.T) {
			clock := clocktest.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
			rec := &revocations{}
			fc := mustNew(t, flowcontrol.Config{
				Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
				FallbackPriority: 10,
				Gate:             gate.MaxInFlight(2),
				Eviction:         &e,
				Clock:            clock,
				Revocations:      rec.record,
			})
			clock.Advance(time.Nanosecond) // past the epoch: the sum would wrap
			batch, err := fc.EnqueueAndWait(context.Background(), req("batch", -1))
			if err != nil {
				t.Fatal(err)
			}
			other, err := fc.EnqueueAndWait(context.Background(), req("batch", -1))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { other.Done() }()
			var waiting []*call
			for i := range 200 {
				waiting = append(waiting, submit(context.Background(), fc, req(fmt.Sprint("chat", i), 10)))
				fc.Nudge()
			}
			if !revoked(other) || revoked(batch) {
				t.Fatal("want the newest batch admission revoked, and it alone")
			}
			batch, other = other, batch
			if n := clock.Pending(); n > 1 {
				// The requests have no TTL: they arm nothing; the reclaimer
				// at most its one wake-up.
				t.Fatalf("%d timers pending after %d refused offers, want at most one of the reclaimer's", n, len(waiting))
			}
			if got := rec.count(flowcontrol.RevocationIssued); got != 1 {
				t.Fatalf("%d revocations issued, want 1: the next decision waits for the confirmation", got)
			}
			batch.Done()
			if name == "grace" {
				// A grace that never ends holds the next decision back,
				// however many offers the gate refuses.
				clock.Advance(time.Hour)
				fc.Nudge()
				if got := rec.count(flowcontrol.RevocationIssued); got != 1 {
					t.Fatalf("%d revocations issued during an endless grace, want 1", got)
				}
			}
			fc.Close()
			if n := clock.Pending(); n != 0 {
				t.Fatalf("%d timers pending after Close", n)
			}
		})
	}
}

// TestGuaranteeComesBackInTheStatedRounds holds BandConfig.Guarantee's
// bound: a burst of G = 4 that finds its whole share lent out gets it back
// within 1 + ⌈(G−1)/M⌉ rounds of the holders' confirmation time (1s
// here; MaxInFlight sees a Done at once, so no grace), and not sooner.
func TestGuaranteeComesBackInTheStatedRounds(t *testing.T) {
	for _, m := range []int{1, 2, 8} {
		t.Run(fmt.Sprint("MaxPerDecision=", m), func(t *testing.T) {
			const share, confirm = 4, time.Second
			clock := clocktest.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
			fc := mustNew(t, flowcontrol.Config{
				Bands:            []flowcontrol.BandConfig{{Priority: 10, Guarantee: 1}, {Priority: -1}},
				FallbackPriority: 10,
				Gate:             gate.MaxInFlight(share),
				// Pacing only: nothing is evicted for priority, and the
				// guarantee is taken back from band -1 all the same.
				Eviction: &flowcontrol.Eviction{MaxPerDecision: m, Below: -100, GuaranteesIgnoreBelow: true},
				Clock:    clock,
			})
			ctx := context.Background()
			var batch []*flowcontrol.Admission
			for range share { // the idle share is lent
				a, err := fc.EnqueueAndWait(ctx, req("b", -1))
				if err != nil {
					t.Fatal(err)
				}
				batch = append(batch, a)
			}
			var burst []*call
			for range share {
				burst = append(burst, submit(ctx, fc, req("c", 10)))
			}
			rounds := 0
			for started := 0; started < share; {
				clock.Advance(confirm) // the holders stop and confirm
				rounds++
				for _, a := range batch {
					if revoked(a) {
						a.Done()
					}
				}
				started = 0
				for _, c := range burst {
					if c.finished() {
						started++
					}
				}
				if rounds > 10 {
					t.Fatalf("%d of the burst started after %d rounds", started, rounds)
				}
			}
			if want := 1 + (share-1+m-1)/m; rounds != want {
				t.Fatalf("the share came back in %d rounds of %s, want 1 + ⌈(G−1)/M⌉ = %d", rounds, confirm, want)
			}
		})
	}
}

// hidden is a gate with no optional interface of its own: what it wraps
// admits, and nothing else shows.
type hidden struct{ gate.Gate }

// Behind a gate whose servers preempt for a higher band themselves
// (gate.PreemptingGate), eviction revokes nothing: PriorityMaxInFlight(2)
// lets chat past the batch requests that fill it up to 2 chat in flight,
// and refuses a third chat, which no revocation would let in. The same
// gate with its ServersPreempt hidden has batch revoked for that third.
func TestEvictionLeavesPreemptionToTheServers(t *testing.T) {
	for _, preempts := range []bool{true, false} {
		t.Run(fmt.Sprint("preempts=", preempts), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &revocations{}
				var g gate.Gate = gate.PriorityMaxInFlight(2)
				if !preempts {
					g = hidden{g}
				}
				fc := mustNew(t, flowcontrol.Config{
					Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
					FallbackPriority: 10,
					Gate:             g,
					Eviction:         &flowcontrol.Eviction{},
					Revocations:      rec.record,
				})
				ctx := context.Background()
				var batch []*flowcontrol.Admission
				for range 2 {
					a, err := fc.EnqueueAndWait(ctx, req("batch", -1))
					if err != nil {
						t.Fatal(err)
					}
					batch = append(batch, a)
				}
				chats := []*call{start(ctx, fc, req("chat", 10)), start(ctx, fc, req("chat", 10)), start(ctx, fc, req("chat", 10))}
				synctest.Wait()
				var running []*call
				var waiting *call
				for _, c := range chats {
					if c.finished() {
						running = append(running, c)
					} else {
						waiting = c
					}
				}
				if len(running) != 2 {
					t.Fatalf("%d chat started, want 2 past the batch", len(running))
				}
				issued := rec.count(flowcontrol.RevocationIssued)
				if preempts && (issued != 0 || revoked(batch[0]) || revoked(batch[1])) {
					t.Errorf("behind a preempting gate: %d revocations issued", issued)
				}
				if !preempts && issued == 0 {
					t.Errorf("behind the same gate, its preemption hidden: no revocation, want eviction to act")
				}
				running[0].adm.Done()
				synctest.Wait()
				if waiting.outcome(t) != flowcontrol.OutcomeDispatched {
					t.Fatalf("third chat: %v", waiting.err)
				}
				for _, c := range chats {
					c.adm.Done()
				}
				for _, a := range batch {
					a.Done()
				}
				fc.Close()
			})
		})
	}
}
