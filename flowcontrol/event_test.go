package flowcontrol_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// tickingClock moves one microsecond forward at each reading, so that
// every span the controller measures with it is positive, and counts the
// readings. Its timers are real ones; the tests here set no TTL.
type tickingClock struct {
	mu    sync.Mutex
	now   time.Time
	reads int
}

func (c *tickingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	c.now = c.now.Add(time.Microsecond)
	return c.now
}

func (c *tickingClock) AfterFunc(d time.Duration, f func()) flowcontrol.Timer {
	return time.AfterFunc(d, f)
}

func (c *tickingClock) readings() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// Every Event carries the request's Tag and counted byte size, whether it
// queued, and how long its enqueue took; Waiting hears each request that
// queues, once, when it does, with the same tag, size and enqueue time
// that its outcome's Event carries later.
func TestEventCarriesTagAndEnqueueTime(t *testing.T) {
	var mu sync.Mutex
	var observed, waited []flowcontrol.Event
	c, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(1)}},
		Gate:  gate.MaxInFlight(1),
		Clock: &tickingClock{now: time.Unix(0, 0)},
		Observer: func(ev flowcontrol.Event) {
			mu.Lock()
			defer mu.Unlock()
			observed = append(observed, ev)
		},
		Waiting: func(ev flowcontrol.Event) {
			mu.Lock()
			defer mu.Unlock()
			waited = append(waited, ev)
		},
	})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	key := flowcontrol.FlowKey{ID: "tenant", Priority: 0}

	// At once: dispatched within the call.
	first, err := c.EnqueueAndWait(ctx, flowcontrol.Request{Key: key, ByteSize: 10, Tag: "first"})
	require.NoError(t, err)
	require.Len(t, observed, 1)
	ev := observed[0]
	require.Equal(t, flowcontrol.OutcomeDispatched, ev.Outcome)
	require.False(t, ev.Queued)
	require.Equal(t, "first", ev.Tag)
	require.Equal(t, int64(10), ev.ByteSize)
	require.Positive(t, ev.EnqueueTime)
	require.Empty(t, waited, "a request that does not queue is not waiting")

	// Queued: Waiting hears it as its Submit queues it.
	var second *flowcontrol.Admission
	c.Submit(ctx, flowcontrol.Request{Key: key, ByteSize: -1, Tag: "second"}, func(a *flowcontrol.Admission, err error) {
		require.NoError(t, err)
		second = a
	})
	require.Len(t, observed, 1)
	require.Len(t, waited, 1)
	w := waited[0]
	require.True(t, w.Queued)
	require.Equal(t, "second", w.Tag)
	require.Equal(t, int64(0), w.ByteSize, "a negative size counts as 0")
	require.Equal(t, key, w.Requested)
	require.Equal(t, key, w.Effective)
	require.Positive(t, w.EnqueueTime)

	// Refused at once: the band holds one waiter already.
	_, err = c.EnqueueAndWait(ctx, flowcontrol.Request{Key: key, ByteSize: 3, Tag: "third"})
	require.ErrorIs(t, err, flowcontrol.ErrRejectedSaturated)
	require.Len(t, observed, 2)
	ev = observed[1]
	require.Equal(t, flowcontrol.OutcomeRejectedSaturated, ev.Outcome)
	require.False(t, ev.Queued)
	require.Equal(t, "third", ev.Tag)
	require.Equal(t, int64(3), ev.ByteSize)
	require.Positive(t, ev.EnqueueTime)
	require.Len(t, waited, 1)

	// The queued request's outcome: its Event repeats what Waiting heard.
	first.Done()
	require.NotNil(t, second)
	require.Len(t, observed, 3)
	ev = observed[2]
	require.Equal(t, flowcontrol.OutcomeDispatched, ev.Outcome)
	require.True(t, ev.Queued)
	require.Equal(t, "second", ev.Tag)
	require.Equal(t, w.EnqueueTime, ev.EnqueueTime)
	require.Equal(t, int64(0), ev.ByteSize)
	require.Positive(t, ev.QueueTime)
	second.Done()
	require.Len(t, waited, 1, "Waiting is called once per queued request")
}

// Without an Observer or Waiting, nothing is timed: an immediate admission
// reads the clock not once.
func TestUntimedAdmissionReadsNoClock(t *testing.T) {
	clock := &tickingClock{now: time.Unix(0, 0)}
	c, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0}},
		Gate:  gate.MaxInFlight(1),
		Clock: clock,
	})
	require.NoError(t, err)
	defer c.Close()
	before := clock.readings()
	a, err := c.EnqueueAndWait(context.Background(), flowcontrol.Request{Tag: "x"})
	require.NoError(t, err)
	a.Done()
	require.Equal(t, before, clock.readings())
}

// A Waiting that panics in an EnqueueAndWait gives up the wait: the caller
// gets the panic, the request leaves its queue, the Observer hears it
// cancelled, and no slot is lost.
func TestWaitingPanicGivesUpTheWait(t *testing.T) {
	var outcomes []flowcontrol.Outcome
	c, err := flowcontrol.New(flowcontrol.Config{
		Bands:    []flowcontrol.BandConfig{{Priority: 0}},
		Gate:     gate.MaxInFlight(1),
		Observer: func(ev flowcontrol.Event) { outcomes = append(outcomes, ev.Outcome) },
		Waiting:  func(flowcontrol.Event) { panic("waiting hook") },
	})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	holder, err := c.EnqueueAndWait(ctx, flowcontrol.Request{})
	require.NoError(t, err)
	require.PanicsWithValue(t, "waiting hook", func() {
		_, _ = c.EnqueueAndWait(ctx, flowcontrol.Request{})
	})
	s, err := c.CapacitySnapshot(0)
	require.NoError(t, err)
	require.Zero(t, s.QueuedRequests)
	require.Equal(t, []flowcontrol.Outcome{flowcontrol.OutcomeDispatched, flowcontrol.OutcomeRejectedContextCancelled}, outcomes)
	holder.Done()
	require.Zero(t, c.InFlight())
	// The slot is free again.
	a, err := c.EnqueueAndWait(ctx, flowcontrol.Request{})
	require.NoError(t, err)
	a.Done()
}
