package headroom_test

import (
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

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

func TestStripTrailerForms(t *testing.T) {
	cases := []struct {
		name string
		h    http.Header
		want http.Header
	}{
		{"declaration: the name alone",
			http.Header{"Trailer": {"X-Llm-D-Flow-Band-Headroom-Requests"}},
			http.Header{}},
		{"declaration: a list, any case and spacing, other names kept",
			http.Header{"Trailer": {"X-Other,x-llm-d-flow-band-headroom-requests , X-LLM-D-FLOW-BAND-HEADROOM,\tGrpc-Status"}},
			http.Header{"Trailer": {"X-Other, Grpc-Status"}}},
		{"declaration: several values, one emptied",
			http.Header{"Trailer": {"x-llm-d-flow-band-headroom", "X-Other"}},
			http.Header{"Trailer": {"X-Other"}}},
		{"declaration: a non-canonical Trailer key",
			http.Header{"trailer": {"x-llm-d-flow-band-headroom-requests, x-other"}},
			http.Header{"trailer": {"x-other"}}},
		{"declaration without an owned name is left as it is",
			http.Header{"Trailer": {"X-Other ,  Grpc-Status"}},
			http.Header{"Trailer": {"X-Other ,  Grpc-Status"}}},
		{"declaration of a longer name is kept",
			http.Header{"Trailer": {"X-Llm-D-Flow-Band-Headroom-Requests-Total"}},
			http.Header{"Trailer": {"X-Llm-D-Flow-Band-Headroom-Requests-Total"}}},
		{"TrailerPrefix keys, any case",
			http.Header{
				"Trailer:X-Llm-D-Flow-Band-Headroom-Requests": {"1"},
				"trailer:x-llm-d-flow-band-headroom":          {"2"},
				"TRAILER:X-LLM-D-FLOW-BAND-HEADROOM-REQUESTS": {"3"},
				"Trailer:X-Other":                             {"kept"},
				"Trailer:":                                    {"kept"},
				"Trailer":                                     {"X-Other"},
			},
			http.Header{"Trailer:X-Other": {"kept"}, "Trailer:": {"kept"}, "Trailer": {"X-Other"}}},
		{"a name containing the prefix is not a trailer",
			http.Header{"X-Trailer:X-Llm-D-Flow-Band-Headroom": {"kept"}},
			http.Header{"X-Trailer:X-Llm-D-Flow-Band-Headroom": {"kept"}}},
		{"header and declaration both go",
			http.Header{"X-Llm-D-Flow-Band-Headroom-Requests": {"1"}, "Trailer": {"X-Llm-D-Flow-Band-Headroom-Requests"}},
			http.Header{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			headroom.Strip(c.h, headroom.HeaderName, headroom.ProvisionalHeaderName)
			if diff := cmp.Diff(c.want, c.h); diff != "" {
				t.Errorf("after Strip (-want +got):\n%s", diff)
			}
		})
	}
	// Unicode folding would match these; header names are ASCII.
	kelvin := http.Header{"X-Foo-\u212a": {"kept"}}
	headroom.Strip(kelvin, "x-foo-kk")
	if len(kelvin) != 1 {
		t.Errorf("Strip matched a non-ASCII name: %q", kelvin)
	}
}

func TestStampEmitProvisional(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	h := http.Header{
		"X-Llm-D-Flow-Band-Headroom":          {"999"},
		"x-llm-d-flow-band-headroom-requests": {"998"},
		"X-Model":                             {"m1"},
	}
	headroom.Stamp(h, bands, headroom.Admitted(0), headroom.EmitProvisional)
	want := http.Header{
		"X-Llm-D-Flow-Band-Headroom":          {"19"},
		"X-Llm-D-Flow-Band-Headroom-Requests": {"19"},
		"X-Model":                             {"m1"},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Fatalf("Stamp with EmitProvisional (-want +got):\n%s", diff)
	}
	// The two lists are independent: appending to one leaves the other.
	h.Add(headroom.HeaderName, "extra")
	if got := h.Values(headroom.ProvisionalHeaderName); !slices.Equal(got, []string{"19"}) {
		t.Fatalf("appending to the final name changed the provisional one: %q", got)
	}

	// Nothing to advertise: both names absent, with or without the option.
	for _, opts := range [][]headroom.Option{nil, {headroom.EmitProvisional}, {0, headroom.EmitProvisional}} {
		h := http.Header{"X-Llm-D-Flow-Band-Headroom": {"999"}}
		headroom.Stamp(h, bands, headroom.Band{}, opts...)
		if len(h) != 0 {
			t.Errorf("not admitted, options %v: %q, want nothing", opts, h)
		}
	}
	// The zero Option changes nothing.
	h = http.Header{}
	headroom.Stamp(h, bands, headroom.Admitted(0), 0)
	if diff := cmp.Diff(http.Header{"X-Llm-D-Flow-Band-Headroom-Requests": {"19"}}, h); diff != "" {
		t.Fatalf("Stamp with the zero Option (-want +got):\n%s", diff)
	}
}

func TestStampBothNamesAllocatesOnce(t *testing.T) {
	bands := bandsOf(capacity.Snapshot{RequestCapacity: capacity.Bounded(math.MaxInt64)})
	h := http.Header{"Content-Type": {"text/event-stream"}}
	allocs := testing.AllocsPerRun(100, func() {
		headroom.Stamp(h, bands, headroom.Admitted(0), headroom.EmitProvisional)
	})
	if allocs > 1 {
		t.Fatalf("Stamp with EmitProvisional allocates %v times per call, want at most 1", allocs)
	}
}

func TestMutationForEmitProvisional(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	want := headroom.Mutation{
		Remove:         []string{headroom.HeaderName, headroom.ProvisionalHeaderName},
		Set:            true,
		SetProvisional: true,
		Value:          "19",
	}
	if diff := cmp.Diff(want, headroom.MutationFor(bands, headroom.Admitted(0), headroom.EmitProvisional)); diff != "" {
		t.Errorf("MutationFor with EmitProvisional (-want +got):\n%s", diff)
	}
	want = headroom.Mutation{Remove: []string{headroom.HeaderName, headroom.ProvisionalHeaderName}}
	if diff := cmp.Diff(want, headroom.MutationFor(bands, headroom.Band{}, headroom.EmitProvisional)); diff != "" {
		t.Errorf("MutationFor, not admitted (-want +got):\n%s", diff)
	}
}
