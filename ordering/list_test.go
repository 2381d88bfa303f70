package ordering

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// node is an element of a caller's own type, as a List holds one.
type node struct {
	id    int
	links Links[node]
}

func nodeLinks(n *node) *Links[node] { return &n.links }

// TestListAgainstModel runs a List against a slice of its elements in
// order: after every step, a walk from the front through Next and one from
// the back through Prev both give the slice, and every element that has
// left holds nil links.
func TestListAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l List[node]
		var model, out []*node
		nodes := 0
		t.Repeat(map[string]func(*rapid.T){
			"push": func(t *rapid.T) {
				var n *node
				if len(out) > 0 && rapid.Bool().Draw(t, "reuse") {
					i := rapid.IntRange(0, len(out)-1).Draw(t, "reused")
					n = out[i]
					out = slices.Delete(out, i, i+1)
				} else {
					n = &node{id: nodes}
					nodes++
				}
				l.PushBack(n, nodeLinks)
				model = append(model, n)
			},
			"popFront": func(t *rapid.T) {
				got := l.PopFront(nodeLinks)
				if len(model) == 0 {
					if got != nil {
						t.Fatalf("PopFront of an empty list = %d", got.id)
					}
					return
				}
				if got != model[0] {
					t.Fatalf("PopFront = %v; want %d", got, model[0].id)
				}
				model = model[1:]
				out = append(out, got)
			},
			"remove": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				i := rapid.IntRange(0, len(model)-1).Draw(t, "removed")
				n := model[i]
				l.Remove(n, nodeLinks)
				model = slices.Delete(model, i, i+1)
				out = append(out, n)
			},
			"": func(t *rapid.T) {
				var forward, backward []*node
				for n := l.Front(); n != nil; n = n.links.Next {
					forward = append(forward, n)
				}
				for n := l.Back(); n != nil; n = n.links.Prev {
					backward = append(backward, n)
				}
				slices.Reverse(backward)
				if !slices.Equal(forward, model) || !slices.Equal(backward, model) {
					t.Fatalf("walks give %v and %v; want %v", forward, backward, model)
				}
				for _, n := range out {
					if n.links != (Links[node]{}) {
						t.Fatalf("element %d left the list holding links %+v", n.id, n.links)
					}
				}
			},
		})
	})
}

func TestListDoesNotAllocate(t *testing.T) {
	var l List[node]
	nodes := make([]node, 8)
	allocs := testing.AllocsPerRun(100, func() {
		for i := range nodes {
			l.PushBack(&nodes[i], nodeLinks)
		}
		l.Remove(&nodes[3], nodeLinks)
		for l.PopFront(nodeLinks) != nil {
		}
	})
	if allocs != 0 {
		t.Errorf("List operations allocated %v times per run", allocs)
	}
}
