package ordering

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// customPolicy stands for a user policy with a capability of its own choice.
type customPolicy struct {
	name string
	req  Capability
}

func (p customPolicy) TypeName() string               { return p.name }
func (p customPolicy) RequiredCapability() Capability { return p.req }
func (p customPolicy) Key(*Item) Key                  { return Key{} }

func TestQueuePairing(t *testing.T) {
	cases := []struct {
		kind    QueueKind
		policy  Policy
		wantErr error // nil: the pairing works
	}{
		{QueueFIFO, FCFS(), nil},
		{QueueHeap, FCFS(), nil},
		{QueueHeap, EDF(), nil},
		{QueueHeap, SLODeadline(), nil},
		{QueueFIFO, EDF(), ErrIncompatibleQueue},
		{QueueFIFO, SLODeadline(), ErrIncompatibleQueue},
		{QueueFIFO, customPolicy{"custom-priority", CapabilityPriorityConfigurable}, ErrIncompatibleQueue},
		{QueueHeap, customPolicy{"custom-fifo", CapabilityFIFO}, nil},
		{QueueFIFO, customPolicy{"custom-unknown", Capability(9)}, ErrIncompatibleQueue},
		{QueueHeap, customPolicy{"custom-unknown", Capability(9)}, ErrIncompatibleQueue},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%s", tc.kind, tc.policy.TypeName()), func(t *testing.T) {
			q, err := NewQueue(tc.kind, tc.policy)
			if checked := CheckQueue(tc.kind, tc.policy); fmt.Sprint(checked) != fmt.Sprint(err) {
				t.Fatalf("CheckQueue = %v; NewQueue failed with %v", checked, err)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("NewQueue: %v", err)
				}
				if q.Kind() != tc.kind || q.Policy() != tc.policy {
					t.Fatalf("queue reports kind %q, policy %v", q.Kind(), q.Policy())
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("NewQueue error %v; want one wrapping %v", err, tc.wantErr)
			}
			for _, name := range []string{string(tc.kind), tc.policy.TypeName()} {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("error %q does not name %q", err, name)
				}
			}
		})
	}
	if _, err := NewQueue("list", FCFS()); err == nil || !strings.Contains(err.Error(), `"list"`) {
		t.Errorf("unknown kind: error %v", err)
	}
	if err := CheckQueue("list", FCFS()); err == nil || !strings.Contains(err.Error(), `"list"`) {
		t.Errorf("unknown kind: CheckQueue error %v", err)
	}
	if _, err := NewQueue(QueueHeap, nil); err == nil {
		t.Error("nil policy: no error")
	}
	if err := CheckQueue(QueueHeap, nil); err == nil {
		t.Error("nil policy: CheckQueue gave no error")
	}
	if q, err := NewQueue(QueueFIFO, FCFS()); err != nil || q.Kind() != QueueFIFO {
		t.Errorf("NewQueue(fifo) = %v, %v", q, err)
	}
	if q, err := NewQueue(QueueHeap, SLODeadline()); err != nil || q.Kind() != QueueHeap {
		t.Errorf("NewQueue(heap) = %v, %v", q, err)
	}
	if _, err := NewQueue(QueueFIFO, EDF()); !errors.Is(err, ErrIncompatibleQueue) {
		t.Errorf("NewQueue(fifo, EDF) error %v", err)
	}
}

// TestQueueKindCapability checks each kind's capability against the queue
// it builds: a FIFO queue keeps arrival order whatever the keys, a heap
// queue the keys' order.
func TestQueueKindCapability(t *testing.T) {
	for kind, want := range map[QueueKind]Capability{
		QueueFIFO: CapabilityFIFO,
		QueueHeap: CapabilityPriorityConfigurable,
		"list":    0,
		"":        0,
	} {
		if got := kind.Capability(); got != want {
			t.Errorf("QueueKind(%q).Capability() = %v; want %v", kind, got, want)
		}
	}
	// Two items whose keys say the second leaves first.
	late := &Item{EnqueueTime: baseTime, TTL: time.Hour}
	early := &Item{EnqueueTime: baseTime.Add(time.Millisecond), TTL: time.Millisecond}
	for kind, wantHead := range map[QueueKind]*Item{QueueFIFO: late, QueueHeap: early} {
		q, err := NewQueue(kind, customEDF{})
		if err != nil {
			t.Fatal(err)
		}
		q.Add(late)
		q.Add(early)
		if got := q.PopHead(); got != wantHead {
			t.Errorf("%s queue (capability %v) let the wrong item lead", kind, kind.Capability())
		}
		q.Drain()
	}
}

// customEDF is EDF claiming only the FIFO capability, so that both queues
// accept it and show which order they keep.
type customEDF struct{}

func (customEDF) TypeName() string               { return "custom-edf" }
func (customEDF) RequiredCapability() Capability { return CapabilityFIFO }
func (customEDF) Key(it *Item) Key               { return EDF().Key(it) }

func TestDefaultQueueKind(t *testing.T) {
	for p, want := range map[Policy]QueueKind{FCFS(): QueueFIFO, EDF(): QueueHeap, SLODeadline(): QueueHeap} {
		if got := DefaultQueueKind(p); got != want {
			t.Errorf("DefaultQueueKind(%s) = %q; want %q", p.TypeName(), got, want)
		}
	}
}

// queueCases lists every allowed pairing of a built-in policy and queue.
type queueCase struct {
	kind QueueKind
	pc   policyCase
}

func queueCases() []queueCase {
	var out []queueCase
	for _, pc := range policyCases {
		for _, kind := range []QueueKind{QueueFIFO, QueueHeap} {
			if _, err := NewQueue(kind, pc.policy); err == nil {
				out = append(out, queueCase{kind, pc})
			}
		}
	}
	return out
}

func (qc queueCase) name() string { return fmt.Sprintf("%s/%s", qc.pc.policy.TypeName(), qc.kind) }

// genItems draws items for a queue. For the FIFO queue, whose order is the
// order of Add, the enqueue times do not decrease, as they would not when
// the caller stamps them at Add.
func genItems(t *rapid.T, kind QueueKind, n int) []*Item {
	items := make([]*Item, n)
	for i := range items {
		items[i] = genItem(t, i)
	}
	if kind == QueueFIFO {
		times := make([]time.Time, n)
		for i, it := range items {
			times[i] = it.EnqueueTime
		}
		slices.SortFunc(times, time.Time.Compare)
		for i, it := range items {
			it.EnqueueTime = times[i]
		}
	}
	return items
}

func ids(items []*Item) []int {
	out := make([]int, len(items))
	for i, it := range items {
		out[i] = specOf(it).id
	}
	return out
}

// TestQueuePopsStableSortOrder: adding items and popping them all yields
// exactly a stable sort of the items by the policy's reference order.
func TestQueuePopsStableSortOrder(t *testing.T) {
	for _, qc := range queueCases() {
		t.Run(qc.name(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				items := genItems(t, qc.kind, rapid.IntRange(0, 40).Draw(t, "n"))
				q, _ := NewQueue(qc.kind, qc.pc.policy)
				for _, it := range items {
					q.Add(it)
				}
				want := slices.Clone(items)
				slices.SortStableFunc(want, qc.pc.ref)
				var got []*Item
				if rapid.Bool().Draw(t, "drain") {
					got = q.Drain()
				} else {
					for it := q.PopHead(); it != nil; it = q.PopHead() {
						got = append(got, it)
					}
				}
				if !slices.Equal(ids(got), ids(want)) {
					t.Fatalf("popped %v; stable sort gives %v", ids(got), ids(want))
				}
				if q.Len() != 0 || q.ByteSize() != 0 || q.Peek() != nil {
					t.Fatalf("emptied queue: Len %d, ByteSize %d, Peek %v", q.Len(), q.ByteSize(), q.Peek())
				}
			})
		})
	}
}

// queueMachine checks a queue against a model: the queued items in arrival
// order. The next item is the first of them for the FIFO queue and the first
// minimum by the reference order for the heap queue.
type queueMachine struct {
	qc     queueCase
	q      Queue
	other  Queue // items in it must be refused by q
	model  []*Item
	out    []*Item // items that left; they may be added again
	nextID int
	clock  time.Time // for FIFO, enqueue times do not decrease
}

func (m *queueMachine) head() *Item {
	if len(m.model) == 0 {
		return nil
	}
	if m.qc.kind == QueueFIFO {
		return m.model[0]
	}
	best := m.model[0]
	for _, it := range m.model[1:] {
		if m.qc.pc.ref(it, best) < 0 {
			best = it
		}
	}
	return best
}

func (m *queueMachine) drop(it *Item) {
	i := slices.Index(m.model, it)
	m.model = slices.Delete(m.model, i, i+1)
	m.out = append(m.out, it)
}

func (m *queueMachine) add(t *rapid.T) {
	var it *Item
	if len(m.out) > 0 && rapid.Bool().Draw(t, "re-add") {
		i := rapid.IntRange(0, len(m.out)-1).Draw(t, "re-added")
		it = m.out[i]
		m.out = slices.Delete(m.out, i, i+1)
	} else {
		it = genItem(t, m.nextID)
		m.nextID++
	}
	if m.qc.kind == QueueFIFO {
		if it.EnqueueTime.Before(m.clock) {
			it.EnqueueTime = m.clock
		}
		m.clock = it.EnqueueTime
	}
	if rapid.Bool().Draw(t, "keyed") {
		// The owner derived the key before taking its lock.
		m.q.AddKeyed(it, m.q.Policy().Key(it))
	} else {
		m.q.Add(it)
	}
	m.model = append(m.model, it)
}

func (m *queueMachine) popHead(t *rapid.T) {
	want := m.head()
	got := m.q.PopHead()
	if got != want {
		t.Fatalf("PopHead = %v; want %v", got, want)
	}
	if got != nil {
		m.drop(got)
	}
}

func (m *queueMachine) remove(t *rapid.T) {
	if len(m.model) == 0 {
		t.Skip("empty")
	}
	it := rapid.SampledFrom(m.model).Draw(t, "victim")
	if !m.q.Remove(it) {
		t.Fatal("Remove refused a queued item")
	}
	if it.Queued() {
		t.Fatal("removed item still reports Queued")
	}
	m.drop(it)
}

func (m *queueMachine) removeForeign(t *rapid.T) {
	candidates := []*Item{nil, {}}
	candidates = append(candidates, m.out...)
	foreign := &Item{EnqueueTime: m.clock}
	m.other.Add(foreign)
	candidates = append(candidates, foreign)
	it := rapid.SampledFrom(candidates).Draw(t, "foreign")
	if m.q.Remove(it) {
		t.Fatal("Remove accepted an item that is not in the queue")
	}
	if it == foreign && (!it.Queued() || !m.other.Remove(it)) {
		t.Fatal("Remove through the wrong queue disturbed the item")
	}
}

func (m *queueMachine) drain(t *rapid.T) {
	want := slices.Clone(m.model)
	if m.qc.kind == QueueHeap {
		slices.SortStableFunc(want, m.qc.pc.ref)
	}
	got := m.q.Drain()
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("Drain = %v; want %v", ids(got), ids(want))
	}
	for _, it := range got {
		m.drop(it)
	}
}

func (m *queueMachine) addTwicePanics(t *rapid.T) {
	if len(m.model) == 0 {
		t.Skip("empty")
	}
	it := rapid.SampledFrom(m.model).Draw(t, "queued item")
	target := rapid.SampledFrom([]Queue{m.q, m.other}).Draw(t, "target")
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "ordering: ") {
			t.Fatalf("Add of a queued item: recovered %v; want an ordering: panic", r)
		}
	}()
	target.Add(it)
}

func (m *queueMachine) check(t *rapid.T) {
	if m.q.Len() != len(m.model) {
		t.Fatalf("Len = %d; model %d", m.q.Len(), len(m.model))
	}
	var bytes int64
	for _, it := range m.model {
		bytes += it.ByteSize
		if !it.Queued() {
			t.Fatalf("queued item %d reports not Queued", specOf(it).id)
		}
	}
	if m.q.ByteSize() != bytes {
		t.Fatalf("ByteSize = %d; model %d", m.q.ByteSize(), bytes)
	}
	if got, want := m.q.Peek(), m.head(); got != want {
		t.Fatalf("Peek = %v; want %v", got, want)
	}
	if hq, ok := m.q.(*heapQueue); ok {
		if err := hq.heap.Verify(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQueueAgainstModel(t *testing.T) {
	for _, qc := range queueCases() {
		t.Run(qc.name(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				q, _ := NewQueue(qc.kind, qc.pc.policy)
				other, _ := NewQueue(qc.kind, qc.pc.policy)
				m := &queueMachine{qc: qc, q: q, other: other, clock: baseTime}
				t.Repeat(map[string]func(*rapid.T){
					"add":            m.add,
					"add2":           m.add,
					"popHead":        m.popHead,
					"remove":         m.remove,
					"removeForeign":  m.removeForeign,
					"drain":          m.drain,
					"addTwicePanics": m.addTwicePanics,
					"":               m.check,
				})
			})
		})
	}
}

func TestRemovalDebitsBookedBytes(t *testing.T) {
	for _, kind := range []QueueKind{QueueFIFO, QueueHeap} {
		q, _ := NewQueue(kind, FCFS())
		it := &Item{ByteSize: 100}
		q.Add(it)
		it.ByteSize = 7 // misuse: changed while queued
		if !q.Remove(it) || q.ByteSize() != 0 {
			t.Errorf("%s: ByteSize after removal = %d; want 0", kind, q.ByteSize())
		}
	}
}

func TestAddNilPanics(t *testing.T) {
	for _, kind := range []QueueKind{QueueFIFO, QueueHeap} {
		q, _ := NewQueue(kind, FCFS())
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "ordering: ") {
					t.Errorf("%s: Add(nil) recovered %v", kind, r)
				}
			}()
			q.Add(nil)
		}()
	}
}

func TestQueueSteadyStateDoesNotAllocate(t *testing.T) {
	for _, qc := range queueCases() {
		t.Run(qc.name(), func(t *testing.T) {
			q, _ := NewQueue(qc.kind, qc.pc.policy)
			items := make([]*Item, 200)
			for i := range items {
				items[i] = &Item{
					ReceivedTime: baseTime.Add(time.Duration(i) * time.Millisecond),
					EnqueueTime:  baseTime.Add(time.Duration(i) * time.Millisecond),
					TTL:          time.Second,
					Header:       http.Header{"X-Llm-D-Slo-Ttft-Ms": {fmt.Sprint(i % 7 * 100)}},
				}
				q.Add(items[i])
			}
			i := 0
			allocs := testing.AllocsPerRun(1000, func() {
				it := q.PopHead()
				q.Add(it)
				if i%3 == 0 {
					q.Remove(items[i%len(items)])
					q.Add(items[i%len(items)])
				}
				i++
			})
			if allocs != 0 {
				t.Fatalf("Add/PopHead/Remove allocate %v times per run", allocs)
			}
		})
	}
}
