package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// writeRecorder is a connection that records each Write made on it.
type writeRecorder struct {
	net.Conn
	mu     *sync.Mutex
	writes *[][]byte
}

func (c *writeRecorder) Write(p []byte) (int, error) {
	c.mu.Lock()
	*c.writes = append(*c.writes, bytes.Clone(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// An admitted request reaches its backend in one write, its header and
// the body flowhttp read before queueing together (one packet, where a
// body net/http cannot tell is in memory costs a second write), and its
// body whole.
func TestAdmittedRequestGoesInOneWrite(t *testing.T) {
	got := make(chan string, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost {
			got <- string(body)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"chat.completion"}`)
	}))
	t.Cleanup(backend.Close)
	u, _ := url.Parse(backend.URL)

	var mu sync.Mutex
	var writes [][]byte
	opts := testOptions()
	opts.backends = []*url.URL{u}
	opts.maxInFlight = intp(4)
	g := startGatewayPrepared(t, opts, func(g *gateway) {
		d := &net.Dialer{}
		g.pool.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &writeRecorder{Conn: c, mu: &mu, writes: &writes}, nil
		}
	})
	waitFor(t, "the backend to be up", func() bool { return g.readiness() == nil })

	resp, err := newClient(t).Post(g.url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if body := <-got; body != chatBody {
		t.Fatalf("the backend read the body %q, want %q", body, chatBody)
	}
	mu.Lock()
	defer mu.Unlock()
	var posts int
	for _, w := range writes {
		switch {
		case bytes.HasPrefix(w, []byte("POST ")):
			posts++
			if !bytes.HasSuffix(w, []byte("\r\n\r\n"+chatBody)) {
				t.Errorf("the request's write does not end with its body:\n%q", w)
			}
		case bytes.Contains(w, []byte(chatBody)):
			t.Errorf("the body went in a write of its own: %q", w)
		}
	}
	if posts != 1 {
		t.Errorf("%d writes began a POST, want 1 (all writes: %q)", posts, writes)
	}
}
