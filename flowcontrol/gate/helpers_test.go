package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/internal/clocktest"
)

// newClock returns the module's manual test clock at a fixed instant.
func newClock() *clocktest.Clock {
	return clocktest.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
}

// must returns what build makes of cfg, or fails the test with build's
// error.
func must[C, G any](t testing.TB, build func(C) (G, error), cfg C) G {
	t.Helper()
	g, err := build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// call is one Submit whose outcome is recorded.
type call struct {
	done bool
	adm  *flowcontrol.Admission
	err  error
}

func submit(fc *flowcontrol.FlowController, id string, priority int) *call {
	c := &call{}
	fc.Submit(context.Background(), flowcontrol.Request{Key: flowcontrol.FlowKey{ID: id, Priority: priority}},
		func(a *flowcontrol.Admission, err error) { c.done, c.adm, c.err = true, a, err })
	return c
}

func (c *call) outcome(t *testing.T) flowcontrol.Outcome {
	t.Helper()
	if !c.done {
		t.Fatal("call has no outcome yet")
	}
	if c.err == nil {
		return flowcontrol.OutcomeDispatched
	}
	var rej *flowcontrol.RejectionError
	if !errors.As(c.err, &rej) {
		t.Fatalf("error %v is not a RejectionError", c.err)
	}
	return rej.Outcome
}

func mustNew(t *testing.T, cfg flowcontrol.Config) *flowcontrol.FlowController {
	t.Helper()
	fc, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	return fc
}
