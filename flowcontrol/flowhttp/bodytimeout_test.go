package flowhttp_test

// A client that sends its headers and then stalls, or trickles its body, is
// cut off once Config.BodyReadTimeout has passed, and the bound ends with
// the body: it never cuts a request that waits in the queue afterwards.
// The server and its clients run in a synctest bubble over pipes, whose
// deadlines keep the bubble's fake time, so each bound is checked to the
// nanosecond without a sleep of real time.

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/internal/pipenet"
)

// serveRaw serves h on an in-memory listener and returns a function that
// dials a raw connection to it; everything is closed when the test ends.
func serveRaw(t *testing.T, h http.Handler) func() net.Conn {
	l := pipenet.Listen()
	srv := &http.Server{Handler: h, ErrorLog: discardLog}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return func() net.Conn {
		c, err := l.Dial(context.Background(), "pipe", "pipe")
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
}

func TestStalledBodyIsCutAtTheBound(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration // Config.BodyReadTimeout
		want    time.Duration
	}{
		{"default", 0, flowhttp.DefaultBodyReadTimeout},
		{"configured", 2 * time.Second, 2 * time.Second},
	} {
		for _, trickle := range []bool{false, true} {
			name := c.name + map[bool]string{false: "/stalls after the headers", true: "/trickles a byte every 700ms"}[trickle]
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
					called := false
					h := mustHandler(t, flowhttp.Config{Controller: fc, BodyReadTimeout: c.timeout},
						http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
					conn := serveRaw(t, h)()

					start := time.Now()
					_, err := io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nHost: gateway\r\nContent-Length: 1000\r\n\r\n{")
					require.NoError(t, err)
					if trickle {
						stop := make(chan struct{})
						defer close(stop)
						go func() {
							for {
								select {
								case <-stop:
									return
								// 700ms divides neither bound, so no byte
								// arrives at the instant the deadline passes.
								case <-time.After(700 * time.Millisecond):
								}
								if _, err := io.WriteString(conn, " "); err != nil {
									return
								}
							}
						}()
					}
					res, err := http.ReadResponse(bufio.NewReader(conn), nil)
					require.NoError(t, err)
					elapsed := time.Since(start)
					body, _ := io.ReadAll(res.Body)

					require.Equal(t, http.StatusRequestTimeout, res.StatusCode, "body %s", body)
					require.Equal(t, c.want, elapsed, "cut exactly at the bound")
					require.Contains(t, string(body), `"type":"invalid_request_error"`)
					require.Empty(t, res.Header.Get(flowcontrol.DroppedReasonHeader), "flow control never saw it")
					require.False(t, called, "the wrapped handler is not called")
					require.Zero(t, fc.InFlight())
				})
			})
		}
	}
}

// The bound is on the body only: a request whose body arrived within it
// then waits in the queue for sixty times as long, and is still served
// when it is dispatched.
func TestBodyBoundEndsWithTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gt := newCountingGate(1)
		fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}, Gate: gt})
		backend := newHoldingBackend()
		h := mustHandler(t, flowhttp.Config{Controller: fc, BodyReadTimeout: time.Second}, backend)
		dial := serveRaw(t, h)

		first := dial()
		_, err := io.WriteString(first, "POST / HTTP/1.1\r\nHost: gateway\r\nX-Hold: 1\r\nContent-Length: 2\r\n\r\n{}")
		require.NoError(t, err)
		<-backend.working

		second := dial()
		_, err = io.WriteString(second, "POST / HTTP/1.1\r\nHost: gateway\r\nContent-Length: 2\r\n\r\n")
		require.NoError(t, err)
		time.Sleep(500 * time.Millisecond) // within the bound
		_, err = io.WriteString(second, "{}")
		require.NoError(t, err)
		synctest.Wait()
		require.EqualValues(t, 1, queued(t, fc, 0))

		time.Sleep(time.Minute) // sixty bounds in the queue
		require.EqualValues(t, 1, queued(t, fc, 0), "still queued: the bound did not cancel it")
		close(backend.respond)
		for _, conn := range []net.Conn{first, second} {
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			body, _ := io.ReadAll(res.Body)
			require.Equal(t, http.StatusOK, res.StatusCode)
			require.Equal(t, "tokens", strings.TrimSpace(string(body)))
		}
	})
}
