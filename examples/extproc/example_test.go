package extproc_test

import (
	"context"
	"fmt"
	"net"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/extproc"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/ordering"
)

// A router registers the Server on its gRPC server and points Envoy's
// ext_proc filter at it (see envoy.yaml).
func ExampleNewServer() {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{
			{Priority: 10, RequestCapacity: capacity.Bounded(100), Policy: ordering.SLODeadline()},
			{Priority: 0, RequestCapacity: capacity.Bounded(200)},
		},
		Gate: gate.MaxInFlight(64),
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()

	srv, err := extproc.NewServer(extproc.Config{
		Controller: fc,
		Classify:   flowhttp.HeaderClassifier{Objectives: map[string]int{"chat": 10}}.ClassifyHeader,
	})
	if err != nil {
		panic(err)
	}
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, srv)
	// go g.Serve(listener) ... g.GracefulStop()
	fmt.Println(g.GetServiceInfo()["envoy.service.ext_proc.v3.ExternalProcessor"].Methods[0].Name)
	// Output: Process
}

// One HTTP request as Envoy's ext_proc filter handles it: request headers
// (admission), then response headers (the backend's copy of the headroom
// header is replaced by the router's, read now).
func Example_stream() {
	fc, err := flowcontrol.New(flowcontrol.Config{
		Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(100)}},
	})
	if err != nil {
		panic(err)
	}
	defer fc.Close()
	srv, err := extproc.NewServer(extproc.Config{Controller: fc})
	if err != nil {
		panic(err)
	}
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, srv)
	go g.Serve(lis)
	defer g.Stop()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	stream, err := extprocv3.NewExternalProcessorClient(conn).Process(context.Background())
	if err != nil {
		panic(err)
	}
	headers := func(kv ...string) *corev3.HeaderMap {
		m := &corev3.HeaderMap{}
		for i := 0; i < len(kv); i += 2 {
			m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
		}
		return m
	}

	stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headers(":path", "/v1/completions", "x-llm-d-inference-fairness-id", "tenant-a")},
	}})
	resp, _ := stream.Recv()
	fmt.Println("request headers:", resp.GetRequestHeaders().GetResponse().GetStatus())

	stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "x-llm-d-flow-band-headroom-requests", "999")},
	}})
	resp, _ = stream.Recv()
	m := resp.GetResponseHeaders().GetResponse().GetHeaderMutation()
	fmt.Println("remove:", m.GetRemoveHeaders())
	for _, h := range m.GetSetHeaders() {
		if h.GetHeader().GetKey() == headroom.HeaderName {
			fmt.Printf("set: %s: %s\n", h.GetHeader().GetKey(), h.GetHeader().GetRawValue())
		}
	}
	stream.CloseSend()
	_, err = stream.Recv()
	fmt.Println("end of stream:", err)
	// Output:
	// request headers: CONTINUE
	// remove: [x-llm-d-flow-band-headroom-requests x-llm-d-flow-band-headroom x-llm-d-request-dropped-reason x-llm-d-flow-queue-duration-ms]
	// set: x-llm-d-flow-band-headroom-requests: 100
	// end of stream: EOF
}
