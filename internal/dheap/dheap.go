// Package dheap is a generic 4-ary min-heap with handles for removing or
// re-keying any element.
//
// It is modelled on the runtime's timer heap rather than on container/heap.
// The heap array holds small fixed-size entries, each an ordering word
// beside a reference to its element, as the runtime keeps a timer's "when"
// beside the timer pointer; the Arity children of a node fill exactly one
// 64-byte cache line. Sifting moves a hole instead of swapping, the arity is
// the constant [Arity], and building from a slice is O(n). Nothing is boxed
// in an interface and, once the backing slices have grown, no operation
// allocates.
//
// The ordering word is a 64-bit prefix of the key (see [NewPrefixed]), an
// "abbreviated key": most comparisons are a single inline integer
// comparison, and the less function runs only when two prefixes are equal.
// Without a prefix every comparison is an indirect call of less, which the
// compiler cannot inline and which costs about as much as container/heap's
// interface calls; give a prefix where one exists.
//
// Each element's full key is stored beside its value, in a slot that does not
// move while the element is queued. A [Handle] names a slot; the heap keeps
// each slot's current index, so any element can be removed or re-keyed in
// O(log n).
//
// # Invariant
//
// With n = h.Len() and the elements stored at indices 0..n-1,
//
//	for every i in 1..n-1:  !less(key[i], key[(i-1)/Arity])
//
// that is, no element is smaller than its parent, so index 0 holds a minimum.
// The children of index i are Arity*i+1 .. Arity*i+Arity. The heap compares
// (prefix(key), key) lexicographically, which orders exactly like less
// because the prefix is monotone. Every live handle refers to exactly one
// index and every index to exactly one live handle.
//
// Equal keys leave in an unspecified order; a caller that needs a stable order
// puts a sequence number into the key.
package dheap

import "fmt"

// Arity is the number of children of each node. Four keeps the tree shallow
// (log4 n levels) while the children of one node, 16 bytes each, share one
// cache line; the runtime's timer heap chose four too.
const Arity = 4

// maxLen bounds the number of elements so that indices and slot numbers fit
// an int32.
const maxLen = 1<<31 - 1

// Heap is a min-heap of values ordered by keys of type K. Create one with
// [New] or [NewPrefixed]; the zero Heap has no ordering and must not be used.
// A Heap must not be copied after first use, and it is not safe for
// concurrent use: its owner serializes access.
type Heap[K, V any] struct {
	less   func(a, b K) bool
	prefix func(K) uint64 // nil: every prefix is 0, so comparisons call less

	// heap[entryPad+i] is the entry at index i; entryPad entries in front
	// align each family of children to a cache line.
	heap []entry

	// Per slot: the element, its index in the heap (-1 while the slot is
	// free), and its generation, which handles carry so that a handle from
	// an earlier use of the slot no longer matches.
	elems []elem[K, V]
	pos   []int32
	gen   []uint32
	free  []int32 // slot numbers free for reuse
}

// entry is one heap position: the element's key prefix beside its slot.
type entry struct {
	pre  uint64
	slot int32
}

// elem is an element's key beside its value.
type elem[K, V any] struct {
	key K
	val V
}

// entryPad is the number of unused entries before the root. The children of
// index i then sit at entryPad+Arity*i+1 = Arity*(i+1): one aligned block of
// 64 bytes, which never straddles two cache lines when the backing array is
// 64-byte aligned (as all large allocations are).
const entryPad = Arity - 1

// Handle names one element of one heap, as returned by [Heap.Push] or
// [Heap.Build]. It stays valid until that element leaves the heap (by Pop,
// Remove, RemoveFunc, Build or Clear); afterwards the heap reports it as
// unknown. A handle is never confused with an element of another heap. The
// zero Handle is valid in no heap.
type Handle[K, V any] struct {
	heap *Heap[K, V]
	slot int32
	gen  uint32
}

// Entry is a key and value pair, the input of [Heap.Build].
type Entry[K, V any] struct {
	Key   K
	Value V
}

// New returns an empty heap ordered by less, which must be a strict weak
// ordering: irreflexive, transitive, and with incomparability transitive.
// The smallest key by less leaves first. O(1).
func New[K, V any](less func(a, b K) bool) *Heap[K, V] {
	return NewPrefixed[K, V](less, nil)
}

// NewPrefixed returns an empty heap ordered by less that also stores
// prefix(key) for every element and compares those integers first. prefix is
// called once per Push, Fix or Build entry. It must be monotone:
//
//	less(a, b) implies prefix(a) <= prefix(b)
//
// so a smaller prefix decides and equal prefixes defer to less. The more
// often prefixes differ, the fewer calls to less; a constant prefix is correct
// but gains nothing. A nil prefix is the same as [New]. O(1).
func NewPrefixed[K, V any](less func(a, b K) bool, prefix func(K) uint64) *Heap[K, V] {
	if less == nil {
		panic("dheap: nil less function")
	}
	return &Heap[K, V]{less: less, prefix: prefix, heap: make([]entry, entryPad)}
}

// Len returns the number of elements. O(1).
func (h *Heap[K, V]) Len() int { return len(h.heap) - entryPad }

// Peek returns a minimum element without removing it; ok is false when the
// heap is empty. O(1).
func (h *Heap[K, V]) Peek() (key K, val V, ok bool) {
	if h.Len() == 0 {
		return key, val, false
	}
	e := &h.elems[h.heap[entryPad].slot]
	return e.key, e.val, true
}

// Push adds val with key and returns its handle. O(log n): at most one
// comparison per level. No allocation unless the backing slices must grow.
func (h *Heap[K, V]) Push(key K, val V) Handle[K, V] {
	n := h.Len()
	if n >= maxLen {
		panic("dheap: heap is full")
	}
	s := h.allocSlot()
	h.elems[s] = elem[K, V]{key, val}
	h.heap = append(h.heap, entry{})
	h.siftUp(n, entry{pre: h.prefixOf(&key), slot: s})
	return Handle[K, V]{heap: h, slot: s, gen: h.gen[s]}
}

// Pop removes and returns a minimum element; ok is false when the heap is
// empty. O(log n): Arity-1 comparisons per level on the way down, plus a few
// on the way back up.
func (h *Heap[K, V]) Pop() (key K, val V, ok bool) {
	if h.Len() == 0 {
		return key, val, false
	}
	s := h.heap[entryPad].slot
	e := h.elems[s]
	h.removeAt(0)
	return e.key, e.val, true
}

// Get returns the element named by handle; ok is false, and nothing else
// happens, if the handle is stale or belongs to another heap. O(1).
func (h *Heap[K, V]) Get(handle Handle[K, V]) (key K, val V, ok bool) {
	if _, ok := h.index(handle); !ok {
		return key, val, false
	}
	e := &h.elems[handle.slot]
	return e.key, e.val, true
}

// Remove removes the element named by handle and returns it. If the handle
// is stale or belongs to another heap, Remove reports ok == false and leaves
// the heap unchanged. O(log n).
func (h *Heap[K, V]) Remove(handle Handle[K, V]) (key K, val V, ok bool) {
	i, ok := h.index(handle)
	if !ok {
		return key, val, false
	}
	e := h.elems[handle.slot]
	h.removeAt(i)
	return e.key, e.val, true
}

// Fix replaces the key of the element named by handle and restores the heap
// order. If the handle is stale or belongs to another heap, Fix reports false
// and leaves the heap unchanged. O(log n).
func (h *Heap[K, V]) Fix(handle Handle[K, V], key K) bool {
	i, ok := h.index(handle)
	if !ok {
		return false
	}
	h.elems[handle.slot].key = key
	e := entry{pre: h.prefixOf(&key), slot: handle.slot}
	if i > 0 && h.before(e, h.heap[entryPad+(i-1)/Arity]) {
		h.siftUp(i, e)
	} else {
		h.siftDown(i, e)
	}
	return true
}

// Clear removes every element, invalidating all handles, and keeps the
// backing storage for reuse. O(n).
func (h *Heap[K, V]) Clear() {
	for _, e := range h.heap[entryPad:] {
		h.freeSlot(e.slot)
	}
	h.heap = h.heap[:entryPad]
}

// Build replaces the heap's contents with entries, invalidating all earlier
// handles, and appends the new elements' handles to dst in the order of
// entries. O(n) (bottom-up heapify), against O(n log n) for n pushes.
func (h *Heap[K, V]) Build(entries []Entry[K, V], dst []Handle[K, V]) []Handle[K, V] {
	if len(entries) > maxLen {
		panic("dheap: too many entries")
	}
	h.Clear()
	for _, in := range entries {
		s := h.allocSlot()
		h.elems[s] = elem[K, V]{in.Key, in.Value}
		h.pos[s] = int32(h.Len())
		h.heap = append(h.heap, entry{pre: h.prefixOf(&in.Key), slot: s})
		dst = append(dst, Handle[K, V]{heap: h, slot: s, gen: h.gen[s]})
	}
	h.heapify()
	return dst
}

// RemoveFunc removes every element for which del returns true and reports how
// many it removed. del is called exactly once per element, in no particular
// order, and must not use the heap. Removed elements' handles become stale.
// O(n): the survivors are compacted and re-heapified bottom-up, which beats
// k removals of O(log n) each once k log n exceeds n.
func (h *Heap[K, V]) RemoveFunc(del func(key K, val V) bool) int {
	hp := h.heap[entryPad:]
	kept := 0
	for _, e := range hp {
		el := &h.elems[e.slot]
		if del(el.key, el.val) {
			h.freeSlot(e.slot)
			continue
		}
		h.pos[e.slot] = int32(kept)
		hp[kept] = e
		kept++
	}
	removed := len(hp) - kept
	if removed == 0 {
		return 0
	}
	h.heap = h.heap[:entryPad+kept]
	h.heapify()
	return removed
}

// index resolves a handle to the element's current index.
func (h *Heap[K, V]) index(handle Handle[K, V]) (int, bool) {
	if handle.heap != h || handle.slot < 0 || int(handle.slot) >= len(h.pos) {
		return 0, false
	}
	i := h.pos[handle.slot]
	if i < 0 || h.gen[handle.slot] != handle.gen {
		return 0, false
	}
	return int(i), true
}

func (h *Heap[K, V]) prefixOf(key *K) uint64 {
	if h.prefix == nil {
		return 0
	}
	return h.prefix(*key)
}

// before reports whether entry a sorts before entry b.
func (h *Heap[K, V]) before(a, b entry) bool {
	if a.pre != b.pre {
		return a.pre < b.pre
	}
	return h.less(h.elems[a.slot].key, h.elems[b.slot].key)
}

// removeAt removes the element at index i and frees its slot. Like
// heapsort's bottom-up variant (Floyd), it first moves the hole at i all the
// way down along the smaller children, which costs Arity-1 comparisons per
// level instead of Arity, then drops the last entry into the hole and sifts
// it up; the last entry comes from the bottom level, so it rarely climbs far.
func (h *Heap[K, V]) removeAt(i int) {
	hp := h.heap[entryPad:]
	last := len(hp) - 1
	h.freeSlot(hp[i].slot)
	moved := hp[last]
	h.heap = h.heap[:entryPad+last]
	if i == last {
		return
	}
	for {
		c := i*Arity + 1
		if c >= last {
			break
		}
		m := h.minChild(c, min(c+Arity, last))
		hp[i] = hp[m]
		h.pos[hp[i].slot] = int32(i)
		i = m
	}
	h.siftUp(i, moved)
}

// minChild returns the index of a smallest entry in [c, end).
func (h *Heap[K, V]) minChild(c, end int) int {
	if end-c != Arity {
		return h.minChildSlow(c, end)
	}
	// A full family, in one cache line: pick the smallest prefix in a
	// branch-free tournament (the compiler turns these ifs into conditional
	// moves), then fall back to less only if another child shares it.
	f := h.heap[entryPad+c : entryPad+c+Arity : entryPad+c+Arity]
	m, mp := c, f[0].pre
	if f[1].pre < mp {
		m, mp = c+1, f[1].pre
	}
	m2, mp2 := c+2, f[2].pre
	if f[3].pre < mp2 {
		m2, mp2 = c+3, f[3].pre
	}
	if mp2 < mp {
		m, mp = m2, mp2
	}
	ties := 0
	for _, e := range f {
		if e.pre == mp {
			ties++
		}
	}
	if ties > 1 {
		return h.minChildSlow(c, end)
	}
	return m
}

// minChildSlow is minChild for a partial family or tied prefixes.
func (h *Heap[K, V]) minChildSlow(c, end int) int {
	hp := h.heap[entryPad:]
	m := c
	for j := c + 1; j < end; j++ {
		if h.before(hp[j], hp[m]) {
			m = j
		}
	}
	return m
}

// siftUp moves the hole at index i towards the root while e sorts before the
// hole's parent, then stores e in the hole.
func (h *Heap[K, V]) siftUp(i int, e entry) {
	hp := h.heap[entryPad:]
	for i > 0 {
		parent := (i - 1) / Arity
		if !h.before(e, hp[parent]) {
			break
		}
		hp[i] = hp[parent]
		h.pos[hp[i].slot] = int32(i)
		i = parent
	}
	hp[i] = e
	h.pos[e.slot] = int32(i)
}

// siftDown moves the hole at index i towards the leaves while its smallest
// child sorts before e, then stores e in the hole.
func (h *Heap[K, V]) siftDown(i int, e entry) {
	hp := h.heap[entryPad:]
	n := len(hp)
	for {
		c := i*Arity + 1
		if c >= n {
			break
		}
		m := h.minChild(c, min(c+Arity, n))
		if !h.before(hp[m], e) {
			break
		}
		hp[i] = hp[m]
		h.pos[hp[i].slot] = int32(i)
		i = m
	}
	hp[i] = e
	h.pos[e.slot] = int32(i)
}

// heapify establishes the invariant over arbitrary contents in O(n) by
// sifting down every internal node, from the last one to the root.
func (h *Heap[K, V]) heapify() {
	n := h.Len()
	for i := (n - 2) / Arity; n > 1 && i >= 0; i-- {
		h.siftDown(i, h.heap[entryPad+i])
	}
}

// allocSlot returns a free slot number, reusing one if possible.
func (h *Heap[K, V]) allocSlot() int32 {
	if k := len(h.free); k > 0 {
		s := h.free[k-1]
		h.free = h.free[:k-1]
		return s
	}
	h.elems = append(h.elems, elem[K, V]{})
	h.pos = append(h.pos, -1)
	h.gen = append(h.gen, 0)
	return int32(len(h.pos) - 1)
}

// freeSlot retires a slot's element and handle. A slot whose generation
// counter would wrap is never reused, so a stale handle can never match a
// later element.
func (h *Heap[K, V]) freeSlot(s int32) {
	h.elems[s] = elem[K, V]{} // drop references for the garbage collector
	h.pos[s] = -1
	if h.gen[s] == ^uint32(0) {
		return
	}
	h.gen[s]++
	h.free = append(h.free, s)
}

// Verify checks the invariant, the stored prefixes and the handle
// bookkeeping in O(n + slots), and describes the first violation it finds.
// It is a debugging aid: the tests of this package and of its users call it
// after every step.
func (h *Heap[K, V]) Verify() error {
	if len(h.heap) < entryPad {
		return fmt.Errorf("dheap: heap array shorter than its padding")
	}
	hp := h.heap[entryPad:]
	n := len(hp)
	if len(h.elems) != len(h.pos) || len(h.gen) != len(h.pos) {
		return fmt.Errorf("dheap: %d elements, %d positions, %d generations", len(h.elems), len(h.pos), len(h.gen))
	}
	for i, e := range hp {
		if e.slot < 0 || int(e.slot) >= len(h.pos) || h.pos[e.slot] != int32(i) {
			return fmt.Errorf("dheap: index %d names slot %d, which does not point back", i, e.slot)
		}
		if p := h.prefixOf(&h.elems[e.slot].key); e.pre != p {
			return fmt.Errorf("dheap: index %d stores prefix %d, its key has %d", i, e.pre, p)
		}
		if i == 0 {
			continue
		}
		parent := (i - 1) / Arity
		if h.less(h.elems[e.slot].key, h.elems[hp[parent].slot].key) {
			return fmt.Errorf("dheap: index %d is less than its parent %d", i, parent)
		}
		if e.pre < hp[parent].pre {
			return fmt.Errorf("dheap: index %d has a smaller prefix than its parent %d (prefix not monotone?)", i, parent)
		}
	}
	live := 0
	for _, i := range h.pos {
		if i >= 0 {
			live++
		}
	}
	if live != n {
		return fmt.Errorf("dheap: %d live slots for %d elements", live, n)
	}
	seen := make(map[int32]bool, len(h.free))
	for _, s := range h.free {
		if seen[s] || h.pos[s] >= 0 {
			return fmt.Errorf("dheap: free slot %d is live or listed twice", s)
		}
		seen[s] = true
	}
	return nil
}
