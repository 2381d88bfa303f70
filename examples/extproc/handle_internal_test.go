package extproc

import (
	"context"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/extproc/internal/procbench"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// handleOne is the adapter's own work on one request as BenchmarkExtProc
// sends it, without gRPC: the request headers admitted, the response
// headers answered, the slot released, and both replies marshalled as
// Send marshals them.
func handleOne(s *Server, ctx context.Context, buf []byte) ([]byte, error) {
	var st stream
	defer st.release()
	for _, req := range []*extprocv3.ProcessingRequest{procbench.RequestHeaders, procbench.ResponseHeaders} {
		resp, _, err := s.handle(ctx, &st, req)
		if err != nil {
			return buf, err
		}
		if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], resp); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// benchServer is the server of BenchmarkExtProc: one band, a gate that
// never queues.
func benchServer(tb testing.TB) *Server {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(100000)}},
		Gate:  gate.MaxInFlight(100000),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(fc.Close)
	s, err := NewServer(Config{Controller: fc})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkHandle is what the adapter itself does per request, without
// the gRPC stream around it (BenchmarkExtProc measures that too): so that
// a change to the adapter's own cost shows above the noise of a shared
// machine.
//
//	go test -run '^$' -bench Handle -benchmem -count 6 .
func BenchmarkHandle(b *testing.B) {
	s := benchServer(b)
	ctx := context.Background()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = handleOne(s, ctx, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToHTTPHeader converts BenchmarkExtProc's request headers.
func BenchmarkToHTTPHeader(b *testing.B) {
	m := procbench.RequestHeaders.GetRequestHeaders().GetHeaders()
	b.ReportAllocs()
	for b.Loop() {
		toHTTPHeader(m)
	}
}

// The adapter's own allocations per admitted request, as BenchmarkHandle
// counts them: six for the http.Header that classifiers and ordering
// policies read (the map's four, the values' one string and one backing
// array) and one for the response-headers reply. Admission allocates
// nothing of its own (the controller pools its admissions).
func TestHandleAllocs(t *testing.T) {
	s := benchServer(t)
	ctx := context.Background()
	buf := make([]byte, 0, 1024)
	var err error
	got := testing.AllocsPerRun(200, func() {
		if buf, err = handleOne(s, ctx, buf); err != nil {
			t.Fatal(err)
		}
	})
	if got > 7 {
		t.Errorf("%v allocations per request, want at most 7", got)
	}
}
