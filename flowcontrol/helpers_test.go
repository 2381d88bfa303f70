package flowcontrol_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// call is one EnqueueAndWait running on its own goroutine.
type call struct {
	req  flowcontrol.Request
	done chan struct{}
	adm  *flowcontrol.Admission
	err  error
}

// start runs fc.EnqueueAndWait(ctx, req) on a new goroutine.
func start(ctx context.Context, fc *flowcontrol.FlowController, req flowcontrol.Request) *call {
	c := &call{req: req, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.adm, c.err = fc.EnqueueAndWait(ctx, req)
	}()
	return c
}

// startRecovering runs fc.EnqueueAndWait(ctx, req) on a new goroutine and
// returns a channel that receives what the call panicked with (nil if
// nothing).
func startRecovering(ctx context.Context, fc *flowcontrol.FlowController, req flowcontrol.Request) <-chan any {
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_, _ = fc.EnqueueAndWait(ctx, req)
	}()
	return panicked
}

// submit runs fc.Submit(ctx, req, ...) and returns the call its done
// function completes.
func submit(ctx context.Context, fc *flowcontrol.FlowController, req flowcontrol.Request) *call {
	c := &call{req: req, done: make(chan struct{})}
	fc.Submit(ctx, req, c.callback(nil))
	return c
}

// callback returns a Submit callback that records the outcome in c,
// exactly once, and then calls then, if not nil.
func (c *call) callback(then func(*flowcontrol.Admission, error)) func(*flowcontrol.Admission, error) {
	return func(adm *flowcontrol.Admission, err error) {
		select {
		case <-c.done:
			panic("flowcontrol: Submit's done called twice for " + c.req.Key.ID)
		default:
		}
		c.adm, c.err = adm, err
		close(c.done)
		if then != nil {
			then(adm, err)
		}
	}
}

// finished reports whether the call has returned.
func (c *call) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// outcome returns the outcome of a finished call.
func (c *call) outcome(t testing.TB) flowcontrol.Outcome {
	t.Helper()
	<-c.done
	if c.err == nil {
		if c.adm == nil {
			t.Fatalf("%v: nil admission and nil error", c.req.Key)
		}
		return flowcontrol.OutcomeDispatched
	}
	if c.adm != nil {
		t.Fatalf("%v: admission and error %v", c.req.Key, c.err)
	}
	var rej *flowcontrol.RejectionError
	if !errors.As(c.err, &rej) {
		t.Fatalf("%v: error %v (%T) is not a *RejectionError", c.req.Key, c.err, c.err)
	}
	return rej.Outcome
}

// rejection returns the *RejectionError of a finished call that failed.
func (c *call) rejection(t testing.TB) *flowcontrol.RejectionError {
	t.Helper()
	<-c.done
	var rej *flowcontrol.RejectionError
	if !errors.As(c.err, &rej) {
		t.Fatalf("%v: want a *RejectionError, got admission %v, error %v", c.req.Key, c.adm, c.err)
	}
	return rej
}

// mustNew builds a controller or fails the test; it is closed at cleanup.
func mustNew(t testing.TB, cfg flowcontrol.Config) *flowcontrol.FlowController {
	t.Helper()
	fc, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(fc.Close)
	return fc
}

// queued returns the number of requests queued in band priority.
func queued(t testing.TB, fc *flowcontrol.FlowController, priority int) int64 {
	t.Helper()
	s, err := fc.CapacitySnapshot(priority)
	if err != nil {
		t.Fatalf("CapacitySnapshot(%d): %v", priority, err)
	}
	return s.QueuedRequests
}

// hold takes one immediate admission, so that a MaxInFlight(1) gate is full.
func hold(t testing.TB, fc *flowcontrol.FlowController) *flowcontrol.Admission {
	t.Helper()
	a, err := fc.EnqueueAndWait(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "holder"}})
	if err != nil {
		t.Fatalf("holder: %v", err)
	}
	return a
}

// heldSlot returns a controller of one band, band 0, behind
// MaxInFlight(1), and the admission that holds its one slot.
func heldSlot(t testing.TB) (*flowcontrol.FlowController, *flowcontrol.Admission) {
	t.Helper()
	fc := mustNew(t, flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0}},
		Gate:  gate.MaxInFlight(1),
	})
	return fc, hold(t, fc)
}

func key(id string, priority int) flowcontrol.FlowKey {
	return flowcontrol.FlowKey{ID: id, Priority: priority}
}

func req(id string, priority int) flowcontrol.Request {
	return flowcontrol.Request{Key: key(id, priority)}
}

// heard keeps every event a callback hears, safe for concurrent use.
type heard[E any] struct {
	mu     sync.Mutex
	events []E
}

func (h *heard[E]) add(ev E) {
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.mu.Unlock()
}

// countIf returns how many of the events heard so far match.
func (h *heard[E]) countIf(match func(E) bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ev := range h.events {
		if match(ev) {
			n++
		}
	}
	return n
}

// recorder is an Observer that keeps every event.
type recorder struct{ heard[flowcontrol.Event] }

func (r *recorder) observe(ev flowcontrol.Event) { r.add(ev) }

func (r *recorder) count(o flowcontrol.Outcome) int {
	return r.countIf(func(ev flowcontrol.Event) bool { return ev.Outcome == o })
}

// switchGate is a Gate whose limit the test sets; it counts slots itself and
// may refuse chosen bands. Its methods run under the controller's lock; the
// test reads it through the controller (after synctest.Wait or with
// Nudge), so it needs no lock of its own beyond mu for the race detector.
type switchGate struct {
	mu       sync.Mutex
	limit    int
	inFlight int
	refuse   map[int]bool
	overrun  bool // a slot was granted above the limit
}

func (g *switchGate) TryAcquire(priority int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refuse[priority] || g.inFlight >= g.limit {
		return false
	}
	g.inFlight++
	if g.inFlight > g.limit {
		g.overrun = true
	}
	return true
}

func (g *switchGate) Release(int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
}

// inFlightNow returns the slots the gate has granted and not had back.
func (g *switchGate) inFlightNow() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight
}

func (g *switchGate) set(limit int, refuse ...int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limit = limit
	g.refuse = make(map[int]bool)
	for _, p := range refuse {
		g.refuse[p] = true
	}
}

func bounded(n int64) capacity.Limit { return capacity.Bounded(n) }

// dispatchOrder releases first and then, one Done at a time, each request
// that the previous Done let start; it returns the calls in dispatch order.
// It fails if a Done starts more than one request or none. Call it inside a
// synctest bubble, with every call queued.
func dispatchOrder(t *testing.T, first *flowcontrol.Admission, calls []*call) []*call {
	t.Helper()
	var order []*call
	seen := make(map[*call]bool)
	release := first
	for range calls {
		release.Done()
		synctest.Wait()
		var next *call
		for _, c := range calls {
			if seen[c] || !c.finished() {
				continue
			}
			if next != nil {
				t.Fatalf("one Done started both %s and %s", next.req.Key.ID, c.req.Key.ID)
			}
			next = c
		}
		if next == nil {
			t.Fatalf("a Done started nothing after %v", ids(order))
		}
		if next.adm == nil {
			t.Fatalf("%s: %v", next.req.Key.ID, next.err)
		}
		seen[next] = true
		order = append(order, next)
		release = next.adm
	}
	release.Done()
	return order
}

// requireOrder releases first and checks that calls then dispatch one by
// one in the order of the IDs want.
func requireOrder(t *testing.T, first *flowcontrol.Admission, calls []*call, want ...string) {
	t.Helper()
	if order := ids(dispatchOrder(t, first, calls)); !slices.Equal(order, want) {
		t.Fatalf("dispatch order %v, want %v", order, want)
	}
}

// ids returns the flow IDs of calls.
func ids(calls []*call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.req.Key.ID
	}
	return out
}
