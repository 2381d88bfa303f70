package gate

import "sync/atomic"

// binding records the one [Controller] a gate serves.
type binding struct{ p atomic.Pointer[Controller] }

// claim binds c, unless another controller is bound already; it reports
// whether c is the one bound.
func (b *binding) claim(c Controller) bool {
	if b.p.CompareAndSwap(nil, &c) {
		return true
	}
	return *b.p.Load() == c
}

// release unbinds c, if it is the controller bound.
func (b *binding) release(c Controller) {
	if p := b.p.Load(); p != nil && *p == c {
		b.p.CompareAndSwap(p, nil)
	}
}

// unbinder is a gate of this package that can undo its Bind: a composite
// whose later part refuses a controller undoes what its earlier parts
// bound, so that a controller that fails to start leaves its gate as it
// found it.
type unbinder interface {
	unbind(c Controller)
}

// unbind undoes g's Bind of c, when g can.
func unbind(g any, c Controller) {
	if u, ok := g.(unbinder); ok {
		u.unbind(c)
	}
}

// controller returns the controller bound, or nil.
func (b *binding) controller() Controller {
	if p := b.p.Load(); p != nil {
		return *p
	}
	return nil
}
