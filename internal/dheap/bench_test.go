package dheap

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// benchKey is the key both implementations order by: a random priority, then
// a sequence number that makes the order total.
type benchKey struct {
	pri, seq uint64
}

func lessBenchKey(a, b benchKey) bool {
	if a.pri != b.pri {
		return a.pri < b.pri
	}
	return a.seq < b.seq
}

// benchPrefix is the priority: monotone in the key, and decisive unless two
// priorities are equal.
func benchPrefix(k benchKey) uint64 { return k.pri }

func compareBenchKey(a, b benchKey) int {
	switch {
	case lessBenchKey(a, b):
		return -1
	case lessBenchKey(b, a):
		return 1
	}
	return 0
}

// benchItem is the element: container/heap sees pointers to it (with the
// index its Swap maintains); dheap stores the same pointers as values beside
// a copy of the key.
type benchItem struct {
	key   benchKey
	index int
}

// itemHeap is the container/heap baseline: the usual priority queue of
// pointers, as in container/heap's own example.
type itemHeap []*benchItem

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return lessBenchKey(h[i].key, h[j].key) }
func (h itemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *itemHeap) Push(x any) {
	it := x.(*benchItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *itemHeap) Pop() any {
	old := *h
	n := len(old) - 1
	it := old[n]
	old[n] = nil
	*h = old[:n]
	it.index = -1
	return it
}

var benchSizes = []int{1000, 10000, 100000}

// keyStream returns a fixed pseudo-random sequence of numbers below 2^32,
// the same for every implementation and run.
func keyStream(seed uint64, n int) []uint64 {
	r := rand.New(rand.NewPCG(seed, 2))
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = r.Uint64() >> 32
	}
	return keys
}

// streamLen is the number of distinct priorities pushed in the steady state;
// a power of two so the index wraps with a mask.
const streamLen = 1 << 16

// BenchmarkPushPop measures one Push followed by one Pop on a heap holding n
// items: impl=dheap against impl=containerheap (container/heap over pointers
// to items holding the same keys). impl=dheap is built as the ordering
// package builds its heaps, with the priority as the key prefix;
// impl=dheap-lessonly shows the same heap without a prefix, where every
// comparison calls the less function.
//
// It follows the classic hold model, as deadlines and timers do: each pushed
// priority is the last popped one plus a random increment, so the heap's
// contents stay spread out.
func BenchmarkPushPop(b *testing.B) {
	stream := keyStream(1, streamLen)
	for _, n := range benchSizes {
		initial := keyStream(2, n)
		dheapImpl := func(newHeap func() *Heap[benchKey, *benchItem]) func(*testing.B) {
			return func(b *testing.B) {
				h := newHeap()
				for i, p := range initial {
					k := benchKey{pri: p, seq: uint64(i)}
					h.Push(k, &benchItem{key: k})
				}
				seq := uint64(n)
				spare := &benchItem{}
				var last uint64
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					k := benchKey{pri: last + stream[i&(streamLen-1)], seq: seq}
					seq++
					spare.key = k
					h.Push(k, spare)
					_, spare, _ = h.Pop()
					last = spare.key.pri
				}
			}
		}
		b.Run(fmt.Sprintf("impl=dheap/n=%d", n), dheapImpl(func() *Heap[benchKey, *benchItem] {
			return NewPrefixed[benchKey, *benchItem](lessBenchKey, benchPrefix)
		}))
		b.Run(fmt.Sprintf("impl=dheap-lessonly/n=%d", n), dheapImpl(func() *Heap[benchKey, *benchItem] {
			return New[benchKey, *benchItem](lessBenchKey)
		}))
		b.Run(fmt.Sprintf("impl=containerheap/n=%d", n), func(b *testing.B) {
			h := make(itemHeap, 0, n+1)
			for i, p := range initial {
				h = append(h, &benchItem{key: benchKey{pri: p, seq: uint64(i)}, index: i})
			}
			heap.Init(&h)
			seq := uint64(n)
			spare := &benchItem{}
			var last uint64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				spare.key = benchKey{pri: last + stream[i&(streamLen-1)], seq: seq}
				seq++
				heap.Push(&h, spare)
				spare = heap.Pop(&h).(*benchItem)
				last = spare.key.pri
			}
		})
	}
}

// BenchmarkDrain pushes n keys and pops them all (impl=dheap), against
// sorting the same keys with slices.SortFunc (impl=sort). ns/item is the
// time per key.
func BenchmarkDrain(b *testing.B) {
	const n = 100000
	pris := keyStream(3, n)
	keys := make([]benchKey, n)
	for i, p := range pris {
		keys[i] = benchKey{pri: p, seq: uint64(i)}
	}
	items := make([]*benchItem, n)
	for i := range items {
		items[i] = &benchItem{key: keys[i]}
	}
	reportPerItem := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/n, "ns/item")
	}
	b.Run(fmt.Sprintf("impl=dheap/n=%d", n), func(b *testing.B) {
		h := NewPrefixed[benchKey, *benchItem](lessBenchKey, benchPrefix)
		drain := func() {
			for j, k := range keys {
				h.Push(k, items[j])
			}
			for h.Len() > 0 {
				h.Pop()
			}
		}
		drain() // grow the backing slices outside the measurement
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			for j, k := range keys {
				h.Push(k, items[j])
			}
			for h.Len() > 0 {
				h.Pop()
			}
		}
		reportPerItem(b, start)
	})
	b.Run(fmt.Sprintf("impl=sort/n=%d", n), func(b *testing.B) {
		buf := make([]benchKey, n)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			copy(buf, keys)
			slices.SortFunc(buf, compareBenchKey)
		}
		reportPerItem(b, start)
	})
}
