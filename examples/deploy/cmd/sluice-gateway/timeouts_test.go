package main

// A slow client is cut within the gateway's named bounds. The gateway runs
// in a synctest bubble over pipes (internal/pipenet), whose deadlines keep
// the bubble's fake time: each bound is checked exactly, and no test
// sleeps.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/internal/pipenet"
)

// bubbleGateway serves a gateway with opts on an in-memory listener in the
// current bubble and returns a dialer to it; the gateway shuts down when
// the test ends.
func bubbleGateway(t *testing.T, opts options) (*gateway, func() net.Conn) {
	g, err := newGateway(opts, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// No socket in the bubble: the probes of the backend fail at once.
	g.pool.dial = func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no network in the bubble")
	}
	l := pipenet.Listen()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return g, func() net.Conn {
		c, err := l.Dial(context.Background(), "pipe", "pipe")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

func timeoutOptions() options {
	opts := testOptions()
	u, _ := url.Parse("http://backend.invalid")
	opts.backends = []*url.URL{u}
	opts.maxInFlight = intp(1) // no saturation gate: nothing scrapes
	return opts
}

// A client that sends its headers and then stalls is answered 408 once
// bodyReadTimeout has passed, before its request is queued.
func TestStalledBodyIsCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, dial := bubbleGateway(t, timeoutOptions())
		conn := dial()
		start := time.Now()
		if _, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Length: 100\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusRequestTimeout {
			t.Errorf("status %d, want 408", res.StatusCode)
		}
		if elapsed := time.Since(start); elapsed != bodyReadTimeout {
			t.Errorf("cut after %v, want bodyReadTimeout %v", elapsed, bodyReadTimeout)
		}
		if n := g.fc.InFlight(); n != 0 {
			t.Errorf("%d in flight", n)
		}
	})
}

// A client that stops in the middle of its headers is disconnected once
// readHeaderTimeout has passed; a connection left idle after a request,
// once idleTimeout has.
func TestSlowHeadersAndIdleConnectionsAreCut(t *testing.T) {
	for _, c := range []struct {
		name  string
		send  string
		first bool // a whole request, answered before the wait
		want  time.Duration
	}{
		{"headers", "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n", false, readHeaderTimeout},
		{"idle", "GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n", true, idleTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, dial := bubbleGateway(t, timeoutOptions())
				conn := dial()
				if _, err := io.WriteString(conn, c.send); err != nil {
					t.Fatal(err)
				}
				r := bufio.NewReader(conn)
				if c.first {
					res, err := http.ReadResponse(r, nil)
					if err != nil {
						t.Fatal(err)
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						t.Fatalf("/healthz: %d", res.StatusCode)
					}
				}
				start := time.Now()
				if _, err := io.ReadAll(r); err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				if elapsed := time.Since(start); elapsed != c.want {
					t.Errorf("closed after %v, want %v", elapsed, c.want)
				}
			})
		})
	}
}
