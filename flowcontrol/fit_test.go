package flowcontrol_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// TestFlowRequestCapacity bounds one flow, and is never displaced around.
func TestFlowRequestCapacity(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, FlowRequestCapacity: bounded(2)}},
		Gate:  gate.MaxInFlight(0),
	})
	submit(context.Background(), fc, req("A", 0))
	submit(context.Background(), fc, req("A", 0))
	_, err := fc.EnqueueAndWait(context.Background(), req("A", 0))
	require.ErrorIs(t, err, flowcontrol.ErrRejectedSaturated)
	require.Contains(t, err.Error(), `flow "A" request capacity 2 in band 0 reached`)
	b := submit(context.Background(), fc, req("B", 0))
	require.False(t, b.finished())
}

// TestCostCapacity bounds the summed cost of waiting requests, per band and
// controller-wide; a request costlier than a capacity can never fit.
func TestCostCapacity(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{{Priority: 0, CostCapacity: bounded(1000)}, {Priority: 1}},
		CostCapacity:   bounded(1500),
		Gate:           gate.MaxInFlight(0),
		NoDisplacement: true,
	})
	submit(context.Background(), fc, flowcontrol.Request{Key: key("a", 0), Cost: 800})
	_, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: key("b", 0), Cost: 300})
	require.ErrorIs(t, err, flowcontrol.ErrRejectedSaturated)
	require.Contains(t, err.Error(), "band 0 cost capacity 1000 exceeded")
	submit(context.Background(), fc, flowcontrol.Request{Key: key("c", 1), Cost: 600})
	_, err = fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: key("d", 1), Cost: 200})
	require.Contains(t, err.Error(), "global cost capacity 1500 exceeded")
	_, err = fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: key("e", 0), Cost: 1001})
	require.ErrorIs(t, err, flowcontrol.ErrTooLarge)
	require.Contains(t, err.Error(), "band 0 cost capacity 1000 exceeded by the request alone: it can never fit")
	// Too large for the cost capacity, while the flow's own capacity is
	// merely full: the message names the cost capacity.
	fc2 := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, FlowRequestCapacity: bounded(1), CostCapacity: bounded(10)}},
		Gate:  gate.MaxInFlight(0),
	})
	submit(context.Background(), fc2, req("x", 0))
	_, err = fc2.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: key("x", 0), Cost: 11})
	require.ErrorIs(t, err, flowcontrol.ErrTooLarge)
	require.Contains(t, err.Error(), "cost capacity 10 exceeded by the request alone")
	s, _ := fc.CapacitySnapshot(0)
	require.Equal(t, capacity.Snapshot{Priority: 0, QueuedRequests: 1, QueuedCost: 800, CostCapacity: bounded(1000)}, s)
	// A request without a cost counts 1.
	submit(context.Background(), fc, req("f", 0))
	s, _ = fc.CapacitySnapshot(0)
	require.Equal(t, int64(801), s.QueuedCost)
}

// TestOneHugeRequestLocksNobodyOut: with every capacity unbounded, a queued
// request declaring the largest cost and size an int64 holds counts as
// MaxRequestCost and MaxRequestBytes, so every other request, of any size
// and in any band, still queues beside it; it used to fill the counters and
// have everyone else refused as saturated for as long as it waited.
func TestOneHugeRequestLocksNobodyOut(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 5}, {Priority: 0}, {Priority: -5}},
		Gate:  gate.MaxInFlight(0), // everything waits
	})
	huge := submit(context.Background(), fc, flowcontrol.Request{Key: key("huge", 0), Cost: math.MaxInt64 - 1, ByteSize: math.MaxInt64})
	require.False(t, huge.finished(), "the huge request was refused: %v", huge.err)
	var others []*call
	for _, p := range []int{5, 0, -5} {
		for _, r := range []flowcontrol.Request{
			{Key: key("small", p)},
			{Key: key("costly", p), Cost: 1000, ByteSize: 1 << 20},
			{Key: key("huge-too", p), Cost: math.MaxInt64, ByteSize: math.MaxInt64},
		} {
			c := submit(context.Background(), fc, r)
			require.False(t, c.finished(), "%v refused beside a huge request: %v", r.Key, c.err)
			others = append(others, c)
		}
	}
	s, err := fc.CapacitySnapshot(0)
	require.NoError(t, err)
	require.Equal(t, capacity.Snapshot{
		Priority:       0,
		QueuedRequests: 4,
		QueuedBytes:    2*flowcontrol.MaxRequestBytes + 1<<20,
		QueuedCost:     2*flowcontrol.MaxRequestCost + 1000 + 1,
	}, s)
	fc.Close()
	for _, c := range append(others, huge) {
		require.Equal(t, flowcontrol.OutcomeRejectedShuttingDown, c.outcome(t))
	}
	for _, p := range []int{5, 0, -5} {
		s, err := fc.CapacitySnapshot(p)
		require.NoError(t, err)
		require.Zero(t, s.QueuedRequests+s.QueuedBytes+s.QueuedCost, "band %d: %v", p, s)
	}
}

// TestMeteredGateHearsTheClampedCost: the cost a MeteredGate hears, on
// Took and on Returned, is the cost the controller counts — at most
// MaxRequestCost — for a request started at once and for one that waited.
func TestMeteredGateHearsTheClampedCost(t *testing.T) {
	g := &meterGate{n: 1}
	fc := mustNew(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: g})
	first := submit(context.Background(), fc, flowcontrol.Request{Key: key("a", 0), Cost: math.MaxInt64})
	require.Equal(t, flowcontrol.OutcomeDispatched, first.outcome(t))
	second := submit(context.Background(), fc, flowcontrol.Request{Key: key("b", 0), Cost: flowcontrol.MaxRequestCost + 1})
	require.False(t, second.finished())
	fs, err := fc.FlowSnapshot(0, "b")
	require.NoError(t, err)
	require.Equal(t, flowcontrol.MaxRequestCost, fs.QueuedCost)
	first.adm.Done()
	require.Equal(t, flowcontrol.OutcomeDispatched, second.outcome(t))
	second.adm.Done()
	clamped := gate.Slot{Priority: 0, Cost: flowcontrol.MaxRequestCost}
	require.Equal(t, []gate.Slot{clamped, clamped}, g.took)
	require.Len(t, g.returned, 2)
	for _, u := range g.returned {
		require.Equal(t, clamped, u.Slot)
	}
}

// capacityNamed matches the capacity a rejection's message names.
var capacityNamed = regexp.MustCompile(`(band -?\d+|global|flow "[^"]*") (request|byte|cost) capacity (-?\d+)`)

// TestRejectionNamesOnlyABoundedCapacity: whatever the sizes and costs,
// a capacity rejection names a capacity the configuration bounds, with its
// value; where every capacity is unbounded nothing is refused.
func TestRejectionNamesOnlyABoundedCapacity(t *testing.T) {
	limit := func(t *rapid.T, name string) capacity.Limit {
		if !rapid.Bool().Draw(t, name+"-bounded") {
			return capacity.Unbounded()
		}
		return capacity.Bounded(rapid.SampledFrom([]int64{0, 1, 3, 1000, flowcontrol.MaxRequestCost, math.MaxInt64}).Draw(t, name))
	}
	number := rapid.OneOf(
		rapid.Int64Range(-2, 5),
		rapid.SampledFrom([]int64{flowcontrol.MaxRequestCost - 1, flowcontrol.MaxRequestCost, flowcontrol.MaxRequestCost + 1, math.MaxInt64 - 1, math.MaxInt64, math.MinInt64}),
		rapid.Int64(),
	)
	rapid.Check(t, func(t *rapid.T) {
		band := flowcontrol.BandConfig{
			Priority:            0,
			RequestCapacity:     limit(t, "band-requests"),
			ByteCapacity:        limit(t, "band-bytes"),
			CostCapacity:        limit(t, "band-cost"),
			FlowRequestCapacity: limit(t, "flow-requests"),
		}
		cfg := flowcontrol.Config{
			Bands:           []flowcontrol.BandConfig{band},
			RequestCapacity: limit(t, "global-requests"),
			ByteCapacity:    limit(t, "global-bytes"),
			CostCapacity:    limit(t, "global-cost"),
			NoDisplacement:  rapid.Bool().Draw(t, "no-displacement"),
			Gate:            gate.MaxInFlight(0),
		}
		bounds := map[string]capacity.Limit{
			"band 0 request": band.RequestCapacity, "band 0 byte": band.ByteCapacity, "band 0 cost": band.CostCapacity,
			"global request": cfg.RequestCapacity, "global byte": cfg.ByteCapacity, "global cost": cfg.CostCapacity,
		}
		anyBounded := false
		for _, l := range bounds {
			anyBounded = anyBounded || l.IsBounded()
		}
		anyBounded = anyBounded || band.FlowRequestCapacity.IsBounded()
		fc, err := flowcontrol.New(cfg)
		require.NoError(t, err)
		defer fc.Close()
		for i := range rapid.IntRange(1, 12).Draw(t, "requests") {
			r := flowcontrol.Request{
				Key:      key(rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "flow"), 0),
				ByteSize: number.Draw(t, "size"),
				Cost:     number.Draw(t, "cost"),
			}
			c := submit(context.Background(), fc, r)
			var rej *flowcontrol.RejectionError
			if !c.finished() || !errors.As(c.err, &rej) || errors.Is(rej, flowcontrol.ErrDisplaced) {
				continue // queued, or displaced by another request
			}
			require.Equal(t, flowcontrol.OutcomeRejectedSaturated, rej.Outcome, "request %d", i)
			require.True(t, anyBounded, "request %d refused with every capacity unbounded: %v", i, rej)
			m := capacityNamed.FindStringSubmatch(rej.Error())
			require.NotNil(t, m, "request %d: %q names no capacity", i, rej.Error())
			l := band.FlowRequestCapacity
			if !strings.HasPrefix(m[1], "flow") {
				l = bounds[m[1]+" "+m[2]]
			}
			n, ok := l.Value()
			require.True(t, ok, "request %d: %q names an unbounded capacity", i, rej.Error())
			require.Equal(t, strconv.FormatInt(n, 10), m[3], "request %d: %q", i, rej.Error())
		}
	})
}

// TestHugeSizesKeepCountersSane: ByteSize and Cost are whatever a
// client declares. In a band without byte or cost capacity, two requests of
// the largest int64 size used to wrap the band's counters around to
// negative values, so CapacitySnapshot reported -2 bytes queued. Contract
// (capacity.Snapshot, "each counter is exact"; "every sum of client-supplied
// numbers saturates or is refused; it never wraps"): each counts as
// MaxRequestBytes and MaxRequestCost, so both queue and every counter holds
// their exact sum. (A total that would pass the range of int64 all the same
// is refused: TestCounterRangeIsRefused.)
func TestHugeSizesKeepCountersSane(t *testing.T) {
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0}},
		Gate:  gate.MaxInFlight(0),
	})
	huge := flowcontrol.Request{Key: key("a", 0), ByteSize: math.MaxInt64, Cost: math.MaxInt64}
	x := submit(context.Background(), fc, huge)
	y := submit(context.Background(), fc, flowcontrol.Request{Key: key("b", 0), ByteSize: math.MaxInt64, Cost: math.MaxInt64})
	require.False(t, x.finished(), "the first was refused: %v", x.err)
	require.False(t, y.finished(), "the second was refused: %v", y.err)
	s, err := fc.CapacitySnapshot(0)
	require.NoError(t, err)
	require.Equal(t, int64(2), s.QueuedRequests)
	require.Equal(t, 2*flowcontrol.MaxRequestBytes, s.QueuedBytes)
	require.Equal(t, 2*flowcontrol.MaxRequestCost, s.QueuedCost)
	fs, err := fc.FlowSnapshot(0, "a")
	require.NoError(t, err)
	require.Equal(t, flowcontrol.MaxRequestBytes, fs.QueuedBytes)
	require.Equal(t, flowcontrol.MaxRequestCost, fs.QueuedCost)
	fc.Close()
	require.True(t, errors.Is(x.err, flowcontrol.ErrRejectedShuttingDown))
	require.True(t, errors.Is(y.err, flowcontrol.ErrRejectedShuttingDown))
	s, err = fc.CapacitySnapshot(0)
	require.NoError(t, err)
	require.Zero(t, s.QueuedRequests+s.QueuedBytes+s.QueuedCost, "%v", s)
}

// TestCapacityRejections covers band and global limits on requests and bytes.
// None of these bands has dispatched anything, so there is no measured rate:
// Retry-After is the prior's.
func TestCapacityRejections(t *testing.T) {
	cases := []struct {
		name    string
		cfg     flowcontrol.Config
		fill    []int64 // byte sizes queued first, in band 0
		size    int64
		message string
	}{
		{"band-requests", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(2)}}},
			[]int64{1, 1}, 1, "band 0 request capacity 2 reached"},
		{"band-bytes", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, ByteCapacity: bounded(100)}}},
			[]int64{60, 30}, 11, "band 0 byte capacity 100 exceeded"},
		{"global-requests", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 1}}, RequestCapacity: bounded(2)},
			[]int64{1, 1}, 1, "global request capacity 2 reached"},
		{"global-bytes", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 1}}, ByteCapacity: bounded(50)},
			[]int64{20, 20}, 11, "global byte capacity 50 exceeded"},
		{"band-closed-by-zero-capacity", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(0)}}},
			nil, 1, "band 0 request capacity 0 reached"},
		{"request-larger-than-band-bytes", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, ByteCapacity: bounded(10)}}},
			nil, 11, "band 0 byte capacity 10 exceeded"},
		// A size near math.MaxInt64 (a client may declare such a
		// Content-Length) must not wrap the sum around and fit.
		{"band-bytes-huge-request", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0, ByteCapacity: bounded(100)}}},
			[]int64{10}, math.MaxInt64, "band 0 byte capacity 100 exceeded"},
		{"global-bytes-huge-request", flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}, {Priority: 1}}, ByteCapacity: bounded(50)},
			[]int64{10}, math.MaxInt64, "global byte capacity 50 exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tc.cfg.Gate = gate.MaxInFlight(0)
				tc.cfg.NoDisplacement = true // fair admission has its own tests
				rec := &recorder{}
				tc.cfg.Observer = rec.observe
				fc := mustNew(t, tc.cfg)
				for i, size := range tc.fill {
					start(t.Context(), fc, flowcontrol.Request{Key: key(fmt.Sprint(i), 0), ByteSize: size})
				}
				synctest.Wait()
				// The fill is in band 0; in the global cases the request
				// that overflows asks for band 1: the limit spans bands.
				p := 0
				if strings.HasPrefix(tc.name, "global") {
					p = 1
				}
				before, _ := fc.CapacitySnapshot(p)
				a, err := fc.EnqueueAndWait(t.Context(), flowcontrol.Request{Key: key("over", p), ByteSize: tc.size})
				var rej *flowcontrol.RejectionError
				if a != nil || !errors.As(err, &rej) {
					t.Fatalf("admission %v error %v, want a rejection", a, err)
				}
				if rej.Outcome != flowcontrol.OutcomeRejectedSaturated || !errors.Is(err, flowcontrol.ErrRejectedSaturated) {
					t.Fatalf("outcome %v error %v", rej.Outcome, err)
				}
				if rej.Outcome.String() != "rejected-saturated" || rej.Outcome.HTTPStatus() != http.StatusTooManyRequests {
					t.Fatalf("reason %q status %d", rej.Outcome.String(), rej.Outcome.HTTPStatus())
				}
				if !strings.Contains(err.Error(), tc.message) {
					t.Fatalf("error %q lacks %q", err, tc.message)
				}
				// No rate is measured and nothing is in flight: the prior
				// promises one place per PriorServiceTime; a request that
				// can never fit gets none.
				want := flowcontrol.PriorServiceTime
				if errors.Is(err, flowcontrol.ErrTooLarge) || tc.name == "band-closed-by-zero-capacity" {
					want = 0
				}
				if rej.RetryAfter != want {
					t.Fatalf("RetryAfter %v without a measured rate, want %v", rej.RetryAfter, want)
				}
				if after, _ := fc.CapacitySnapshot(p); after != before {
					t.Fatalf("a rejected request changed the band: %v → %v", before, after)
				}
				if rec.count(flowcontrol.OutcomeRejectedSaturated) != 1 {
					t.Fatalf("events %v", rec.events)
				}
			})
		})
	}
}

func TestCapacityAllowsExactlyTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: bounded(3), ByteCapacity: bounded(30)}},
			Gate:  gate.MaxInFlight(0),
		})
		for i := range 3 {
			start(t.Context(), fc, flowcontrol.Request{Key: key(fmt.Sprint(i), 0), ByteSize: 10})
		}
		synctest.Wait()
		if s, _ := fc.CapacitySnapshot(0); s.QueuedRequests != 3 || s.QueuedBytes != 30 {
			t.Fatalf("bands at their bounds should hold 3 requests / 30 bytes: %v", s)
		}
	})
}

func TestNegativeByteSizeCountsAsZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := mustNew(t, flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, ByteCapacity: bounded(0)}},
			Gate:  gate.MaxInFlight(0),
		})
		w := start(t.Context(), fc, flowcontrol.Request{Key: key("unknown-length", 0), ByteSize: -1})
		synctest.Wait()
		if w.finished() {
			t.Fatalf("a size of -1 should count as 0 and fit: %v", w.err)
		}
		if s, _ := fc.CapacitySnapshot(0); s.QueuedBytes != 0 || s.QueuedRequests != 1 {
			t.Fatalf("snapshot %v", s)
		}
	})
}
