package ordering

// Links are the two pointers by which a [List] threads one of its elements:
// Prev toward the front (the element added just before it), Next toward
// the back. An element that is in no list has both nil.
//
// While the element is in a list, the list owns its Links: read them to
// walk the list, never write them. Once the element has left (by PopFront
// or Remove) both are nil again, and its owner may use them as it likes
// until it adds the element to a list again, for instance to chain
// elements it has taken out.
type Links[T any] struct {
	Prev, Next *T
}

// List is a first-in, first-out list threaded through its elements: each
// element of type T holds the [Links] the list keeps in it, so that
// queueing and unqueueing allocate nothing, and an element is its own
// handle for removal. Every operation is O(1). The zero List is empty and
// ready to use. The FIFO [Queue] keeps its items in one, and a caller that
// keeps its own element type can embed one the same way.
//
// An element is in at most one List at a time (it has one Links), and the
// caller keeps that true. Each method that changes the list takes links,
// which returns an element's Links; pass the same function to every call
// on one list. A plain function or method that returns the address of a
// field, such as
//
//	func itemLinks(it *Item) *Links[Item] { return &it.links }
//
// is inlined with the method, so the call costs nothing.
//
// A List is not safe for concurrent use: its owner serializes every call.
type List[T any] struct {
	front, back *T
}

// Front returns the element added longest ago, the one PopFront would
// take, or nil when the list is empty.
func (l *List[T]) Front() *T { return l.front }

// Back returns the element added last, or nil when the list is empty. Walk
// the list from it toward the front through each element's Links.Prev.
func (l *List[T]) Back() *T { return l.back }

// PushBack adds e at the back. e must be in no list.
func (l *List[T]) PushBack(e *T, links func(*T) *Links[T]) {
	el := links(e)
	el.Prev, el.Next = l.back, nil
	if l.back == nil {
		l.front = e
	} else {
		links(l.back).Next = e
	}
	l.back = e
}

// PopFront removes and returns the front element, or returns nil when the
// list is empty.
func (l *List[T]) PopFront(links func(*T) *Links[T]) *T {
	e := l.front
	if e == nil {
		return nil
	}
	el := links(e)
	if l.front = el.Next; l.front == nil {
		l.back = nil
	} else {
		links(l.front).Prev = nil
	}
	el.Next = nil
	return e
}

// Remove takes e, which must be in l, out of it.
func (l *List[T]) Remove(e *T, links func(*T) *Links[T]) {
	el := links(e)
	prev, next := el.Prev, el.Next
	*el = Links[T]{}
	if prev == nil {
		l.front = next
	} else {
		links(prev).Next = next
	}
	if next == nil {
		l.back = prev
	} else {
		links(next).Prev = prev
	}
}
