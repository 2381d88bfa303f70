package flowcontrol

import (
	"testing"
	"unsafe"
)

// TestHotFieldsShareALine guards the layout that keeps a band of many flows
// fast (BenchmarkFairness at flows=10000): what a dispatch or an enqueue
// reads of a waiter it does not move, and what a dispatch reads of a flow,
// each lie within one cache line.
//
// Go allocates an object in the smallest size class that holds it, at a
// multiple of the class size from a page boundary. Every class from 256 to
// 512 bytes is a multiple of 32, so a waiter too big for the class below
// 256 (240 bytes) and at most 512 starts on a 32-byte boundary, and its
// first 32 bytes never straddle two lines; a Flow of at most 128 bytes
// takes the 128-byte class and starts on a line.
func TestHotFieldsShareALine(t *testing.T) {
	var w waiter
	if size := unsafe.Sizeof(w); size <= 240 || size > 512 {
		t.Errorf("waiter is %d bytes: check that its size class still starts it on 32 bytes", size)
	}
	// The arrival links, the cost and the band arrival: all a dispatch in
	// a FIFO band reads of the head it uncovers, and an enqueue of the tail.
	for name, end := range map[string]uintptr{
		"links": unsafe.Offsetof(w.links) + unsafe.Sizeof(w.links),
		"cost":  unsafe.Offsetof(w.cost) + unsafe.Sizeof(w.cost),
		"seq":   unsafe.Offsetof(w.seq) + unsafe.Sizeof(w.seq),
	} {
		if end > 32 {
			t.Errorf("waiter.%s ends at byte %d, past the first 32", name, end)
		}
	}
	// A Flow is the controller's record and the built-in schedulers'
	// schedState: a field added to either must fit beside the other.
	var f Flow
	if size := unsafe.Sizeof(f); size > 128 {
		t.Errorf("Flow is %d bytes (schedState %d), past the 128-byte size class", size, unsafe.Sizeof(f.sched))
	}
	// What a dispatch reads of a flow: its list, counts, queue and the
	// ring's next.
	if end := unsafe.Offsetof(f.sched) + unsafe.Offsetof(f.sched.next) + unsafe.Sizeof(f.sched.next); end > 64 {
		t.Errorf("a flow's hot fields end at byte %d, past its first cache line", end)
	}
}

// TestWaiterSize pins the memory a queued request holds: a waiter is
// allocated in the smallest size class that fits it (…, 256, 288, 320, 352,
// 384, 416, …), so a field that pushes it past 320 bytes costs a queued
// request 32 bytes or more, and BenchmarkQueuedMemory's B/queued for
// mode=submit goes past its 320. (The waiter is 256 bytes today, its
// ordering.Item, which only a heap band needs, apart: see itemPool.)
func TestWaiterSize(t *testing.T) {
	if size := unsafe.Sizeof(waiter{}); size > 320 {
		t.Errorf("waiter is %d bytes, past the 320-byte size class", size)
	}
}

// TestAdmissionSlabsFitTheirSizeClass guards the bytes an immediate
// admission costs (BenchmarkEnqueueAndWait's B/op): a slab of Admissions,
// with the 8-byte header Go puts before an object of more than 512 bytes
// that holds pointers, fills the 2,048-byte size class without passing it
// (32 Admissions of 64 bytes took the 2,304-byte class: 72 B each).
func TestAdmissionSlabsFitTheirSizeClass(t *testing.T) {
	const header, class = 8, 2048
	for name, size := range map[string]uintptr{
		"slab":  unsafe.Sizeof([admissionsPerSlab]Admission{}),
		"batch": unsafe.Sizeof(admissionBatch{}),
	} {
		if size+header > class {
			t.Errorf("an admission %s is %d bytes: past the %d-byte size class", name, size, class)
		}
		if spare := class - header - size; spare >= unsafe.Sizeof(Admission{}) {
			t.Errorf("an admission %s leaves %d bytes of its size class unused: room for one more", name, spare)
		}
	}
}
