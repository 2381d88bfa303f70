package flowcontrol_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// TestTTLExpiresAtExactlyTheTTL: expiry happens at the TTL on the fake clock,
// not at a sweep: 1ns before it the request still waits.
func TestTTLExpiresAtExactlyTheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 3 * time.Second
		rec := &recorder{}
		fc := mustNew(t, flowcontrol.Config{
			Bands:    []flowcontrol.BandConfig{{Priority: 0, TTL: ttl}},
			Gate:     gate.MaxInFlight(0),
			Observer: rec.observe,
		})
		w := start(t.Context(), fc, flowcontrol.Request{Key: key("w", 0), ByteSize: 7})
		synctest.Wait()
		time.Sleep(ttl - time.Nanosecond)
		synctest.Wait()
		if w.finished() {
			t.Fatalf("finished 1ns before its TTL: %v", w.err)
		}
		if s, _ := fc.CapacitySnapshot(0); s.QueuedRequests != 1 || s.QueuedBytes != 7 {
			t.Fatalf("snapshot before expiry: %v", s)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !w.finished() {
			t.Fatal("not finished at its TTL")
		}
		rej := w.rejection(t)
		if rej.Outcome != flowcontrol.OutcomeRejectedTTLExpired || !errors.Is(w.err, flowcontrol.ErrRejectedTTLExpired) {
			t.Fatalf("outcome %v, error %v; want expired", rej.Outcome, w.err)
		}
		if errors.Is(w.err, context.DeadlineExceeded) {
			t.Fatalf("band TTL expiry matches context.DeadlineExceeded: %v", w.err)
		}
		// Its band held it for its whole TTL (over a second) and
		// dispatched nothing: measured not to drain, it gets the 30s cap.
		if rej.QueueTime != ttl || rej.RetryAfter != 30*time.Second {
			t.Fatalf("QueueTime %v RetryAfter %v; want %v and 30s", rej.QueueTime, rej.RetryAfter, ttl)
		}
		if got := rej.Outcome.String(); got != "rejected-ttl-expired" {
			t.Fatalf("DroppedReason = %q", got)
		}
		if got := rej.Outcome.HTTPStatus(); got != http.StatusTooManyRequests {
			t.Fatalf("HTTPStatus = %d", got)
		}
		if s, _ := fc.CapacitySnapshot(0); s.QueuedRequests != 0 || s.QueuedBytes != 0 {
			t.Fatalf("snapshot after expiry: %v", s)
		}
		if rec.count(flowcontrol.OutcomeRejectedTTLExpired) != 1 {
			t.Fatalf("observer events: %v", rec.events)
		}
	})
}

// TestTTLIsTheSmallestOfBandDefaultOwnAndDeadline checks that each of the
// four sources decides the expiry when it is the smallest, and that a context
// deadline is an expiry matching context.DeadlineExceeded.
func TestTTLIsTheSmallestOfBandDefaultOwnAndDeadline(t *testing.T) {
	cases := []struct {
		name                      string
		band, dflt, own, deadline time.Duration // 0 = unset
		want                      time.Duration
		wantDeadlineExceededError bool
	}{
		{name: "band", band: 2 * time.Second, dflt: 5 * time.Second, own: 7 * time.Second, deadline: 9 * time.Second, want: 2 * time.Second},
		{name: "default", band: 5 * time.Second, dflt: 2 * time.Second, own: 7 * time.Second, deadline: 9 * time.Second, want: 2 * time.Second},
		{name: "own", band: 5 * time.Second, dflt: 7 * time.Second, own: 2 * time.Second, deadline: 9 * time.Second, want: 2 * time.Second},
		{name: "deadline", band: 5 * time.Second, dflt: 7 * time.Second, own: 9 * time.Second, deadline: 2 * time.Second, want: 2 * time.Second, wantDeadlineExceededError: true},
		{name: "only-own", own: 4 * time.Second, want: 4 * time.Second},
		{name: "only-deadline", deadline: 4 * time.Second, want: 4 * time.Second, wantDeadlineExceededError: true},
		{name: "deadline-ties-own", own: 3 * time.Second, deadline: 3 * time.Second, want: 3 * time.Second, wantDeadlineExceededError: true},
		{name: "negative-own-is-none", band: 6 * time.Second, own: -time.Second, want: 6 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fc := mustNew(t, flowcontrol.Config{
					Bands:      []flowcontrol.BandConfig{{Priority: 0, TTL: tc.band}},
					DefaultTTL: tc.dflt,
					Gate:       gate.MaxInFlight(0),
				})
				ctx := t.Context()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				begin := time.Now()
				w := start(ctx, fc, flowcontrol.Request{Key: key("w", 0), TTL: tc.own})
				<-w.done
				if got := time.Since(begin); got != tc.want {
					t.Fatalf("expired after %v, want %v", got, tc.want)
				}
				rej := w.rejection(t)
				if rej.Outcome != flowcontrol.OutcomeRejectedTTLExpired || rej.QueueTime != tc.want {
					t.Fatalf("outcome %v after %v queued: %v", rej.Outcome, rej.QueueTime, w.err)
				}
				if !errors.Is(w.err, flowcontrol.ErrRejectedTTLExpired) || errors.Is(w.err, flowcontrol.ErrRejectedContextCancelled) {
					t.Fatalf("error %v: want ErrRejectedTTLExpired only", w.err)
				}
				if got := errors.Is(w.err, context.DeadlineExceeded); got != tc.wantDeadlineExceededError {
					t.Fatalf("errors.Is(err, context.DeadlineExceeded) = %v, want %v (err %v)", got, tc.wantDeadlineExceededError, w.err)
				}
			})
		})
	}
}

func TestContextCancelWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		fc := mustNew(t, flowcontrol.Config{
			Bands:    []flowcontrol.BandConfig{{Priority: 0}},
			Gate:     gate.MaxInFlight(0),
			Observer: rec.observe,
		})
		ctx, cancel := context.WithCancel(t.Context())
		w := start(ctx, fc, req("w", 0))
		time.Sleep(time.Second)
		cancel()
		synctest.Wait()
		rej := w.rejection(t)
		if rej.Outcome != flowcontrol.OutcomeRejectedContextCancelled || rej.QueueTime != time.Second {
			t.Fatalf("outcome %v queue time %v", rej.Outcome, rej.QueueTime)
		}
		if !errors.Is(w.err, flowcontrol.ErrRejectedContextCancelled) || !errors.Is(w.err, context.Canceled) {
			t.Fatalf("error %v does not match ErrRejectedContextCancelled and context.Canceled", w.err)
		}
		if rej.Outcome.String() != "rejected-context-cancelled" || rej.Outcome.HTTPStatus() != http.StatusServiceUnavailable {
			t.Fatalf("reason %q status %d", rej.Outcome.String(), rej.Outcome.HTTPStatus())
		}
		if rej.RetryAfter != 0 {
			t.Fatalf("RetryAfter on a cancellation: %v", rej.RetryAfter)
		}
		if rec.count(flowcontrol.OutcomeRejectedContextCancelled) != 1 {
			t.Fatalf("events %v", rec.events)
		}
	})
}

func TestContextCauseIsMatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0}},
			Gate:  gate.MaxInFlight(0),
		})
		errClientGone := errors.New("client went away")
		ctx, cancel := context.WithCancelCause(t.Context())
		w := start(ctx, fc, req("w", 0))
		synctest.Wait()
		cancel(errClientGone)
		synctest.Wait()
		if !errors.Is(w.err, errClientGone) || !errors.Is(w.err, context.Canceled) || !errors.Is(w.err, flowcontrol.ErrRejectedContextCancelled) {
			t.Fatalf("error %v should match the cause, context.Canceled and ErrRejectedContextCancelled", w.err)
		}
		if !strings.Contains(w.err.Error(), "client went away") {
			t.Fatalf("error text %q lacks the cause", w.err)
		}
	})
}

// TestGrantBeforeCancelWins: a grant and a cancellation that race are settled
// under the lock. When the grant comes first the caller gets the admission,
// even though its context is done by the time it runs, and it holds the slot.
func TestGrantBeforeCancelWins(t *testing.T) {
	for i := range 50 { // the waiter's select sees both channels ready; vary its choice
		synctest.Test(t, func(t *testing.T) {
			fc := mustNew(t, flowcontrol.Config{
				Bands: []flowcontrol.BandConfig{{Priority: 0}},
				Gate:  gate.MaxInFlight(1),
			})
			h := hold(t, fc)
			ctx, cancel := context.WithCancel(t.Context())
			w := start(ctx, fc, req("w", 0))
			synctest.Wait()
			h.Done() // grants w under the lock ...
			cancel() // ... before w's goroutine has run
			synctest.Wait()
			if w.outcome(t) != flowcontrol.OutcomeDispatched {
				t.Fatalf("run %d: granted request ended %v", i, w.err)
			}
			if fc.InFlight() != 1 {
				t.Fatalf("run %d: InFlight %d, want 1", i, fc.InFlight())
			}
			w.adm.Done()
		})
	}
}

// TestGrantAtTheTTLInstant: a slot freed at exactly a waiter's TTL races its
// expiry. Either outcome is allowed, but exactly one happens, and an expired
// waiter leaves no slot taken.
func TestGrantAtTheTTLInstant(t *testing.T) {
	seen := map[flowcontrol.Outcome]int{}
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			fc := mustNew(t, flowcontrol.Config{
				Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: time.Second}},
				Gate:  gate.MaxInFlight(1),
			})
			h := hold(t, fc)
			w := start(t.Context(), fc, req("w", 0))
			time.Sleep(time.Second) // wakes at the same instant as w's timer
			h.Done()
			synctest.Wait()
			o := w.outcome(t)
			seen[o]++
			switch o {
			case flowcontrol.OutcomeDispatched:
				if fc.InFlight() != 1 {
					t.Fatalf("dispatched, InFlight %d", fc.InFlight())
				}
				w.adm.Done()
			case flowcontrol.OutcomeRejectedTTLExpired:
				if fc.InFlight() != 0 {
					t.Fatalf("expired, InFlight %d", fc.InFlight())
				}
			default:
				t.Fatalf("outcome %v", o)
			}
			if fc.InFlight() != 0 || queued(t, fc, 0) != 0 {
				t.Fatalf("InFlight %d queued %d at the end", fc.InFlight(), queued(t, fc, 0))
			}
		})
	}
	t.Logf("outcomes at the TTL instant: %v", seen)
}

// seenPolicy is FCFS, on the queue kind given, recording the items its Key
// is shown.
type seenPolicy struct {
	kind ordering.Capability
	seen chan ordering.Item
}

func (seenPolicy) TypeName() string { return "seen-fcfs-ordering-policy" }

func (p seenPolicy) RequiredCapability() ordering.Capability { return p.kind }

func (p seenPolicy) Key(it *ordering.Item) ordering.Key {
	p.seen <- *it
	return ordering.FCFS().Key(it)
}

// TestPolicyKeySeesTheRequest: the item a band's policy derives a queued
// request's key from carries the request as it was given, with the
// controller's times and the band's TTL, in a FIFO band (whose waiters keep
// no item) as in a heap band (whose waiters keep theirs as their place in
// the queue); and the request then waits, and expires, as any other.
func TestPolicyKeySeesTheRequest(t *testing.T) {
	for _, kind := range []ordering.QueueKind{ordering.QueueFIFO, ordering.QueueHeap} {
		t.Run(string(kind), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const ttl = 3 * time.Second
				p := seenPolicy{kind: ordering.CapabilityFIFO, seen: make(chan ordering.Item, 1)}
				if kind == ordering.QueueHeap {
					p.kind = ordering.CapabilityPriorityConfigurable
				}
				fc := mustNew(t, flowcontrol.Config{
					Bands: []flowcontrol.BandConfig{{Priority: 0, TTL: ttl, Policy: p, Queue: kind}},
					Gate:  gate.MaxInFlight(0),
				})
				received := time.Now().Add(-time.Second)
				h := http.Header{"X-Slo-Ttft-Ms": {"5"}}
				w := submit(t.Context(), fc, flowcontrol.Request{Key: key("w", 0), ByteSize: 7, ReceivedTime: received, Header: h})
				it := <-p.seen
				if v, _ := it.HeaderValue("x-slo-ttft-ms"); !it.ReceivedTime.Equal(received) || !it.EnqueueTime.Equal(time.Now()) || it.TTL != ttl || it.ByteSize != 7 || v != "5" || it.Value == nil {
					t.Errorf("Key saw %+v", it)
				}
				synctest.Wait()
				if got := queued(t, fc, 0); got != 1 {
					t.Fatalf("%d queued, want 1", got)
				}
				time.Sleep(ttl)
				synctest.Wait()
				if o := w.outcome(t); o != flowcontrol.OutcomeRejectedTTLExpired {
					t.Fatalf("outcome %v, want expiry", o)
				}
			})
		})
	}
}
