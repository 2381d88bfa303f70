package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkProxy is one small non-streamed completion through the
// gateway (flow control, headroom stamping, the balancer, the proxy) on
// loopback. The baseline, direct-reverseproxy, is a bare
// httputil.ReverseProxy in front of the same backend: the difference is
// what the gateway adds to a request.
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
		maxInFlight := 1 << 20
		g, err := newGateway(options{backends: []*url.URL{u}, maxInFlight: &maxInFlight, maxBodyBytes: 4 << 20},
			slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: g.handler}
		go srv.Serve(l)
		b.Cleanup(func() { srv.Close(); g.fc.Close(); g.pool.closeIdle() })
		runRequests(b, "http://"+l.Addr().String())
	})
}

// runRequests posts b.N completions to base from parallel clients.
func runRequests(b *testing.B, base string) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
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
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}
