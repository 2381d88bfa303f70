package headroom_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/internal/testhttp"
)

// admitted wraps next like a router's admission step that dispatched every
// request in band priority.
func admitted(priority int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(headroom.NewContext(r.Context(), headroom.Admitted(priority))))
	})
}

func setLength(bands *capacity.Bands, priority int, length int64) {
	bands.Update(priority, func(s *capacity.Snapshot) { s.QueuedRequests = length })
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	res, err := http.Get(url)
	return res, testhttp.Body(t, res, err)
}

func TestMiddlewareSamplesAtFirstWrite(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	backend := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Model", "m1")
		setLength(bands, 0, 90)
		_, _ = io.WriteString(w, "first") // writes the header: status 200
		setLength(bands, 0, 99)
		w.WriteHeader(http.StatusTeapot) // too late: ignored by net/http
		_, _ = io.WriteString(w, " second")
	})
	rec := httptest.NewRecorder()
	admitted(0, headroom.Middleware(bands, backend)).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	res := rec.Result()
	if res.StatusCode != http.StatusOK || rec.Body.String() != "first second" {
		t.Fatalf("response = %d %q", res.StatusCode, rec.Body.String())
	}
	wantHeadroom(t, res.Header, "10")
}

func TestMiddlewareStampsWhenHandlerWritesNothing(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	backend := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Model", "m1")
		w.Header()[headroom.HeaderName] = []string{"999"}
		setLength(bands, 0, 70)
		// net/http writes the header after the handler returns.
	})
	srv := httptest.NewServer(admitted(0, headroom.Middleware(bands, backend)))
	defer srv.Close()
	res, _ := get(t, srv.URL)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status = %d", res.StatusCode)
	}
	wantHeadroom(t, res.Header, "30")
}

func TestMiddlewareFlusher(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	backend := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Model", "m1")
		f, ok := w.(http.Flusher)
		if !ok {
			t.Error("the middleware's ResponseWriter is not an http.Flusher")
			return
		}
		setLength(bands, 0, 95)
		f.Flush() // streams the header before any body
		setLength(bands, 0, 10)
		_, _ = io.WriteString(w, "data: token\n\n")
	})
	rec := httptest.NewRecorder()
	admitted(0, headroom.Middleware(bands, backend)).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if !rec.Flushed {
		t.Fatal("Flush did not reach the underlying writer")
	}
	wantHeadroom(t, rec.Result().Header, "5")
}

func TestMiddlewareResponseController(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	backend := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Model", "m1")
		rc := http.NewResponseController(w)
		// Deadlines are not methods of the middleware's writer: they must be
		// reached through Unwrap.
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through the middleware: %v", err)
		}
		if err := rc.SetReadDeadline(time.Time{}); err != nil {
			t.Errorf("SetReadDeadline through the middleware: %v", err)
		}
		setLength(bands, 0, 88)
		if err := rc.Flush(); err != nil {
			t.Errorf("Flush through the middleware: %v", err)
		}
		setLength(bands, 0, 0)
		_, _ = io.WriteString(w, "ok")
	})
	srv := httptest.NewServer(admitted(0, headroom.Middleware(bands, backend)))
	defer srv.Close()
	res, body := get(t, srv.URL)
	if body != "ok" {
		t.Fatalf("body = %q", body)
	}
	wantHeadroom(t, res.Header, "12")
}

func TestMiddlewareInformationalHeaders(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	backend := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Model", "m1")
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.Header()[headroom.HeaderName] = []string{"999"}
		w.WriteHeader(http.StatusEarlyHints)
		w.Header()[headroom.ProvisionalHeaderName] = []string{"999"}
		setLength(bands, 0, 91)
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(admitted(0, headroom.Middleware(bands, backend)))
	defer srv.Close()

	var early []textproto.MIMEHeader
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		early = append(early, h)
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", srv.URL, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if len(early) != 1 {
		t.Fatalf("got %d informational responses, want 1", len(early))
	}
	if v := early[0].Values(headroom.HeaderName); len(v) != 1 || v[0] == "999" {
		t.Fatalf("103 carried %s %q, want the router's value only", headroom.HeaderName, v)
	}
	wantHeadroom(t, res.Header, "9")
}

// TestReverseProxy runs a real backend behind httputil.ReverseProxy with
// ModifyResponse; the backend spoofs the header in several forms.
func TestReverseProxy(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Model", "m1")
		w.Header().Add(headroom.HeaderName, "999")
		w.Header().Add(headroom.HeaderName, "1000")
		w.Header().Set(headroom.ProvisionalHeaderName, "999")
		setLength(bands, 0, 97)
		w.WriteHeader(backendStatus)
		_, _ = io.WriteString(w, backendBody)
	}))
	defer backend.Close()
	target, _ := url.Parse(backend.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = headroom.ModifyResponse(bands)
	front := httptest.NewServer(admitted(0, proxy))
	defer front.Close()

	res, body := get(t, front.URL)
	checkResponse(t, res.StatusCode, body)
	wantHeadroom(t, res.Header, "3")
}

func TestModifyResponseEdgeCases(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	modify := headroom.ModifyResponse(bands)
	if err := modify(nil); err != nil {
		t.Fatalf("ModifyResponse(nil) = %v", err)
	}

	noRequest := &http.Response{Header: http.Header{"X-Model": {"m1"}, headroom.HeaderName: {"999"}}}
	if err := modify(noRequest); err != nil {
		t.Fatalf("ModifyResponse without a request = %v", err)
	}
	wantAbsent(t, noRequest.Header)

	req := httptest.NewRequest("GET", "/", nil)
	noHeader := &http.Response{Request: req.WithContext(headroom.NewContext(req.Context(), headroom.Admitted(0)))}
	if err := modify(noHeader); err != nil {
		t.Fatalf("ModifyResponse without a header = %v", err)
	}
	if got := noHeader.Header.Get(headroom.HeaderName); got != "19" {
		t.Fatalf("header = %q, want 19", got)
	}
}

// recordingWriter is a ResponseWriter that can neither flush nor set
// deadlines, and records what reaches it.
type recordingWriter struct {
	header   http.Header
	statuses []int
	body     strings.Builder
}

func (w *recordingWriter) Header() http.Header         { return w.header }
func (w *recordingWriter) WriteHeader(code int)        { w.statuses = append(w.statuses, code) }
func (w *recordingWriter) Write(p []byte) (int, error) { return w.body.Write(p) }

func TestHeaderWriterHookRunsOnceForFinalHeader(t *testing.T) {
	for name, respond := range map[string]func(w *headroom.HeaderWriter){
		"WriteHeader": func(w *headroom.HeaderWriter) { w.WriteHeader(204); w.WriteHeader(500) },
		"Write":       func(w *headroom.HeaderWriter) { _, _ = w.Write([]byte("a")); w.WriteHeader(500) },
		"Flush":       func(w *headroom.HeaderWriter) { w.Flush(); _, _ = w.Write([]byte("a")) },
		"nothing":     func(*headroom.HeaderWriter) {},
		"101":         func(w *headroom.HeaderWriter) { w.WriteHeader(http.StatusSwitchingProtocols) },
	} {
		t.Run(name, func(t *testing.T) {
			under := &recordingWriter{header: http.Header{}}
			calls := 0
			hw := headroom.NewHeaderWriter(under, func(h http.Header) {
				calls++
				h.Set("X-Stamp", "yes")
			})
			respond(hw)
			hw.Finish()
			hw.Finish()
			if calls != 1 {
				t.Fatalf("hook ran %d times, want 1", calls)
			}
			if under.header.Get("X-Stamp") != "yes" {
				t.Fatal("hook did not see the wrapped writer's header")
			}
		})
	}
}

func TestHeaderWriterHookRunsBeforeEachInformationalHeader(t *testing.T) {
	under := &recordingWriter{header: http.Header{}}
	var seen []int
	hw := headroom.NewHeaderWriter(under, func(http.Header) { seen = append(seen, len(under.statuses)) })
	hw.WriteHeader(http.StatusContinue)
	hw.WriteHeader(http.StatusEarlyHints)
	hw.WriteHeader(http.StatusOK)
	hw.Finish()
	// The hook ran before each write reached the wrapped writer.
	if want := []int{0, 1, 2}; !slices.Equal(seen, want) {
		t.Fatalf("hook ran with %v statuses already written, want %v", seen, want)
	}
	if want := []int{100, 103, 200}; !slices.Equal(under.statuses, want) {
		t.Fatalf("statuses = %v, want %v", under.statuses, want)
	}
}

func TestHeaderWriterFlushNotSupported(t *testing.T) {
	under := &recordingWriter{header: http.Header{}}
	hooked := false
	hw := headroom.NewHeaderWriter(under, func(http.Header) { hooked = true })
	if err := http.NewResponseController(hw).Flush(); !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("Flush of a writer that cannot flush = %v, want ErrNotSupported", err)
	}
	if !hooked {
		t.Fatal("hook did not run before the flush")
	}
	if hw.Unwrap() != http.ResponseWriter(under) {
		t.Fatal("Unwrap does not return the wrapped writer")
	}
}

func TestHeaderWriterNilHook(t *testing.T) {
	under := &recordingWriter{header: http.Header{}}
	hw := headroom.NewHeaderWriter(under, nil)
	hw.WriteHeader(http.StatusEarlyHints)
	_, _ = hw.Write([]byte("body"))
	hw.Finish()
	if want := []int{http.StatusEarlyHints}; !slices.Equal(under.statuses, want) || under.body.String() != "body" {
		t.Fatalf("statuses %v, body %q; want %v, body", under.statuses, under.body.String(), want)
	}
}

// rwc is a response body that is also the connection, as the transport
// gives for 101 Switching Protocols.
type rwc struct{ io.ReadWriteCloser }

func TestModifyResponseKeepsUpgradeBody(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	resp := &http.Response{
		StatusCode: http.StatusSwitchingProtocols,
		Header:     http.Header{headroom.HeaderName: {"999"}},
		Body:       rwc{client},
	}
	if err := headroom.ModifyResponse(bands)(resp); err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Body.(io.ReadWriteCloser); !ok {
		t.Fatalf("the body of a 101 became %T: the proxy needs the backend connection", resp.Body)
	}
	if got := resp.Header.Values(headroom.HeaderName); len(got) != 0 {
		t.Fatalf("a 101 not admitted kept %q", got)
	}
}

func TestModifyResponseStripsTrailersAtEOF(t *testing.T) {
	bands := bandsOf(bounded(0, 100, 81))
	resp := &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{},
		Trailer:    http.Header{"X-Llm-D-Flow-Band-Headroom-Requests": nil, "X-Other": nil},
	}
	body := &trailerAtEOF{resp: resp, data: "tokens"}
	resp.Body = body
	if err := headroom.ModifyResponse(bands)(resp); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(http.Header{"X-Other": nil}, resp.Trailer); diff != "" {
		t.Fatalf("declared trailers after ModifyResponse (-want +got):\n%s", diff)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != "tokens" {
		t.Fatalf("body %q, %v", got, err)
	}
	if diff := cmp.Diff(http.Header{"X-Other": {"kept"}}, resp.Trailer); diff != "" {
		t.Fatalf("trailers at EOF (-want +got):\n%s", diff)
	}
	if err := resp.Body.Close(); err != nil || !body.closed {
		t.Fatalf("Close: %v, closed %v", err, body.closed)
	}
}

// trailerAtEOF is a body that merges trailers into resp.Trailer before it
// reports io.EOF, as net/http's transports do.
type trailerAtEOF struct {
	resp   *http.Response
	data   string
	closed bool
}

func (b *trailerAtEOF) Read(p []byte) (int, error) {
	if b.data == "" {
		b.resp.Trailer["X-Other"] = []string{"kept"}
		b.resp.Trailer["x-llm-d-flow-band-headroom"] = []string{"999"}
		b.resp.Trailer["X-Llm-D-Flow-Band-Headroom-Requests"] = []string{"998"}
		return 0, io.EOF
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *trailerAtEOF) Close() error { b.closed = true; return nil }

func TestHeaderWriterKeepsOwnedNamesOutOfTrailers(t *testing.T) {
	w := &recordingWriter{header: http.Header{}}
	hw := headroom.NewHeaderWriter(w, func(h http.Header) { h.Set("X-Owned", "router") }, "x-owned")
	hw.Header().Set("Trailer", "X-Owned, X-Other")
	hw.Header().Set("Trailer:X-Owned", "early")
	if _, err := hw.Write([]byte("body")); err != nil {
		t.Fatal(err)
	}
	want := http.Header{"X-Owned": {"router"}, "Trailer": {"X-Other"}}
	if diff := cmp.Diff(want, w.header); diff != "" {
		t.Fatalf("header as written (-want +got):\n%s", diff)
	}
	// After the body: the handler sets trailers.
	hw.Header()["trailer:x-OWNED"] = []string{"late"}
	hw.Header()["Trailer:X-Other"] = []string{"kept"}
	hw.Finish()
	want = http.Header{"X-Owned": {"router"}, "Trailer": {"X-Other"}, "Trailer:X-Other": {"kept"}}
	if diff := cmp.Diff(want, w.header); diff != "" {
		t.Fatalf("header after Finish (-want +got):\n%s", diff)
	}
}
