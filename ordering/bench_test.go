package ordering_test

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sluicegate/sluice/ordering"
)

// benchItems builds n realistic items: a dozen ordinary request headers, and
// for nine in ten an SLO between 50 ms and 10 s, as net/http would store
// them (canonical keys).
func benchItems(n int) []*ordering.Item {
	r := rand.New(rand.NewPCG(7, 11))
	items := make([]*ordering.Item, n)
	for i := range items {
		h := http.Header{
			"Accept":          {"application/json"},
			"Accept-Encoding": {"gzip"},
			"Authorization":   {"Bearer abcdefghijklmnopqrstuvwxyz"},
			"Content-Length":  {strconv.Itoa(1000 + r.IntN(50000))},
			"Content-Type":    {"application/json"},
			"User-Agent":      {"bench/1.0"},
			"X-Request-Id":    {strconv.FormatUint(r.Uint64(), 16)},
			"X-Forwarded-For": {"10.0.0.1"},
			"X-Gateway-Model": {"llama-3-70b"},
			"Traceparent":     {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		}
		if r.IntN(10) != 0 {
			h.Set(ordering.SLOTTFTHeader, strconv.Itoa(50+r.IntN(10000)))
		}
		ttl := time.Duration(0)
		if r.IntN(10) != 0 {
			ttl = time.Duration(1+r.IntN(60)) * time.Second
		}
		items[i] = &ordering.Item{Header: h, TTL: ttl, ByteSize: int64(1000 + r.IntN(50000))}
	}
	return items
}

// clock hands out strictly increasing receive and enqueue times, one
// microsecond apart, as a busy gateway would.
type clock struct{ now time.Time }

func (c *clock) stamp(it *ordering.Item) {
	c.now = c.now.Add(time.Microsecond)
	it.ReceivedTime = c.now
	it.EnqueueTime = c.now.Add(200 * time.Nanosecond)
}

// benchPair is a policy on a queue it may use, named for a benchmark.
type benchPair struct {
	name string
	kind ordering.QueueKind
	p    ordering.Policy
}

// benchPairs returns every policy on every queue it may use.
func benchPairs() []benchPair {
	return []benchPair{
		{"fcfs", ordering.QueueFIFO, ordering.FCFS()},
		{"fcfs", ordering.QueueHeap, ordering.FCFS()},
		{"edf", ordering.QueueHeap, ordering.EDF()},
		{"slo-deadline", ordering.QueueHeap, ordering.SLODeadline()},
	}
}

// BenchmarkQueue measures one Add and one PopHead on a queue holding n
// items, for each policy and each queue the policy may use. The item that
// leaves is stamped with new times and added again, so the queue stays at n.
// policy=slo-deadline-reparse/queue=containerheap is the baseline: the
// common implementation that keeps no key and re-derives each item's
// deadline from its headers inside every comparison of container/heap.
func BenchmarkQueue(b *testing.B) {
	pairs := benchPairs()
	for _, n := range []int{1000, 10000} {
		for _, pr := range pairs {
			b.Run(fmt.Sprintf("policy=%s/queue=%s/n=%d", pr.name, pr.kind, n), func(b *testing.B) {
				q, err := ordering.NewQueue(pr.kind, pr.p)
				if err != nil {
					b.Fatal(err)
				}
				c := clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
				for _, it := range benchItems(n) {
					c.stamp(it)
					q.Add(it)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					it := q.PopHead()
					c.stamp(it)
					q.Add(it)
				}
			})
		}
		b.Run(fmt.Sprintf("policy=slo-deadline-reparse/queue=containerheap/n=%d", n), func(b *testing.B) {
			c := clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			var h reparseHeap
			for _, it := range benchItems(n) {
				c.stamp(it)
				heap.Push(&h, it)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				it := heap.Pop(&h).(*ordering.Item)
				c.stamp(it)
				heap.Push(&h, it)
			}
		})
	}
}

// reparseHeap is the baseline: container/heap over items, whose Less reads
// and parses the SLO headers of both items at every comparison and gives a
// missing SLO a far-future deadline.
type reparseHeap []*ordering.Item

func (h reparseHeap) Len() int { return len(h) }

func (h reparseHeap) Less(i, j int) bool {
	di, dj := reparseDeadline(h[i]), reparseDeadline(h[j])
	if !di.Equal(dj) {
		return di.Before(dj)
	}
	return h[i].ReceivedTime.Before(h[j].ReceivedTime)
}

func (h reparseHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *reparseHeap) Push(x any)   { *h = append(*h, x.(*ordering.Item)) }

func (h *reparseHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

// farFuture stands in for "no deadline", as in the common implementation.
var farFuture = time.Unix(math.MaxInt64/2, 0)

// The header names are given in canonical form, so Header.Get does not
// allocate: the baseline pays for map lookups and parsing, not for garbage.
func reparseDeadline(it *ordering.Item) time.Time {
	v := it.Header.Get("X-Llm-D-Slo-Ttft-Ms")
	if v == "" {
		v = it.Header.Get("X-Slo-Ttft-Ms")
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return farFuture
	}
	return it.ReceivedTime.Add(time.Duration(ms) * time.Millisecond)
}
