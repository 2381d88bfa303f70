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

// controller returns the controller bound, or nil.
func (b *binding) controller() Controller {
	if p := b.p.Load(); p != nil {
		return *p
	}
	return nil
}

// nudge nudges the controller bound, if any.
func (b *binding) nudge() {
	if c := b.controller(); c != nil {
		c.Nudge()
	}
}
