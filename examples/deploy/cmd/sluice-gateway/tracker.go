package main

import "sync"

// tracker counts the handlers running. Unlike a sync.WaitGroup it may
// gain a handler while wait waits: a connection closed by the end of the
// grace period may still start one.
type tracker struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0 while someone waits
}

func (t *tracker) add() {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
}

func (t *tracker) done() {
	t.mu.Lock()
	t.n--
	if t.n == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
	t.mu.Unlock()
}

// wait returns once no handler runs.
func (t *tracker) wait() { <-t.zero() }

// zero returns a channel that is closed once no handler runs (at once if
// none does).
func (t *tracker) zero() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return closedChan
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	return t.idle
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
