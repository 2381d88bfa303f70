package flowcontrol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/clocktest"
	"github.com/sluicegate/sluice/ordering"
)

// blockingPolicy is FCFS, but its Key blocks for a request carrying the
// x-block header until release is closed, after telling entered.
type blockingPolicy struct {
	entered chan struct{}
	release chan struct{}
}

func (blockingPolicy) TypeName() string { return "blocking-fcfs-ordering-policy" }

func (blockingPolicy) RequiredCapability() ordering.Capability { return ordering.CapabilityFIFO }

func (p blockingPolicy) Key(it *ordering.Item) ordering.Key {
	if it.Header.Get("x-block") != "" {
		close(p.entered)
		<-p.release
	}
	return ordering.FCFS().Key(it)
}

// TestQueueTimeIsNeverNegative: a request's queue time is how long it
// waited, measured on the controller's clock. Contract (Admission.QueueTime,
// Event.QueueTime; "Time comes from one injectable clock"). enqueue runs
// dispatch with the time its caller read before taking the lock (before
// Policy.Key ran), so a request queued in the meantime is dispatched "before"
// it was queued and reports a negative queue time; the drain meters see time
// run backwards too.
func TestQueueTimeIsNeverNegative(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	g := &switchGate{}
	g.set(0)
	pol := blockingPolicy{entered: make(chan struct{}), release: make(chan struct{})}
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 5}, {Priority: 0, Policy: pol}},
		Gate:  g,
		Clock: clock,
	})
	slow := flowcontrol.Request{Key: key("slow", 0), Header: map[string][]string{"X-Block": {"1"}}}
	a := start(context.Background(), fc, slow)
	<-pol.entered // a read the clock and is deriving its key, unlocked

	clock.Advance(10 * time.Second)
	b := submit(context.Background(), fc, req("b", 5)) // queued at +10s
	require.False(t, b.finished())
	g.set(1) // room for one; no Nudge: a's enqueue will dispatch b

	close(pol.release)
	<-b.done
	require.NoError(t, b.err)
	require.GreaterOrEqual(t, b.adm.QueueTime(), time.Duration(0),
		"b waited no time at all on the clock, yet its queue time is %v", b.adm.QueueTime())
	b.adm.Done()
	<-a.done
	require.NoError(t, a.err)
	a.adm.Done()
}

func TestContextAlreadyDoneIsRefusedAtOnce(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a, err := fc.EnqueueAndWait(ctx, req("x", 0))
	if a != nil || !errors.Is(err, flowcontrol.ErrRejectedContextCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: admission %v error %v", a, err)
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	a, err = fc.EnqueueAndWait(dctx, req("y", 0))
	if a != nil || !errors.Is(err, flowcontrol.ErrRejectedTTLExpired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired context: admission %v error %v", a, err)
	}
	if fc.InFlight() != 0 {
		t.Fatal("a refused request holds a slot")
	}
}
