package extproc_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/examples/extproc/internal/procbench"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// The ext_proc adapter's cost per request, as Envoy's ext_proc filter
// drives it with envoy.yaml's processing mode (request and response headers
// sent, bodies not): one gRPC stream per HTTP request, on one client
// connection over an in-memory listener (bufconn), carrying request_headers
// (answered CONTINUE once admitted), response_headers without end_of_stream
// (answered with the headroom mutation) and the close that ends the
// response (procbench.Request). The controller has one band and a gate
// that never queues (MaxInFlight(100000)), so flow control is on and
// admission is immediate. mode=serial runs one request at a time;
// mode=parallel one on each P at once (b.RunParallel). cpu-ns/op is the
// process's CPU time per request.
//
// The baseline is BenchmarkNoopExtProc in the same run: the same client,
// messages and connection against procbench.Noop, a server that answers
// every message with a bare CONTINUE. The adapter's budget is 1.05 times
// its CPU per request.
//
//	go test -run '^$' -bench 'ExtProc' -benchmem -count 6 .
func BenchmarkExtProc(b *testing.B) {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(100000)}},
		Gate:  gate.MaxInFlight(100000),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer fc.Close()
	srv, err := extproc.NewServer(extproc.Config{Controller: fc})
	if err != nil {
		b.Fatal(err)
	}
	benchBufconn(b, srv, func(resp *extprocv3.ProcessingResponse) error {
		// The adapter stamps the headroom: 100000 places, none queued.
		if v, ok := procbench.SetRawValue(resp.GetResponseHeaders().GetResponse().GetHeaderMutation(), "x-llm-d-flow-band-headroom-requests"); !ok || string(v) != "100000" {
			return fmt.Errorf("headroom = %q, %v; want 100000", v, ok)
		}
		return nil
	})
}

// BenchmarkNoopExtProc is the baseline of BenchmarkExtProc: the same
// streams against procbench.Noop, an ext_proc server that answers every
// message with a bare CONTINUE and holds no state. What BenchmarkExtProc
// costs beyond it is the adapter's own: classification, admission, the
// headroom mutation and its larger messages.
func BenchmarkNoopExtProc(b *testing.B) {
	benchBufconn(b, procbench.Noop{}, func(resp *extprocv3.ProcessingResponse) error {
		if m := resp.GetResponseHeaders().GetResponse().GetHeaderMutation(); m != nil {
			return fmt.Errorf("no-op server answered response_headers with a mutation: %v", m)
		}
		return nil
	})
}

// benchBufconn serves srv on a bufconn listener and runs procbench.Bench
// against it.
func benchBufconn(b *testing.B, srv extprocv3.ExternalProcessorServer, check func(*extprocv3.ProcessingResponse) error) {
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = g.Serve(lis)
	}()
	defer func() {
		g.Stop()
		<-served
	}()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := extprocv3.NewExternalProcessorClient(conn)
	// One request first, so that the connection is up before timing starts.
	if err := procbench.Request(context.Background(), client, check); err != nil {
		b.Fatal(err)
	}
	procbench.Bench(b, client, check)
}
