package sim

import (
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// sendAt sends a request of prompt and output tokens at elapsed time at,
// once, and keeps the response it gets.
func sendAt(s *Sim, at time.Duration, prompt, output int, got *Response) *Record {
	r := s.NewRecord(0)
	r.PromptTokens, r.OutputTokens = prompt, output
	s.Clock().At(at, func() {
		s.Send(r, func(resp Response) {
			*got = resp
			s.End(r)
		})
	})
	return r
}

// A request aborted midway stops at once: its slot goes to the next
// request at the abort instant, its client hears Aborted, and exactly the
// tokens it had decoded, and its prefill, are counted as wasted.
func TestAbortFreesTheSlotAndCountsTheWaste(t *testing.T) {
	// One slot behind the pool's gate: b waits in the controller until a
	// releases its admission.
	s, err := New(Config{
		Seed: 1, Duration: time.Hour,
		Controller: flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}},
		Pool:       PoolConfig{Servers: 1, Slots: 1, Base: 10 * time.Millisecond, PerOutputToken: time.Millisecond},
		Tenants:    []Tenant{{Name: "t"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ra, rb Response
	a := sendAt(s, 0, 0, 100, &ra) // prefill to 10ms, then a token each ms to 110ms
	b := sendAt(s, time.Millisecond, 0, 100, &rb)
	abortAt := 35*time.Millisecond + 500*time.Microsecond // 25.5 tokens' time into a's decode
	var aborted, again bool
	var runningAfter int
	s.Clock().At(abortAt, func() {
		aborted = s.Pool().Abort(a)
		runningAfter = s.Pool().Running()
		again = s.Pool().Abort(a)
	})
	s.Run()
	if !aborted || again {
		t.Fatalf("Abort: %v, then again %v; want true, then false (a has ended)", aborted, again)
	}
	if !ra.Aborted || ra.Served || a.Served || a.End != abortAt {
		t.Fatalf("a: response %+v, served %v, ended at %v; want aborted at %v", ra, a.Served, a.End, abortAt)
	}
	if a.Aborts != 1 || a.WastedTokens != 25 || a.WastedPrefill != 10*time.Millisecond {
		t.Fatalf("a: %d aborts, %d wasted tokens, wasted prefill %v; want 1, 25 (whole tokens decoded), 10ms",
			a.Aborts, a.WastedTokens, a.WastedPrefill)
	}
	// b started in the slot at the abort instant: its first token a
	// prefill later.
	if ttft, _ := b.TTFT(); !b.Served || runningAfter != 1 || ttft != abortAt+10*time.Millisecond-time.Millisecond {
		t.Fatalf("b: served %v, TTFT %v, %d running after the abort; want b running from %v", b.Served, ttft, runningAfter, abortAt)
	}
	if b.Aborts != 0 || b.WastedTokens != 0 || rb.Aborted {
		t.Fatalf("b: %+v, response %+v: want nothing wasted", *b, rb)
	}
	if sum := Summarize(s.Records(), nil); sum.Aborts != 1 || sum.WastedTokens != 25 || sum.WastedPrefill != 10*time.Millisecond {
		t.Fatalf("summary: %d aborts, %d tokens, %v prefill wasted", sum.Aborts, sum.WastedTokens, sum.WastedPrefill)
	}
	if s.Controller().InFlight() != 0 {
		t.Fatalf("%d admissions in flight at the end", s.Controller().InFlight())
	}
}

// An attempt aborted during its prefill wastes the prefill run so far and
// no token; one aborted while it waits for a slot, in the pool's queue or
// a server's, wastes nothing and leaves its queue.
func TestAbortInPrefillAndWhileQueued(t *testing.T) {
	for _, serverQueues := range []bool{false, true} {
		s, err := New(Config{
			Seed: 1, Duration: time.Hour,
			Controller: flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}},
			Gate:       func(*Pool) gate.Gate { return openGate{} },
			Pool: PoolConfig{Servers: 1, Slots: 1, Base: 10 * time.Millisecond, PerOutputToken: time.Millisecond,
				ServerQueues: serverQueues},
			Tenants: []Tenant{{Name: "t"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var ra, rb, rc Response
		a := sendAt(s, 0, 0, 100, &ra)
		b := sendAt(s, 0, 0, 100, &rb) // waits for a's slot
		c := sendAt(s, 0, 0, 100, &rc) // waits behind b
		s.Clock().At(4*time.Millisecond, func() {
			s.Pool().Abort(b) // queued
			s.Pool().Abort(a) // in its prefill: c takes the slot
		})
		s.Run()
		if !ra.Aborted || a.WastedTokens != 0 || a.WastedPrefill != 4*time.Millisecond {
			t.Errorf("server queues %v: a %+v: want aborted with 4ms of prefill and no token wasted", serverQueues, *a)
		}
		if !rb.Aborted || b.Aborts != 1 || b.WastedTokens != 0 || b.WastedPrefill != 0 {
			t.Errorf("server queues %v: b %+v: want aborted while queued, nothing wasted", serverQueues, *b)
		}
		if ttft, _ := c.TTFT(); !c.Served || ttft != 14*time.Millisecond || s.Pool().MaxWaiting() != 2 {
			t.Errorf("server queues %v: c served %v, TTFT %v, max waiting %d; want c started at 4ms, TTFT 14ms, 2 waited",
				serverQueues, c.Served, ttft, s.Pool().MaxWaiting())
		}
		if s.Controller().InFlight() != 0 || s.Pool().Running() != 0 {
			t.Errorf("server queues %v: %d in flight, %d running at the end", serverQueues, s.Controller().InFlight(), s.Pool().Running())
		}
	}
}

// An attempt's own response callback finds nothing to abort: the pool let
// it go before writing the response.
func TestAbortFromTheResponseFindsNothing(t *testing.T) {
	s, err := New(Config{
		Seed: 1, Duration: time.Hour,
		Controller: flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}},
		Pool:       PoolConfig{Servers: 1, Slots: 1, PerOutputToken: time.Millisecond},
		Tenants:    []Tenant{{Name: "t"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := s.NewRecord(0)
	r.OutputTokens = 10
	aborted := true
	s.Clock().At(0, func() {
		s.Send(r, func(Response) {
			aborted = s.Pool().Abort(r)
			s.End(r)
		})
	})
	s.Run()
	if aborted || !r.Served || r.Aborts != 0 || s.Controller().InFlight() != 0 {
		t.Fatalf("Abort from the response: %v; record %+v, %d in flight: want false, served, nothing aborted", aborted, *r, s.Controller().InFlight())
	}
}

// With in-flight eviction, the attempt whose admission the controller
// revokes stops at once: the pool aborts it at the revocation's issue, its
// decoded tokens count as wasted, its client hears the eviction (429
// evicted-priority, with the Retry-After the scenario's policy gives) and,
// as its retry policy says, sends it again; the chat request takes the
// freed slot at that instant.
func TestRevokedAttemptIsAbortedAndRetried(t *testing.T) {
	var steps []flowcontrol.RevocationStep
	var heldAtIssue bool
	var outcomes []flowcontrol.Outcome
	var s *Sim
	s, err := New(Config{
		Seed: 1, Duration: time.Hour,
		Controller: flowcontrol.Config{
			Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
			FallbackPriority: -1,
			Gate:             gate.MaxInFlight(2),
			Eviction:         &flowcontrol.Eviction{},
			Revocations: func(rv flowcontrol.Revocation) {
				steps = append(steps, rv.Step)
				if rv.Step == flowcontrol.RevocationIssued {
					heldAtIssue = rv.Tag.(*Record).held != 0
				}
			},
		},
		RetryAfter: func(_ *Sim, rej *flowcontrol.RejectionError) time.Duration {
			outcomes = append(outcomes, rej.Outcome)
			return 200 * time.Millisecond
		},
		Pool: PoolConfig{Servers: 1, Slots: 2, Base: 10 * time.Millisecond, PerOutputToken: time.Millisecond},
		Tenants: []Tenant{
			{Name: "chat", Priority: 10},
			{Name: "batch", Priority: -1, Retry: Retry{MaxAttempts: 3, Backoff: time.Second, MaxRetryAfter: time.Minute}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	newAt := func(tenant int, at time.Duration, output int) *Record {
		r := s.NewRecord(tenant)
		r.OutputTokens = output
		s.Clock().At(at, func() { s.Request(r, nil) })
		return r
	}
	older := newAt(1, 0, 100)
	newer := newAt(1, time.Millisecond, 100)
	evictAt := 50*time.Millisecond + 500*time.Microsecond
	chat := newAt(0, evictAt, 5)
	s.Run()

	if len(steps) != 2 || steps[0] != flowcontrol.RevocationIssued || steps[1] != flowcontrol.RevocationConfirmed || !heldAtIssue {
		t.Fatalf("revocation steps %v, victim held when issued %v: want issued (still held), then confirmed", steps, heldAtIssue)
	}
	if len(outcomes) != 1 || outcomes[0] != flowcontrol.OutcomeEvictedPriority {
		t.Fatalf("drops with a Retry-After: %v; want one evicted-priority", outcomes)
	}
	// The newest batch request was the victim: 49.5 ms into its run, 39.5
	// tokens' time into its decode.
	if older.Aborts != 0 || !older.Served || older.Attempts != 1 {
		t.Errorf("older batch request %+v: want served untouched", *older)
	}
	if newer.Aborts != 1 || newer.WastedTokens != 39 || newer.WastedPrefill != 10*time.Millisecond ||
		newer.Drops[flowcontrol.OutcomeEvictedPriority] != 1 || newer.Attempts != 2 || !newer.Served || newer.GaveUp {
		t.Errorf("evicted batch request %+v: want 1 abort, 39 tokens and 10ms of prefill wasted, 1 evicted-priority drop, served on its second attempt", *newer)
	}
	// Its retry, 200 ms after the eviction, finds chat's slot free again
	// (chat ends 15 ms after it started) and runs whole.
	if want := evictAt + 200*time.Millisecond + 110*time.Millisecond; newer.End != want {
		t.Errorf("evicted batch request ended at %v; want %v (retried after its Retry-After)", newer.End, want)
	}
	if ttft, _ := chat.TTFT(); !chat.Served || ttft != 10*time.Millisecond {
		t.Errorf("chat: served %v, TTFT %v; want the bare prefill, 10ms: it took the revoked slot at once", chat.Served, ttft)
	}
	if s.Controller().InFlight() != 0 || s.Pool().Running() != 0 {
		t.Errorf("%d in flight, %d running at the end", s.Controller().InFlight(), s.Pool().Running())
	}
}
