package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
)

// The gateway in front of a simulated model server, in-process, as
// sluice-gateway -backend URL -max-inflight 4 runs it: a chat completion
// is admitted, proxied, and answered with the room left in its band (one
// band of 5000 places without -config), then shut down with no drain
// delay.
func Example() {
	ms, err := modelserver.New(modelserver.Config{Speed: 10})
	if err != nil {
		panic(err)
	}
	backend := httptest.NewServer(ms)
	defer backend.Close()
	u, _ := url.Parse(backend.URL)

	maxInFlight := 4
	var noDrain time.Duration // a Kubernetes pod keeps the 5 s default: see -drain-delay
	g, err := newGateway(options{backends: []*url.URL{u}, maxInFlight: &maxInFlight, drainDelay: &noDrain}, slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ctx, shutdown := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.serve(ctx, l) }()
	base := "http://" + l.Addr().String()

	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		panic(err)
	}
	ready, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("/readyz: %s", ready)

	resp, err = client.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"sim","messages":[{"role":"user","content":"hello"}],"max_tokens":4}`))
	if err != nil {
		panic(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status)
	fmt.Println("x-llm-d-flow-band-headroom-requests:", resp.Header.Get("x-llm-d-flow-band-headroom-requests"))

	client.CloseIdleConnections()
	shutdown() // what SIGTERM does
	fmt.Println("serve:", <-served)
	// Output:
	// /readyz: ready
	// 200 OK
	// x-llm-d-flow-band-headroom-requests: 5000
	// serve: <nil>
}
