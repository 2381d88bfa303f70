package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkProxy is one small non-streamed completion through the
// gateway (flow control, headroom stamping, the balancer, the proxy) on
// loopback. The baseline, direct-reverseproxy, is a bare
// httputil.ReverseProxy in front of the same backend: the difference is
// what the gateway adds to a request. The gateway is served as the
// program serves it (it probes its backend before admitting), with a
// -max-inflight gate that never queues; every request must end 200.
// cmd/sluice-loadbench measures the same at fixed rates, process by
// process.
func BenchmarkProxy(b *testing.B) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"chat.completion","choices":[{"message":{"content":"ok"}}]}`)
	}))
	b.Cleanup(backend.Close)
	u, _ := url.Parse(backend.URL)

	b.Run("impl=direct-reverseproxy", func(b *testing.B) {
		rp := httputil.NewSingleHostReverseProxy(u)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256
		rp.Transport = tr
		srv := httptest.NewServer(rp)
		b.Cleanup(srv.Close)
		b.Cleanup(tr.CloseIdleConnections)
		runRequests(b, srv.URL)
	})
	b.Run("impl=sluice-gateway", func(b *testing.B) {
		opts := testOptions()
		opts.backends = []*url.URL{u}
		opts.maxInFlight = intp(1 << 20)
		g := startGateway(b, opts)
		waitFor(b, "the backend to be up", func() bool { return g.readiness() == nil })
		runRequests(b, g.url)
	})
}

// runRequests posts b.N completions to base from parallel clients, and
// fails the benchmark unless every one is answered 200.
func runRequests(b *testing.B, base string) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	var ok atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d (%s)", resp.StatusCode, resp.Header.Get("x-llm-d-request-dropped-reason"))
				return
			}
			ok.Add(1)
		}
	})
	b.StopTimer()
	if got := ok.Load(); got != int64(b.N) {
		b.Fatalf("%d of %d requests answered 200", got, b.N)
	}
}
