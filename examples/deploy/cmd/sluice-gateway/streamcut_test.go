package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// cuttingBackend is a model server that answers each request with
// contentType and body, flushed, and then crashes: its connection closes
// without the response's end (an HTTP/1 body short of its last chunk).
func cuttingBackend(t *testing.T, contentType, body string) *url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(body))
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // the connection is dropped mid-body
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	u, _ := url.Parse("http://" + l.Addr().String())
	return u
}

// Issue 31, item 11: a stream cut by a backend crash reached the OpenAI
// SDK as TypeError "terminated", and the log did not name the backend.
// The gateway now ends the stream with an OpenAI error event on an event
// boundary — what the backend sent whole goes through, a line it cut off
// does not — and logs the backend's name.
func TestStreamCutByBackendEndsWithAnErrorEvent(t *testing.T) {
	const errorEvent = `data: {"error":{"message":"sluice-gateway: the model server's stream was cut off before its end","type":"server_error","param":null,"code":null}}` + "\n\n"
	for _, tc := range []struct {
		name, sent, want string
	}{
		{"between events", "data: {\"a\":1}\n\n", "data: {\"a\":1}\n\n" + errorEvent},
		{"in a line of an open event", "data: {\"a\":1}\n\ndata: {\"b\":2}\ndata: {\"cho", "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n" + errorEvent},
		{"CRLF lines", "data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\r\n: comment\r\ndata: {\"cho", "data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\r\n: comment\r\n\n" + errorEvent},
		{"before any event", "", errorEvent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := cuttingBackend(t, "text/event-stream; charset=utf-8", tc.sent)
			opts := testOptions()
			opts.backends = []*url.URL{u}
			opts.maxInFlight = intp(1)
			g := startGateway(t, opts)
			client := newClient(t)
			r := <-sendBody(client, g.url, "a", `{"model":"m","stream":true}`)
			if r.err != nil || r.status != http.StatusOK {
				t.Fatalf("status %d, error %v (body %q): want 200 and a stream that ends", r.status, r.err, r.body)
			}
			if r.body != tc.want {
				t.Errorf("body %q,\nwant %q", r.body, tc.want)
			}
			last := r.body[strings.LastIndex(strings.TrimSuffix(r.body, "\n\n"), "\n")+1:]
			var ev struct {
				Error struct{ Message, Type string }
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(last), "data: ")), &ev); err != nil || ev.Error.Type != "server_error" {
				t.Errorf("the last event %q is not an OpenAI error: %v", last, err)
			}
			logs := g.logs.String()
			if !strings.Contains(logs, "backend stream cut off: ended with an error event") || !strings.Contains(logs, "backend="+u.String()) {
				t.Errorf("the log does not name the backend:\n%s", logs)
			}
			if strings.Contains(r.body, u.Host) {
				t.Errorf("the client is told the backend's address: %q", r.body)
			}
		})
	}
}

// A response that is not a stream has nothing after its header that could
// say it failed: it is cut off as before, and the log names the backend.
func TestResponseCutByBackendIsLoggedWithTheBackend(t *testing.T) {
	u := cuttingBackend(t, "application/json", `{"choices":[{"text":"par`)
	opts := testOptions()
	opts.backends = []*url.URL{u}
	opts.maxInFlight = intp(1)
	g := startGateway(t, opts)
	r := <-send(newClient(t), g.url, "a")
	if r.err == nil {
		t.Fatalf("status %d, body %q: want the response cut off", r.status, r.body)
	}
	if logs := g.logs.String(); !strings.Contains(logs, "backend response cut off") || !strings.Contains(logs, "backend="+u.String()) {
		t.Errorf("the log does not name the backend:\n%s", logs)
	}
}
