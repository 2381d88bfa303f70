package modelserver_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
)

// These tests run the server's handler inside a synctest bubble, on its
// fake clock: time.Sleep advances the clock to the moment under test, and
// synctest.Wait lets every request reach the point where it blocks.

// call is one request served in the bubble.
type call struct {
	w      *timedRecorder
	cancel context.CancelFunc // the client going away
	done   chan struct{}
	broken bool // the handler broke the connection (http.ErrAbortHandler)
}

// timedRecorder records a response and when its first byte was written.
type timedRecorder struct {
	*httptest.ResponseRecorder
	mu    sync.Mutex
	first time.Time
}

func (r *timedRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first.IsZero() {
		r.first = time.Now()
	}
	return r.ResponseRecorder.Write(p)
}

// sofar returns the body written so far, while the handler may still
// write.
func (r *timedRecorder) sofar() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Body.String()
}

func (r *timedRecorder) Flush() { r.ResponseRecorder.Flush() }

// mustNew makes a server of cfg, failing the test if New refuses it.
func mustNew(t *testing.T, cfg modelserver.Config) *modelserver.Server {
	t.Helper()
	s, err := modelserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start sends a POST of body to path on s.
func start(s *modelserver.Server, path, body string) *call {
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body))
	c := &call{w: &timedRecorder{ResponseRecorder: httptest.NewRecorder()}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer func() {
			if r := recover(); r != nil {
				if r != http.ErrAbortHandler {
					panic(r)
				}
				c.broken = true
			}
		}()
		s.ServeHTTP(c.w, req)
	}()
	return c
}

// metrics reads s's metrics page: each sample's value by its name and
// labels.
func metrics(t *testing.T, s *modelserver.Server) map[string]float64 {
	t.Helper()
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("GET /metrics: %d", w.Code)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		samples[line[:i]] = v
	}
	return samples
}

// checkLoad checks s's Load and that its metrics page says the same.
func checkLoad(t *testing.T, s *modelserver.Server, when string, want modelserver.Load) {
	t.Helper()
	if got := s.Load(); got != want {
		t.Errorf("%s: Load() = %+v, want %+v", when, got, want)
	}
	m := metrics(t, s)
	label := `{model_name="sim"}`
	got := modelserver.Load{
		Waiting:      int(m["vllm:num_requests_waiting"+label]),
		Running:      int(m["vllm:num_requests_running"+label]),
		KVCacheUsage: m["vllm:kv_cache_usage_perc"+label],
		Down:         want.Down,
	}
	if got != want {
		t.Errorf("%s: /metrics says %+v, want %+v", when, got, want)
	}
}

// With one slot, a second request waits; it runs when the first is done,
// and its time to first token is its wait plus its prefill.
func TestQueueAndTimeToFirstToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := modelserver.Config{Slots: 1, KVCacheTokens: 100, MaxModelLen: 50}
		s := mustNew(t, cfg)
		begin := time.Now()
		body := `{"prompt":"four words of prompt","max_tokens":10,"stream":true}`
		a := start(s, "/v1/completions", body)
		synctest.Wait()
		b := start(s, "/v1/completions", body)
		synctest.Wait()
		// a holds its 4 prompt tokens in a cache of 100.
		checkLoad(t, s, "both sent", modelserver.Load{Running: 1, Waiting: 1, KVCacheUsage: 0.04})

		prefill := cfg.Prefill(4)
		time.Sleep(prefill)
		synctest.Wait()
		checkLoad(t, s, "a's prefill done", modelserver.Load{Running: 1, Waiting: 1, KVCacheUsage: 0.05})
		time.Sleep(5 * modelserver.DefaultDecodeStep) // halfway: 5 decode steps after the first token
		synctest.Wait()
		checkLoad(t, s, "a halfway", modelserver.Load{Running: 1, Waiting: 1, KVCacheUsage: 0.10})

		time.Sleep(time.Until(begin.Add(cfg.ServiceTime(4, 10))))
		synctest.Wait()
		select {
		case <-a.done:
		default:
			t.Fatal("a is still running after its service time")
		}
		checkLoad(t, s, "a done", modelserver.Load{Running: 1, Waiting: 0, KVCacheUsage: 0.04})
		<-b.done
		checkLoad(t, s, "b done", modelserver.Load{})

		if got, want := a.w.first.Sub(begin), prefill; got != want {
			t.Errorf("a's time to first token %v, want its prefill %v", got, want)
		}
		if got, want := b.w.first.Sub(begin), cfg.ServiceTime(4, 10)+prefill; got != want {
			t.Errorf("b's time to first token %v, want a's service time plus b's prefill, %v", got, want)
		}
		if got, want := time.Since(begin), 2*cfg.ServiceTime(4, 10); got != want {
			t.Errorf("both done after %v, want %v", got, want)
		}
		m := metrics(t, s)
		for name, want := range map[string]float64{
			`vllm:prompt_tokens_total{model_name="sim"}`:                            8,
			`vllm:generation_tokens_total{model_name="sim"}`:                        20,
			`vllm:request_success_total{finished_reason="length",model_name="sim"}`: 2,
		} {
			if m[name] != want {
				t.Errorf("%s = %v, want %v", name, m[name], want)
			}
		}
	})
}

// A client that goes away leaves the queue, or frees its slot for the
// next one.
func TestClientGoesAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, modelserver.Config{Slots: 1})
		body := `{"prompt":"hello","max_tokens":100}`
		a := start(s, "/v1/completions", body)
		synctest.Wait()
		b := start(s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`)
		c := start(s, "/v1/completions", body)
		synctest.Wait()
		checkLoad(t, s, "three sent", modelserver.Load{Running: 1, Waiting: 2, KVCacheUsage: 1.0 / 16384})

		b.cancel() // waiting
		<-b.done
		checkLoad(t, s, "b left", modelserver.Load{Running: 1, Waiting: 1, KVCacheUsage: 1.0 / 16384})
		time.Sleep(100 * time.Millisecond)
		a.cancel() // running
		<-a.done
		synctest.Wait()
		checkLoad(t, s, "a left", modelserver.Load{Running: 1, Waiting: 0, KVCacheUsage: 1.0 / 16384})
		c.cancel()
		<-c.done
		checkLoad(t, s, "c left", modelserver.Load{})
		for _, x := range []*call{a, b, c} {
			if x.w.Body.Len() != 0 || x.broken {
				t.Errorf("a request whose client left was answered %q", x.w.Body.String())
			}
		}
		if got := metrics(t, s)[`vllm:request_success_total{finished_reason="abort",model_name="sim"}`]; got != 3 {
			t.Errorf("aborted %v, want 3", got)
		}
	})
}

// A request starts only when the KV cache can take its prompt and its
// output; the head that cannot blocks those behind it (first come, first
// served), even with slots free.
func TestKVCacheBoundsTheBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := modelserver.Config{Slots: 4, KVCacheTokens: 50, MaxModelLen: 50}
		s := mustNew(t, cfg)
		a := start(s, "/v1/completions", `{"prompt":"`+strings.Repeat("w ", 20)+`","max_tokens":20}`) // 40 tokens
		synctest.Wait()
		b := start(s, "/v1/completions", `{"prompt":"`+strings.Repeat("w ", 10)+`","max_tokens":5}`) // 15: 55 > 50
		synctest.Wait()
		c := start(s, "/v1/completions", `{"prompt":"w","max_tokens":1}`) // 2 would fit, but b is first
		synctest.Wait()
		checkLoad(t, s, "a running", modelserver.Load{Running: 1, Waiting: 2, KVCacheUsage: 20.0 / 50})
		<-a.done
		synctest.Wait()
		checkLoad(t, s, "a done", modelserver.Load{Running: 2, Waiting: 0, KVCacheUsage: 11.0 / 50})
		<-b.done
		<-c.done
		for _, x := range []*call{a, b, c} {
			if x.w.Code != 200 {
				t.Errorf("status %d: %s", x.w.Code, x.w.Body)
			}
		}
	})
}

// Going down aborts every request: a waiting one and a running whole one
// get 503, a running stream is broken off; Load and /metrics read zero.
func TestSetDownAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, modelserver.Config{Slots: 2})
		whole := start(s, "/v1/completions", `{"prompt":"a","max_tokens":50}`)
		streamed := start(s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":50,"stream":true}`)
		synctest.Wait()
		waiting := start(s, "/v1/completions", `{"prompt":"a","max_tokens":50}`)
		time.Sleep(30 * time.Millisecond) // past the prefills: the stream has begun
		synctest.Wait()
		if s.Load().Waiting != 1 || streamed.w.Body.Len() == 0 {
			t.Fatalf("load %+v, stream %q: want one waiting and the stream begun", s.Load(), streamed.w.Body)
		}
		s.SetDown(true)
		for _, x := range []*call{whole, streamed, waiting} {
			<-x.done
		}
		for name, x := range map[string]*call{"running": whole, "waiting": waiting} {
			if x.w.Code != 503 || !strings.Contains(x.w.Body.String(), `"type":"service_unavailable"`) {
				t.Errorf("%s request: %d %q, want 503 with an error body", name, x.w.Code, x.w.Body)
			}
		}
		if !streamed.broken || strings.Contains(streamed.w.Body.String(), "[DONE]") {
			t.Errorf("stream: broken %v, body %q: want the connection broken before [DONE]", streamed.broken, streamed.w.Body)
		}
		if got := s.Load(); got != (modelserver.Load{Down: true}) {
			t.Errorf("down: Load() = %+v", got)
		}
		s.SetDown(false)
		checkLoad(t, s, "up again", modelserver.Load{})
		if got := metrics(t, s)[`vllm:request_success_total{finished_reason="abort",model_name="sim"}`]; got != 3 {
			t.Errorf("aborted %v, want 3", got)
		}
	})
}
