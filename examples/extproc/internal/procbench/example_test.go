package procbench_test

import (
	"context"
	"fmt"
	"net"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicegate/sluice/examples/extproc/internal/procbench"
)

// One request, as Envoy's ext_proc filter sends it, to the no-op server:
// every message is answered CONTINUE, with no header mutation.
func ExampleRequest() {
	lis := bufconn.Listen(1 << 16)
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, procbench.Noop{})
	go g.Serve(lis)
	defer g.Stop()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	err = procbench.Request(context.Background(), extprocv3.NewExternalProcessorClient(conn), func(resp *extprocv3.ProcessingResponse) error {
		_, set := procbench.SetRawValue(resp.GetResponseHeaders().GetResponse().GetHeaderMutation(), "x-llm-d-flow-band-headroom-requests")
		fmt.Println("headroom set:", set)
		return nil
	})
	fmt.Println("error:", err)
	// Output:
	// headroom set: false
	// error: <nil>
}
