package headroom_test

import (
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/headroom"
)

func TestStrip(t *testing.T) {
	h := http.Header{
		"X-Llm-D-Flow-Queue-Duration-Ms": {"12"},
		"x-llm-d-flow-queue-duration-ms": {"13", "14"},
		"X-A":                            {"a"},
		"x-a":                            {"a"},
		"X-Model":                        {"m1"},
		"X-A-B":                          {"kept: longer name"},
	}
	headroom.Strip(h, "X-LLM-D-FLOW-QUEUE-DURATION-MS", "x-a")
	want := http.Header{"X-Model": {"m1"}, "X-A-B": {"kept: longer name"}}
	if len(h) != len(want) || !slices.Equal(h["X-Model"], want["X-Model"]) || !slices.Equal(h["X-A-B"], want["X-A-B"]) {
		t.Fatalf("after Strip: %q, want %q", h, want)
	}

	headroom.Strip(h) // no names: nothing changes
	if len(h) != 2 {
		t.Fatalf("Strip with no names changed h: %q", h)
	}
	headroom.Strip(nil, headroom.HeaderName) // must not panic
}

func TestStampNilHeader(t *testing.T) {
	headroom.Stamp(nil, bandsOf(bounded(0, 1, 0)), headroom.Admitted(0)) // must not panic
}

func TestStampAllocatesOnlyTheValue(t *testing.T) {
	// The largest value a Snapshot can give, far beyond strconv's cache of
	// small numbers.
	bands := bandsOf(capacity.Snapshot{RequestCapacity: capacity.Bounded(math.MaxInt64)})
	h := http.Header{"Content-Type": {"text/event-stream"}}
	// Each call removes the previous call's value, as it would a backend's.
	allocs := testing.AllocsPerRun(100, func() {
		headroom.Stamp(h, bands, headroom.Admitted(0))
	})
	if allocs > 1 {
		t.Fatalf("Stamp allocates %v times per call, want at most 1", allocs)
	}
	if got := h.Get(headroom.HeaderName); got != strconv.FormatInt(math.MaxInt64, 10) {
		t.Fatalf("value = %q", got)
	}
}

// TestStampedValuesStayIntact guards the single-allocation value: each
// stamped value must keep its digits through later stamps and collections.
func TestStampedValuesStayIntact(t *testing.T) {
	var bands capacity.Bands
	headers := make([]http.Header, 200)
	for i := range headers {
		bands.Set(bounded(0, int64(i)*1_000_003, 0))
		headers[i] = http.Header{}
		headroom.Stamp(headers[i], &bands, headroom.Admitted(0))
	}
	runtime.GC()
	for i, h := range headers {
		if got, want := h[http.CanonicalHeaderKey(headroom.HeaderName)], strconv.Itoa(i*1_000_003); len(got) != 1 || got[0] != want {
			t.Fatalf("header %d = %q, want [%s]", i, got, want)
		}
	}
	// Appending to a stamped list must not write into shared memory.
	h := headers[7]
	h.Add(headroom.HeaderName, "extra")
	if got := headers[8].Get(headroom.HeaderName); got != strconv.Itoa(8*1_000_003) {
		t.Fatalf("appending to one stamped header changed another: %q", got)
	}
}

func TestMutationFor(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	m := headroom.MutationFor(bands, headroom.Admitted(0))
	want := []string{headroom.HeaderName, headroom.ProvisionalHeaderName}
	if !slices.Equal(m.Remove, want) || !m.Set || m.Value != "19" {
		t.Fatalf("MutationFor = %+v, want Remove %q, Set, Value 19", m, want)
	}
	m.Remove[0] = "changed by the caller"

	absent := headroom.MutationFor(bands, headroom.Band{})
	if !slices.Equal(absent.Remove, want) || absent.Set || absent.Value != "" {
		t.Fatalf("MutationFor(not admitted) = %+v, want Remove %q only", absent, want)
	}
}
