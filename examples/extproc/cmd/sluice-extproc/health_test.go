package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicegate/sluice/flowcontrol"
)

func TestListensOnLoopbackByDefault(t *testing.T) {
	opts, err := parseFlags(nil, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := net.SplitHostPort(opts.listen)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("default -listen %q: want a loopback address", opts.listen)
	}
}

func TestGRPCHealthServingUntilShutdown(t *testing.T) {
	fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, fc, options{}, func() time.Duration { return 0 }, func() time.Duration { return time.Minute }, lis, slog.New(slog.DiscardHandler))
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	for _, service := range []string{"", extprocv3.ExternalProcessor_ServiceDesc.ServiceName} {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("Check(%q): %v", service, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) = %v, want SERVING", service, resp.GetStatus())
		}
	}
	// Watch sees the server go NOT_SERVING as shutdown begins.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watch, err := health.Watch(watchCtx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := watch.Recv(); err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first Watch status %v, %v; want SERVING", first.GetStatus(), err)
	}
	cancel()
	next, err := watch.Recv()
	if err != nil || next.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after shutdown began: %v, %v; want NOT_SERVING", next.GetStatus(), err)
	}
	stopWatch() // the graceful stop waits for open streams
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
