package headroom_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/headroom"
)

var (
	sinkInt64 int64
	sinkBool  bool
)

// requestPairs vary the inputs so the compiler cannot fold the call away; they
// cover every branch of Requests.
var requestPairs = [8][2]int64{
	{100, 81}, {100, 100}, {100, 130}, {0, 0},
	{-5, 3}, {100, -1}, {1 << 62, 1}, {7, 3},
}

// BenchmarkRequests measures the pure function. Baseline:
// BenchmarkRequestsBaselineNaive, the one-line clamp that wraps at extremes.
func BenchmarkRequests(b *testing.B) {
	b.ReportAllocs()
	var sum int64
	for i := 0; b.Loop(); i++ {
		p := &requestPairs[i&7]
		sum += headroom.Requests(p[0], p[1])
	}
	sinkInt64 = sum
}

func BenchmarkRequestsBaselineNaive(b *testing.B) {
	b.ReportAllocs()
	var sum int64
	for i := 0; b.Loop(); i++ {
		p := &requestPairs[i&7]
		sum += min(max(p[0]-p[1], 0), max(p[0], 0))
	}
	sinkInt64 = sum
}

func benchBands() *capacity.Bands {
	var bands capacity.Bands
	for p := -2; p <= 8; p++ {
		bands.Set(capacity.Snapshot{Priority: p, QueuedRequests: 3, RequestCapacity: capacity.Bounded(1000)})
	}
	return &bands
}

// BenchmarkSample reads a band from the in-memory capacity.Bands through the
// Reader interface and computes its headroom. Baseline:
// BenchmarkSampleBaselineRead, the bare snapshot read.
func BenchmarkSample(b *testing.B) {
	var r capacity.Reader = benchBands()
	band := headroom.Admitted(5)
	b.ReportAllocs()
	for b.Loop() {
		sinkInt64, sinkBool = headroom.Sample(r, band)
	}
}

func BenchmarkSampleBaselineRead(b *testing.B) {
	var r capacity.Reader = benchBands()
	b.ReportAllocs()
	for b.Loop() {
		s, err := r.CapacitySnapshot(5)
		sinkInt64, sinkBool = s.QueuedRequests, err == nil
	}
}

// modelServerHeader is the header of a typical streamed completion, with a
// backend copy of the router's header under a non-canonical key.
func modelServerHeader() http.Header {
	return http.Header{
		"Content-Type":      {"text/event-stream"},
		"Date":              {"Mon, 01 Jan 2024 00:00:00 GMT"},
		"Server":            {"uvicorn"},
		"X-Request-Id":      {"5f0c6a8e-2b9d-4c1e-9a57-3d2b1f0e4c6a"},
		"Transfer-Encoding": {"chunked"},
	}
}

// BenchmarkStampHeader stamps a band's headroom (a three-digit value) into a
// model server's response header, first removing the backend's spoofed copy
// set under a lower-case key. Baseline: BenchmarkStampHeaderBaselineSet,
// http.Header.Del and Set, which miss non-canonical keys.
func BenchmarkStampHeader(b *testing.B) {
	r := benchBands()
	band := headroom.Admitted(5)
	h := modelServerHeader()
	spoof := []string{"999"}
	b.ReportAllocs()
	for b.Loop() {
		h[headroom.HeaderName] = spoof
		headroom.Stamp(h, r, band)
	}
	if h.Get(headroom.HeaderName) != "997" || len(h) != 6 {
		b.Fatalf("stamped header = %q", h)
	}
}

func BenchmarkStampHeaderBaselineSet(b *testing.B) {
	r := benchBands()
	h := modelServerHeader()
	key := http.CanonicalHeaderKey(headroom.HeaderName)
	b.ReportAllocs()
	for b.Loop() {
		s, _ := r.CapacitySnapshot(5)
		limit, _ := s.RequestCapacity.Value()
		h.Del(key)
		h.Set(key, strconv.FormatInt(limit-s.QueuedRequests, 10))
	}
}
