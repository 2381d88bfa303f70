package flowcontrol_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// TestCancelledQueuedRequestLeavesSnapshotImmediately: no zombie counts
// against capacity or headroom once its context is cancelled.
func TestCancelledQueuedRequestLeavesSnapshotImmediately(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands:          []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(2), ByteCapacity: bounded(100)}},
			Gate:           gate.MaxInFlight(0),
			NoDisplacement: true,
		})
		ctx, cancel := context.WithCancel(t.Context())
		a := start(ctx, fc, flowcontrol.Request{Key: key("a", 0), ByteSize: 60})
		b := start(t.Context(), fc, flowcontrol.Request{Key: key("b", 0), ByteSize: 40})
		synctest.Wait()
		want := capacity.Snapshot{Priority: 0, QueuedRequests: 2, QueuedBytes: 100, QueuedCost: 2, RequestCapacity: bounded(2), ByteCapacity: bounded(100)}
		if s, _ := fc.CapacitySnapshot(0); s != want {
			t.Fatalf("snapshot %v, want %v", s, want)
		}
		// Full: a third request is refused.
		if _, err := fc.EnqueueAndWait(t.Context(), req("c", 0)); !errors.Is(err, flowcontrol.ErrRejectedSaturated) {
			t.Fatalf("third request: %v, want saturated", err)
		}
		cancel()
		synctest.Wait() // the cancelled waiter has run; no clock has moved
		want.QueuedRequests, want.QueuedBytes, want.QueuedCost = 1, 40, 1
		if s, _ := fc.CapacitySnapshot(0); s != want {
			t.Fatalf("snapshot after cancel %v, want %v", s, want)
		}
		if a.outcome(t) != flowcontrol.OutcomeRejectedContextCancelled || b.finished() {
			t.Fatalf("a %v, b finished %v", a.err, b.finished())
		}
		// The room it left is usable at once.
		c := start(t.Context(), fc, flowcontrol.Request{Key: key("c", 0), ByteSize: 60})
		synctest.Wait()
		if c.finished() {
			t.Fatalf("c should queue in the freed room: %v", c.err)
		}
	})
}

func TestCapacitySnapshotIsAllocationFree(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 7, RequestCapacity: bounded(4)}}})
	var s capacity.Snapshot
	allocs := testing.AllocsPerRun(1000, func() { s, _ = fc.CapacitySnapshot(7) })
	if allocs != 0 {
		t.Fatalf("CapacitySnapshot allocates %v times per call", allocs)
	}
	if s.Priority != 7 || s.RequestCapacity != bounded(4) {
		t.Fatalf("snapshot %v", s)
	}
	var _ capacity.Reader = fc
	if _, err := fc.CapacitySnapshot(3); !errors.Is(err, capacity.ErrBandNotFound) || !strings.Contains(err.Error(), "3") {
		t.Fatalf("missing band: %v", err)
	}
}

// Priorities lists the bands highest first, and a band provisioned at run
// time appears in a new slice: one returned before stays as it was.
func TestPrioritiesFollowProvisioning(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: -5}, {Priority: 10}, {Priority: 0}}})
	before := fc.Priorities()
	if !slices.Equal(before, []int{10, 0, -5}) {
		t.Fatalf("Priorities = %v, want [10 0 -5]", before)
	}
	if err := fc.ProvisionBand(flowcontrol.BandConfig{Priority: 5}); err != nil {
		t.Fatal(err)
	}
	if got := fc.Priorities(); !slices.Equal(got, []int{10, 5, 0, -5}) {
		t.Fatalf("after ProvisionBand(5): Priorities = %v, want [10 5 0 -5]", got)
	}
	if !slices.Equal(before, []int{10, 0, -5}) {
		t.Fatalf("the slice returned before changed: %v", before)
	}
	if n := testing.AllocsPerRun(100, func() { _ = fc.Priorities() }); n != 0 {
		t.Fatalf("Priorities allocates %v times", n)
	}
}
