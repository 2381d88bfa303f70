package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicegate/sluice/examples/internal/long"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
)

// TestRunFourSeconds runs the demo for four seconds in-process, long
// enough for the sheddable band to fill: it exits cleanly, prints the table
// and the summary, serves every class (priority 5 through the fallback
// band), lets the light tenant of the sheddable band in whenever the heavy
// one fills it, never lets a model server's headroom value through, and
// leaves no goroutine behind. By default it runs two seconds, and checks
// the same; four with SLUICE_LONG (see examples/internal/long).
func TestRunFourSeconds(t *testing.T) {
	seconds := 2
	if long.Enabled() {
		seconds = 4
	}
	before := goleak.IgnoreCurrent()
	out := newSyncBuffer()
	if err := run(context.Background(), []string{"-duration", fmt.Sprintf("%ds", seconds)}, out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	verifyNoLeak(t, before)

	text := out.String()
	t.Logf("output:\n%s", text)
	for _, want := range []string{tableHeader, "\n  1s    10 ", fmt.Sprintf("\n  %ds    10 ", seconds), "\nsummary: "} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// class, priority→band, tenant, sent, completed, success, saturated
	// (displacements included: they answer rejected-saturated), expired
	summary := regexp.MustCompile(`(?m)^(\S+)\s+(-?\d+)→(-?\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)`)
	completed := map[string]int{}
	refused := map[string]int{} // saturated (or displaced) or expired
	for _, m := range summary.FindAllStringSubmatch(text, -1) {
		completed[m[1]], _ = strconv.Atoi(m[6])
		for _, f := range m[8:10] {
			n, _ := strconv.Atoi(f)
			refused[m[1]] += n
		}
	}
	for _, c := range classes {
		if _, ok := completed[c.name]; !ok {
			t.Errorf("summary has no line for %s", c.name)
		}
	}
	// Higher bands are served first, so their requests complete; batch may
	// be shed entirely in a short run.
	for _, name := range []string{"interactive", "standard", "unprovisioned"} {
		if completed[name] == 0 {
			t.Errorf("no %s request completed", name)
		}
	}
	// The light tenant of the sheddable band holds less than its share of
	// it, so fair admission lets every one of its requests in, displacing
	// the heavy tenant's if the band is full: the heavy tenant absorbs the
	// overload. (Its requests still queued when the run stops are not
	// counted.)
	if refused["eval"] != 0 {
		t.Errorf("the light tenant (eval) had %d requests rejected, displaced or expired; the heavy one %d: want none of the light's",
			refused["eval"], refused["batch"])
	}
	if refused["batch"] == 0 {
		t.Logf("the sheddable band was never full: the run does not show the heavy tenant absorbing the overload")
	}
	// Every band is bounded, so every completed response carries the
	// router's value, and none a model server's 999.
	m := regexp.MustCompile(`on (\d+) of (\d+) completed responses; (\d+) malformed`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("summary lacks the headroom line")
	}
	if m[1] != m[2] || m[1] == "0" || m[3] != "0" {
		t.Errorf("headroom on %s of %s completed responses, %s malformed; want all, none malformed", m[1], m[2], m[3])
	}
}

// The classifier's cost is the request's estimated tokens, as
// flowhttp.EstimateTokens makes it: the body's bytes / 4, rounded up, plus
// max_completion_tokens or max_tokens, clamped to [1, DefaultMaxTokens].
func TestClassifyCostsEstimatedTokens(t *testing.T) {
	lorem := `{"model":"sim","prompt":"` + strings.Repeat("lorem ", 100) + `","max_tokens":32}`
	for body, want := range map[string]int64{
		lorem:                                (int64(len(lorem))+3)/4 + 32,
		`{"prompt":"hi"}`:                    4,
		`not json at all`:                    4,
		``:                                   1,
		`{"max_tokens":-5}`:                  5,
		`{"max_tokens":9223372036854775807}`: flowhttp.DefaultMaxTokens,
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(body))
		class, err := classify(r)
		if err != nil || class.Cost != want {
			t.Errorf("classify(%.40q): cost %d, %v; want %d", body, class.Cost, err, want)
		}
	}
}

// TestListen runs only the gateway and the servers, as for curl: a request
// through it streams its tokens and carries the router's headers (not the
// model server's 999), and the demo stops cleanly when its context ends.
func TestListen(t *testing.T) {
	before := goleak.IgnoreCurrent()
	out := newSyncBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-listen", "127.0.0.1:0"}, out) }()

	url := ""
	listening := regexp.MustCompile(`gateway listening on (http://127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(10 * time.Second); url == ""; {
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v\n%s", err, out.String())
		case <-out.wrote:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("the gateway did not start:\n%s", out.String())
		}
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
	}

	tr := &http.Transport{}
	client := &http.Client{Transport: tr}
	// Streamed and whole, completions and chat: the model servers speak
	// OpenAI through the gateway.
	cases := []struct {
		priority   string
		path, body string
		events     int    // data events before [DONE]; 0: a whole JSON answer
		headroom   string // of the band that served the request: its capacity, as nothing waits
	}{
		{"10", "/v1/chat/completions", `{"model":"sim","messages":[{"role":"user","content":"hello world"}],"max_tokens":8,"stream":true}`,
			1 + 8 + 1, "32"}, // the role, 8 tokens, the finish
		{"5", "/v1/completions", `{"model":"sim","prompt":"hello world","max_tokens":8,"stream":true}`,
			8 + 1, "64"}, // no band 5: the fallback band 0
		{"-10", "/v1/completions", `{"model":"sim","prompt":"hello world","max_tokens":8}`, 0, "32"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(http.MethodPost, url+c.path, strings.NewReader(c.body))
		req.Header.Set(priorityHeader, c.priority)
		req.Header.Set(sloHeader, "500")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("priority %s: %d %v %q", c.priority, resp.StatusCode, err, body)
		}
		if c.events > 0 {
			if n := bytes.Count(body, []byte("data: {")); n != c.events || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
				t.Errorf("priority %s: %d events in %q, want %d and [DONE]", c.priority, n, body, c.events)
			}
		} else {
			var whole struct {
				Choices []struct{ Text string }
				Usage   struct {
					CompletionTokens int `json:"completion_tokens"`
				}
			}
			if err := json.Unmarshal(body, &whole); err != nil || len(whole.Choices) != 1 || whole.Choices[0].Text == "" || whole.Usage.CompletionTokens != 8 {
				t.Errorf("priority %s: %q (%v), want one choice of 8 tokens", c.priority, body, err)
			}
		}
		if got := resp.Header.Values(headroom.HeaderName); !slices.Equal(got, []string{c.headroom}) {
			t.Errorf("priority %s: headroom %q, want [%s]", c.priority, got, c.headroom)
		}
		if got := resp.Header.Values(flowhttp.QueueDurationHeader); len(got) != 1 {
			t.Errorf("priority %s: queue duration %q, want one value", c.priority, got)
		}
	}
	tr.CloseIdleConnections()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	verifyNoLeak(t, before)
	t.Logf("output:\n%s", out.String())
}

func TestFlags(t *testing.T) {
	bad := [][]string{
		{"-duration", "0s"},
		{"-rate", "-1"},
		{"-rate", "NaN"},
		{"-rate", "+Inf"},
		{"-rate", "1e9"},
		{"-servers", "0"},
		{"-concurrency", "0"},
		{"-listen", "0.0.0.0:8080"},
		{"-listen", "192.0.2.1:8080"},
		{"-listen", "example.com:8080"},
		{"-listen", "8080"},
		{"-nosuchflag"},
		{"-fairness", "fair-please"},
		{"-gate", "open-sesame"},
		{"-gate", "adaptive+saturation"},
		{"-queue-depth", "-1"},
		{"-token-budget", "-1"},
		{"-target-ttft", "-1s"},
		// A bad value, refused by the gate package's constructor.
		{"-gate", "saturation+concurrency", "-queue-depth", "-1"},
		{"-gate", "concurrency", "-token-budget", "-1"},
		{"-gate", "adaptive", "-target-ttft", "-1s"},
		// A good value for a gate that -gate does not build.
		{"-token-budget", "1000"},
		{"-gate", "concurrency", "-queue-depth", "2"},
		{"-gate", "maxinflight", "-target-ttft", "1s"},
		{"-kv-cache-tokens", "4095"},
		{"extra"},
	}
	for _, args := range bad {
		err := run(context.Background(), args, io.Discard)
		var usage usageError
		if !errors.As(err, &usage) {
			t.Errorf("%q: error %v, want a usage error", args, err)
		}
	}
	if err := run(context.Background(), []string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	for in, want := range map[string]string{
		":8080":          "127.0.0.1:8080",
		"127.0.0.1:0":    "127.0.0.1:0",
		"[::1]:8080":     "[::1]:8080",
		"localhost:8080": "localhost:8080",
	} {
		if got, err := checkLoopback(in); err != nil || got != want {
			t.Errorf("checkLoopback(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers;
// wrote receives a signal after each write.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{wrote: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// verifyNoLeak fails if goroutines other than those before ignores are
// still running. Connections close asynchronously after their servers and
// transports have, so it gives them about five seconds, beyond goleak's own
// short retries.
func verifyNoLeak(t *testing.T, before goleak.Option) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		err := goleak.Find(before)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Error(err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A generator that cannot keep up with its rate still stops when its run
// ends: the catch-up loop must not outlive the context.
func TestGeneratorStopsWhenBehind(t *testing.T) {
	refuse := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("refused")
	})
	g := &generator{
		client: &http.Client{Transport: refuse},
		url:    "http://gateway.test",
		rate:   1e9, // far more than one goroutine can start
		rng:    rand.New(rand.NewPCG(1, 2)),
		stats:  newClientStats(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		g.run(ctx, context.Background())
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the generator was still starting requests 10s after its run ended")
	}
	g.wait()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
