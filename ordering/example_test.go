package ordering_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluicegate/sluice/ordering"
)

// Three requests arrive a millisecond apart; two carry a time-to-first-token
// objective. FCFS serves them in arrival order; slo-deadline serves the
// earliest deadline first and the request without an objective last.
func Example() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	requests := []struct {
		name string
		slo  string // "" for no header
	}{
		{"batch", ""},
		{"chat", "200"},
		{"agent", "50"},
	}
	for _, p := range []ordering.Policy{ordering.FCFS(), ordering.SLODeadline()} {
		q, err := ordering.NewQueue(ordering.DefaultQueueKind(p), p)
		if err != nil {
			panic(err)
		}
		for i, r := range requests {
			at := start.Add(time.Duration(i) * time.Millisecond)
			h := http.Header{}
			if r.slo != "" {
				h.Set(ordering.SLOTTFTHeader, r.slo)
			}
			q.Add(&ordering.Item{ReceivedTime: at, EnqueueTime: at, Header: h, Value: r.name})
		}
		fmt.Printf("%-30s", p.TypeName()+":")
		for _, it := range q.Drain() {
			fmt.Print(" ", it.Value)
		}
		fmt.Println()
	}
	// Output:
	// fcfs-ordering-policy:          batch chat agent
	// slo-deadline-ordering-policy:  agent chat batch
}

// smallestFirst is a user-defined policy: the smallest request leaves first,
// equal sizes in enqueue order.
type smallestFirst struct{}

func (smallestFirst) TypeName() string { return "smallest-bytes-first" }

// RequiredCapability asks for a keyed queue: the order is not arrival order.
func (smallestFirst) RequiredCapability() ordering.Capability {
	return ordering.CapabilityPriorityConfigurable
}

// Key is computed once per Add. Class stays 0; Primary carries the size and
// Secondary the enqueue time, both encoded so that word order is their
// natural order.
func (smallestFirst) Key(it *ordering.Item) ordering.Key {
	return ordering.Key{
		Primary:   ordering.Int64Ordinal(it.ByteSize),
		Secondary: ordering.TimeOrdinal(it.EnqueueTime),
	}
}

func Example_customPolicy() {
	q, err := ordering.NewQueue(ordering.QueueHeap, smallestFirst{})
	if err != nil {
		panic(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, size := range []int64{4096, 512, 2048, 512} {
		q.Add(&ordering.Item{EnqueueTime: start.Add(time.Duration(i)), ByteSize: size, Value: i})
	}
	fmt.Println("queued bytes:", q.ByteSize())
	for it := q.PopHead(); it != nil; it = q.PopHead() {
		fmt.Printf("request %d (%d bytes)\n", it.Value, it.ByteSize)
	}
	_, err = ordering.NewQueue(ordering.QueueFIFO, smallestFirst{})
	fmt.Println(err)
	// Output:
	// queued bytes: 7168
	// request 1 (512 bytes)
	// request 3 (512 bytes)
	// request 2 (2048 bytes)
	// request 0 (4096 bytes)
	// ordering: incompatible queue: policy "smallest-bytes-first" requires capability PriorityConfigurable, which the "fifo" queue (capability FIFO) lacks
}

func ExamplePolicyByName() {
	p, err := ordering.PolicyByName("slo-deadline-ordering-policy")
	fmt.Println(p.TypeName(), p.RequiredCapability(), ordering.DefaultQueueKind(p), err)
	_, err = ordering.PolicyByName("lifo")
	fmt.Println(err)
	// Output:
	// slo-deadline-ordering-policy PriorityConfigurable heap <nil>
	// ordering: unknown policy type "lifo" (known: edf-ordering-policy, fcfs-ordering-policy, slo-deadline-ordering-policy)
}

// Remove takes the item itself as the handle, for example when its caller
// gives up waiting.
func ExampleQueue_remove() {
	q, _ := ordering.NewQueue(ordering.QueueHeap, ordering.EDF())
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &ordering.Item{EnqueueTime: start, TTL: time.Second, ByteSize: 10, Value: "a"}
	b := &ordering.Item{EnqueueTime: start, TTL: time.Minute, ByteSize: 20, Value: "b"}
	q.Add(a)
	q.Add(b)
	fmt.Println(q.Remove(a), q.Remove(a), a.Queued(), q.Len(), q.ByteSize(), q.Peek().Value)
	// Output: true false false 1 20 b
}

// request is a caller's own element type: it holds the links of the list it
// waits in, so queueing it allocates nothing.
type request struct {
	name  string
	links ordering.Links[request]
}

func requestLinks(r *request) *ordering.Links[request] { return &r.links }

// A List keeps elements of the caller's type in arrival order; an element
// is its own handle for removal.
func ExampleList() {
	var waiting ordering.List[request]
	a, b, c := &request{name: "a"}, &request{name: "b"}, &request{name: "c"}
	waiting.PushBack(a, requestLinks)
	waiting.PushBack(b, requestLinks)
	waiting.PushBack(c, requestLinks)
	waiting.Remove(b, requestLinks) // b's client went away
	for r := waiting.PopFront(requestLinks); r != nil; r = waiting.PopFront(requestLinks) {
		fmt.Println(r.name)
	}
	// Output:
	// a
	// c
}
