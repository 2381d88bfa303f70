package dheap

import (
	"cmp"
	"runtime"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func lessInt(a, b int) bool { return a < b }

// coarsePrefix is monotone in the key but maps four keys to each prefix, so
// the tests see both prefix decisions and ties that fall through to less.
func coarsePrefix(k int) uint64 { return uint64(k+1<<20) >> 2 }

// newTestHeap draws whether the heap under test keeps prefixes.
func newTestHeap(t *rapid.T) *Heap[int, int] {
	if rapid.Bool().Draw(t, "prefixed") {
		return NewPrefixed[int, int](lessInt, coarsePrefix)
	}
	return New[int, int](lessInt)
}

// modelEntry is one element of the reference model: a plain slice that is
// searched linearly.
type modelEntry struct {
	key, id int
	handle  Handle[int, int]
}

// heapMachine checks a Heap against a slice model. Keys come from a small
// range so that ties are common; values are unique ids.
type heapMachine struct {
	h       *Heap[int, int]
	foreign *Heap[int, int] // another heap, whose handles must be refused
	model   []modelEntry
	stale   []Handle[int, int]
	nextID  int
}

func (m *heapMachine) drawKey(t *rapid.T) int { return rapid.IntRange(-5, 20).Draw(t, "key") }

func (m *heapMachine) minKey() int {
	return slices.MinFunc(m.model, func(a, b modelEntry) int { return cmp.Compare(a.key, b.key) }).key
}

// take removes the model entry with id and remembers its handle as stale.
func (m *heapMachine) take(t *rapid.T, id int) modelEntry {
	i := slices.IndexFunc(m.model, func(e modelEntry) bool { return e.id == id })
	if i < 0 {
		t.Fatalf("heap returned id %d, which the model does not hold", id)
	}
	e := m.model[i]
	m.model = slices.Delete(m.model, i, i+1)
	m.stale = append(m.stale, e.handle)
	return e
}

func (m *heapMachine) push(t *rapid.T) {
	k := m.drawKey(t)
	id := m.nextID
	m.nextID++
	m.model = append(m.model, modelEntry{key: k, id: id, handle: m.h.Push(k, id)})
}

func (m *heapMachine) pop(t *rapid.T) {
	k, id, ok := m.h.Pop()
	if len(m.model) == 0 {
		if ok {
			t.Fatalf("Pop on empty heap returned (%d, %d)", k, id)
		}
		return
	}
	want := m.minKey()
	e := m.take(t, id)
	if !ok || k != want || e.key != k {
		t.Fatalf("Pop = (%d, %d, %v); want key %d (model key of id: %d)", k, id, ok, want, e.key)
	}
}

func (m *heapMachine) remove(t *rapid.T) {
	if len(m.model) == 0 {
		t.Skip("empty")
	}
	e := rapid.SampledFrom(m.model).Draw(t, "victim")
	k, id, ok := m.h.Remove(e.handle)
	if !ok || k != e.key || id != e.id {
		t.Fatalf("Remove(handle of %d) = (%d, %d, %v); want (%d, %d, true)", e.id, k, id, ok, e.key, e.id)
	}
	m.take(t, id)
}

func (m *heapMachine) fix(t *rapid.T) {
	if len(m.model) == 0 {
		t.Skip("empty")
	}
	i := rapid.IntRange(0, len(m.model)-1).Draw(t, "index")
	k := m.drawKey(t)
	if !m.h.Fix(m.model[i].handle, k) {
		t.Fatalf("Fix(handle of %d) refused a live handle", m.model[i].id)
	}
	m.model[i].key = k
}

func (m *heapMachine) badHandle(t *rapid.T) {
	var handles []Handle[int, int]
	handles = append(handles, Handle[int, int]{}, m.foreign.Push(0, -1))
	handles = append(handles, m.stale...)
	hd := rapid.SampledFrom(handles).Draw(t, "bad handle")
	if _, _, ok := m.h.Get(hd); ok {
		t.Fatalf("Get accepted a stale or foreign handle")
	}
	if _, _, ok := m.h.Remove(hd); ok {
		t.Fatalf("Remove accepted a stale or foreign handle")
	}
	if m.h.Fix(hd, -100) {
		t.Fatalf("Fix accepted a stale or foreign handle")
	}
}

func (m *heapMachine) build(t *rapid.T) {
	keys := rapid.SliceOfN(rapid.IntRange(-5, 20), 0, 40).Draw(t, "build keys")
	entries := make([]Entry[int, int], len(keys))
	for _, e := range m.model {
		m.stale = append(m.stale, e.handle)
	}
	m.model = m.model[:0]
	for i, k := range keys {
		entries[i] = Entry[int, int]{Key: k, Value: m.nextID + i}
	}
	handles := m.h.Build(entries, nil)
	for i, k := range keys {
		m.model = append(m.model, modelEntry{key: k, id: m.nextID + i, handle: handles[i]})
	}
	m.nextID += len(keys)
}

func (m *heapMachine) removeFunc(t *rapid.T) {
	mod := rapid.IntRange(1, 4).Draw(t, "remove ids divisible by")
	var got []int
	n := m.h.RemoveFunc(func(_ int, id int) bool {
		if id%mod != 0 {
			return false
		}
		got = append(got, id)
		return true
	})
	if n != len(got) {
		t.Fatalf("RemoveFunc returned %d, removed %d", n, len(got))
	}
	var want []int
	for _, e := range m.model {
		if e.id%mod == 0 {
			want = append(want, e.id)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("RemoveFunc removed %v; want %v", got, want)
	}
	for _, id := range got {
		m.take(t, id)
	}
}

func (m *heapMachine) clear(t *rapid.T) {
	m.h.Clear()
	for _, e := range m.model {
		m.stale = append(m.stale, e.handle)
	}
	m.model = m.model[:0]
}

func (m *heapMachine) check(t *rapid.T) {
	if err := m.h.Verify(); err != nil {
		t.Fatal(err)
	}
	if m.h.Len() != len(m.model) {
		t.Fatalf("Len = %d; model holds %d", m.h.Len(), len(m.model))
	}
	k, _, ok := m.h.Peek()
	if ok != (len(m.model) > 0) || ok && k != m.minKey() {
		t.Fatalf("Peek = (%d, %v); model min %v", k, ok, m.model)
	}
	for _, e := range m.model {
		k, id, ok := m.h.Get(e.handle)
		if !ok || k != e.key || id != e.id {
			t.Fatalf("Get(handle of %d) = (%d, %d, %v); want (%d, %d, true)", e.id, k, id, ok, e.key, e.id)
		}
	}
}

func TestHeapAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &heapMachine{h: newTestHeap(t), foreign: newTestHeap(t)}
		t.Repeat(map[string]func(*rapid.T){
			"push":       m.push,
			"push2":      m.push, // pushes twice as often, so heaps grow deep
			"pop":        m.pop,
			"remove":     m.remove,
			"fix":        m.fix,
			"badHandle":  m.badHandle,
			"build":      m.build,
			"removeFunc": m.removeFunc,
			"clear":      m.clear,
			"":           m.check,
		})
	})
}

// TestDrainIsSorted pushes random keys and checks that popping everything
// yields them in sorted order.
func TestDrainIsSorted(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOf(rapid.IntRange(-1<<19, 1<<19)).Draw(t, "keys")
		h := NewPrefixed[int, struct{}](lessInt, coarsePrefix)
		for _, k := range keys {
			h.Push(k, struct{}{})
		}
		if err := h.Verify(); err != nil {
			t.Fatal(err)
		}
		got := make([]int, 0, len(keys))
		for h.Len() > 0 {
			k, _, _ := h.Pop()
			got = append(got, k)
		}
		slices.Sort(keys)
		if !slices.Equal(got, keys) {
			t.Fatalf("drained %v; want %v", got, keys)
		}
	})
}

func TestStaleHandleAfterSlotReuse(t *testing.T) {
	h := New[int, string](lessInt)
	a := h.Push(1, "a")
	if _, v, _ := h.Pop(); v != "a" {
		t.Fatalf("Pop = %q; want a", v)
	}
	b := h.Push(2, "b") // reuses a's slot
	if b.slot != a.slot {
		t.Fatalf("slot not reused; test does not exercise reuse")
	}
	if _, _, ok := h.Remove(a); ok {
		t.Fatal("stale handle removed the element that reused its slot")
	}
	if _, v, ok := h.Get(b); !ok || v != "b" {
		t.Fatalf("Get(b) = %q, %v; want b, true", v, ok)
	}
}

func TestExhaustedSlotIsRetired(t *testing.T) {
	h := New[int, int](lessInt)
	hd := h.Push(1, 1)
	h.gen[hd.slot] = ^uint32(0) // as if the slot had been used 2^32-1 times
	hd.gen = ^uint32(0)
	if _, _, ok := h.Remove(hd); !ok {
		t.Fatal("Remove refused a live handle")
	}
	next := h.Push(2, 2)
	if next.slot == hd.slot {
		t.Fatal("a slot whose generation would wrap was reused")
	}
	if err := h.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestNoAllocsInSteadyState(t *testing.T) {
	h := NewPrefixed[int, int](lessInt, coarsePrefix)
	for i := range 1000 {
		h.Push(i*7919%1000, i)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		hd := h.Push(i*31%1000, i)
		h.Fix(hd, i%1000)
		h.Pop()
		i++
	})
	if allocs != 0 {
		t.Fatalf("steady-state Push/Fix/Pop allocates %v per run; want 0", allocs)
	}
}

func TestNewNilLessPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New(nil) did not panic")
		}
	}()
	New[int, int](nil)
}

// TestLeftElementsAreReleased checks that the heap drops its references to
// elements that left it, so their memory can be reclaimed.
func TestLeftElementsAreReleased(t *testing.T) {
	type payload struct{ _ [64]byte }
	h := New[int, *payload](lessInt)
	released := make(chan int, 4)
	handles := make([]Handle[int, *payload], 4)
	for i := range handles {
		p := &payload{}
		runtime.AddCleanup(p, func(i int) { released <- i }, i)
		handles[i] = h.Push(i, p)
	}
	h.Pop()                                                      // element 0
	h.Remove(handles[1])                                         // element 1
	h.RemoveFunc(func(k int, _ *payload) bool { return k == 2 }) // element 2
	h.Push(10, nil)                                              // keeps the heap non-empty and reuses a slot
	got := map[int]bool{}
	for range 100 {
		runtime.GC()
		for len(released) > 0 {
			got[<-released] = true
		}
		if len(got) == 3 {
			break
		}
		runtime.Gosched()
	}
	if !got[0] || !got[1] || !got[2] || got[3] {
		t.Fatalf("released %v; want exactly 0, 1 and 2", got)
	}
	runtime.KeepAlive(h)
}
