// Package testhttp holds the HTTP fixtures that the tests of several Sluice
// packages share: a server over HTTP/1 or HTTP/2, a body read that fails
// the test, the OpenAI error object as clients decode it, and a backend
// that tries to pass router-owned names as trailers. Only tests import it.
package testhttp

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicegate/sluice/internal/openaierror"
)

// Main runs m's tests and exits with their code; a passing run fails if
// it leaves a goroutine behind. The default client's idle keep-alive
// connections are closed first: they are a cache, not a leak.
func Main(m *testing.M) {
	code := m.Run()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// QuietLog discards net/http's complaints: aborted connections, and the
// invalid trailer names some spoofs use.
var QuietLog = log.New(io.Discard, "", 0)

// StartServer starts h over HTTP/1, or HTTP/2 with TLS, logging to
// QuietLog; the server and its client's idle connections close when the
// test ends.
func StartServer(t testing.TB, h http.Handler, http2 bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = QuietLog
	if http2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	t.Cleanup(srv.Client().CloseIdleConnections)
	return srv
}

// Body returns the body of resp, the answer of a request that returned err,
// and closes it. It fails the test at once when err is not nil or the body
// cannot be read.
func Body(t testing.TB, resp *http.Response, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// Do sends req with client and reads its response whole: the status, the
// header and the body, or the error that ended the request (a body that
// broke off returns what came of it with the error). It fails no test, so
// it may run on a goroutine of its own.
func Do(client *http.Client, req *http.Request) (status int, header http.Header, body string, err error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, string(b), err
}

// OpenAIError is the OpenAI error object as OpenAI SDKs decode it: decode
// a body into it strictly (DisallowUnknownFields) to check the wire form.
type OpenAIError = openaierror.Body

// TrailerSpoof is one way a backend tries to send router-owned names as
// trailers: declared in its Trailer header (and set after the body, or not
// set, so that net/http would send the router's own value again), or set
// through http.TrailerPrefix before the header or after the body.
type TrailerSpoof struct {
	Name string
	// Declare is the Trailer header the backend sets before writing.
	Declare []string
	// Before sets keys in the header map before the header is written.
	Before map[string]string
	// After sets keys in the header map after the body is written.
	After map[string]string
}

// Backend answers with the header values of header, then the spoof's
// trailers around the body "tokens", flushed. With writeHeader it writes
// the status itself before the body; otherwise the first write does.
func (s TrailerSpoof) Backend(header map[string]string, writeHeader bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		for k, v := range header {
			h.Set(k, v)
		}
		if len(s.Declare) > 0 {
			h["Trailer"] = s.Declare
		}
		for k, v := range s.Before {
			h[k] = []string{v}
		}
		if writeHeader {
			w.WriteHeader(http.StatusOK)
		}
		io.WriteString(w, "tokens")
		w.(http.Flusher).Flush()
		for k, v := range s.After {
			h[k] = []string{v}
		}
	})
}

// FetchTokens GETs srv's URL with its client and returns the response with
// its body read, so that the trailers are in. It fails the test at once
// unless the body is a spoofing Backend's "tokens" and the protocol is
// proto.
func FetchTokens(t testing.TB, srv *httptest.Server, proto string) *http.Response {
	t.Helper()
	res, err := srv.Client().Get(srv.URL)
	if body := Body(t, res, err); body != "tokens" {
		t.Fatalf("body %q, want %q", body, "tokens")
	}
	if res.Proto != proto {
		t.Fatalf("protocol %s, want %s", res.Proto, proto)
	}
	return res
}

// CheckOwned reports an error for each router-owned name (as owned tells)
// in hs that carries a backend's value "spoofed", and for each Trailer
// declaration in hs that names a router-owned name.
func CheckOwned(t testing.TB, owned func(name string) bool, hs ...http.Header) {
	t.Helper()
	for _, h := range hs {
		for k, vs := range h {
			if owned(k) && slices.Contains(vs, "spoofed") {
				t.Errorf("%s: %q reached the client", k, vs)
			}
			if !strings.EqualFold(k, "Trailer") {
				continue
			}
			for _, v := range vs {
				for elem := range strings.SplitSeq(v, ",") {
					if owned(strings.TrimSpace(elem)) {
						t.Errorf("the response declares the router-owned trailer %q", elem)
					}
				}
			}
		}
	}
}
