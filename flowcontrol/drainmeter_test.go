package flowcontrol_test

import (
	"math"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
)

// A DrainMeter counts busy time only: four dispatches in the first busy
// second measure 4/s, a minute of idleness changes nothing, and the next
// busy second with one dispatch moves the average by 1-exp(-1/5) of the
// way to 1/s. A clock that steps back adds no busy time.
func TestDrainMeter(t *testing.T) {
	var m flowcontrol.DrainMeter
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	if r, ok := m.Rate(t0); r != 0 || ok {
		t.Fatalf("zero meter: %v, %v; want 0, false", r, ok)
	}

	m.Busy(t0)
	for i := 1; i <= 3; i++ {
		m.Dispatched(at(time.Duration(i) * 250 * time.Millisecond))
	}
	if r, ok := m.Rate(at(999 * time.Millisecond)); ok {
		t.Fatalf("under a second of busy time: %v, measured; want no rate yet", r)
	}
	m.Dispatched(at(time.Second)) // the window closes with its fourth dispatch
	m.Idle(at(time.Second))
	if r, ok := m.Rate(at(time.Minute)); r != 4 || !ok {
		t.Fatalf("after a busy second of 4 dispatches and a minute idle: %v, %v; want 4, true", r, ok)
	}

	m.Busy(at(time.Minute))
	m.Dispatched(at(time.Minute + time.Second))
	want := 4 + (1-4)*-math.Expm1(-1.0/5)
	if r, _ := m.Rate(at(time.Minute + time.Second)); math.Abs(r-want) > 1e-12 {
		t.Fatalf("second window: %v, want %v", r, want)
	}

	// Idle half a second before the open window began: no busy time, not
	// half a second less, so the next busy second closes a window (with
	// no dispatch in it) on time.
	m.Idle(at(time.Minute + 500*time.Millisecond))
	m.Busy(at(2 * time.Minute))
	if r, _ := m.Rate(at(2*time.Minute + 999*time.Millisecond)); math.Abs(r-want) > 1e-12 {
		t.Fatalf("after a step back and 999ms busy: %v, want %v unchanged", r, want)
	}
	want += (0 - want) * -math.Expm1(-1.0/5)
	if r, _ := m.Rate(at(2*time.Minute + time.Second)); math.Abs(r-want) > 1e-12 {
		t.Fatalf("after a step back and a busy second: %v, want %v", r, want)
	}
}
