// Package modelserver is a simulated vLLM-like model server for demos,
// simulations and tests of LLM routers: it speaks enough of OpenAI's API
// for the official SDKs (completions and chat completions, whole or
// streamed), serves vLLM's load metrics in the Prometheus text format, and
// spends time the way a model server does — a bounded number of requests
// running at once, the rest waiting in its own queue, a prefill that grows
// with the prompt, then one token per decode step, in a KV cache of bounded
// size.
//
// A [Server] is an http.Handler:
//
//	POST /v1/completions        text completion; "stream": true for server-sent events
//	POST /v1/chat/completions   chat completion; likewise
//	GET  /v1/models             the served model
//	GET  /healthz, /health      200 while up, 503 while down (also HEAD)
//	GET  /metrics               vllm:num_requests_waiting, vllm:num_requests_running,
//	                            vllm:kv_cache_usage_perc, vllm:num_preemptions_total
//	                            and vLLM's token and request counters
//
// Its queue runs first come, first served, or by each request's
// "priority" with vLLM's preemption by recompute (Config.SchedulingPolicy).
//
// [Server.Load] reads the numbers /metrics shows without HTTP, and
// [Server.SetDown] fails the server for a demo or a test.
package modelserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 4 << 20

// Server is a simulated model server. It is safe for concurrent use; make
// one with [New].
//
// A generation request is decoded and checked first (400 for a bad one),
// then waits in the server's queue for a slot and room in the KV cache, in
// the order of its scheduling policy (Config.SchedulingPolicy); the client
// going away takes it out of the queue or frees its slot. A streamed
// response's status and headers go out with its first token; a whole
// response's when it is complete. With the priority policy a running
// request may be preempted, which pauses it (a stream stops sending) until
// it runs again.
type Server struct {
	cfg Config // defaults applied

	// mu guards everything below. No method holds it while writing to a
	// client or waiting.
	mu       sync.Mutex
	running  []*entry // requests holding a slot
	reserved int      // KV tokens reserved by running requests: prompt + whole output
	held     int      // KV tokens running requests hold now: prompt + output so far
	queue    []*entry // waiting requests, in the policy's order
	arrivals uint64   // requests queued so far: each one's place in the order of arrival
	down     bool
	abort    chan struct{} // closed when the server goes down; replaced when it comes back
	nextID   uint64
	counts   counters
}

// counters are vLLM's monotonic counters.
type counters struct {
	promptTokens     int64
	generationTokens int64
	preemptions      int64
	finished         [numFinishReasons]int64
}

// finishReason is why a request ended, as vLLM labels
// vllm:request_success_total.
type finishReason int

const (
	finishStop finishReason = iota
	finishLength
	finishAbort
	numFinishReasons
)

var finishReasonNames = [numFinishReasons]string{"stop", "length", "abort"}

func (f finishReason) String() string { return finishReasonNames[f] }

// New returns a server with configuration cfg, its zero fields set to their
// defaults, or an error naming the first field no server can run with.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, abort: make(chan struct{})}, nil
}

// Config returns the server's configuration, defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Load is a server's load at one moment: what its /metrics page reports.
type Load struct {
	// Waiting is the number of requests in the server's queue
	// (vllm:num_requests_waiting).
	Waiting int
	// Running is the number of requests holding a slot
	// (vllm:num_requests_running).
	Running int
	// KVCacheUsage is the share of the KV cache held by the running
	// requests, from 0 to 1 (vllm:kv_cache_usage_perc).
	KVCacheUsage float64
	// Down is true while the server is failed by [Server.SetDown].
	Down bool
}

// Load returns the server's load now.
func (s *Server) Load() Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadLocked()
}

func (s *Server) loadLocked() Load {
	return Load{
		Waiting:      len(s.queue),
		Running:      len(s.running),
		KVCacheUsage: float64(s.held) / float64(s.cfg.KVCacheTokens),
		Down:         s.down,
	}
}

// SetDown fails the server (down true) or restores it. While it is down
// every request is answered at once with 503 — /healthz and /metrics
// included — and going down aborts the requests waiting (503) and running
// (503, or a stream cut short: the connection is broken so that the client
// sees an error, not a short answer).
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if down == s.down {
		return
	}
	s.down = down
	if down {
		close(s.abort)
	} else {
		s.abort = make(chan struct{})
	}
}

// errDown is the refusal of a server that is down.
var errDown = &apiError{status: http.StatusServiceUnavailable, message: "the model server is down",
	typ: "service_unavailable", code: "service_unavailable"}

// ServeHTTP serves the routes of the package documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ep endpoint
	switch r.URL.Path {
	case "/v1/completions":
		ep = completions
	case "/v1/chat/completions":
		ep = chatCompletions
	case "/v1/models":
		s.serveRead(w, r, s.serveModels)
		return
	case "/healthz", "/health":
		s.serveRead(w, r, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
		return
	case "/metrics":
		s.serveRead(w, r, s.serveMetrics)
		return
	default:
		writeError(w, &apiError{status: http.StatusNotFound, message: "no route " + r.URL.Path,
			typ: "invalid_request_error", code: "not_found"})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, message: r.Method + " " + r.URL.Path + ": use POST",
			typ: "invalid_request_error", code: "method_not_allowed"})
		return
	}
	s.generate(w, r, ep)
}

// serveRead serves a GET or HEAD route with serve, or 503 while the server
// is down.
func (s *Server) serveRead(w http.ResponseWriter, r *http.Request, serve http.HandlerFunc) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, message: r.Method + " " + r.URL.Path + ": use GET",
			typ: "invalid_request_error", code: "method_not_allowed"})
		return
	}
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		writeError(w, errDown)
		return
	}
	serve(w, r)
}

func (s *Server) serveModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id":            s.cfg.Model,
			"object":        "model",
			"created":       time.Now().Unix(),
			"owned_by":      "vllm",
			"root":          s.cfg.Model,
			"parent":        nil,
			"max_model_len": s.cfg.MaxModelLen,
		}},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b := mustMarshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, e *apiError) {
	b := e.body()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(e.status)
	_, _ = w.Write(append(b, '\n'))
}

// generate serves a completion or chat completion request.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, ep endpoint) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, &apiError{status: http.StatusRequestEntityTooLarge,
				message: fmt.Sprintf("the request body exceeds %d bytes", maxBodyBytes), typ: "invalid_request_error"})
		}
		return // otherwise the client is gone
	}
	req, err := decodeRequest(ep, body, s.cfg)
	if err != nil {
		writeError(w, err.(*apiError))
		return
	}
	if req.model != "" && req.model != s.cfg.Model {
		writeError(w, &apiError{status: http.StatusNotFound, message: "the model `" + req.model + "` does not exist",
			typ: "invalid_request_error", param: "model", code: "model_not_found"})
		return
	}
	output, finish := req.maxTokens, finishLength
	if s.cfg.ReplyTokens > 0 && s.cfg.ReplyTokens < output && !req.ignoreEOS {
		output, finish = s.cfg.ReplyTokens, finishStop
	}

	e := &entry{need: req.promptTokens + output, context: req.promptTokens, priority: req.priority}
	abort, err := s.enter(e)
	if err != nil {
		writeError(w, err.(*apiError))
		return
	}
	g := &generation{s: s, e: e, req: req, output: output, finish: finish, ctx: r.Context(), abort: abort, prefill: true}
	defer g.release()
	if err := g.awaitRun(); err != nil {
		if errors.Is(err, errDown) {
			writeError(w, errDown)
		}
		return
	}
	g.writeAnswer(w)
}

// generation is one request, from its first grant of a slot to its end.
type generation struct {
	s      *Server
	e      *entry
	req    request
	output int // tokens it will generate
	finish finishReason
	ctx    context.Context
	abort  <-chan struct{}

	// run and preempted are those of the entry's run the goroutine works
	// in (entry.run, entry.preempted), read under the server's lock when
	// it is granted a slot; prefill is set when its next step is a
	// prefill: the first, or the recompute after a preemption.
	run       uint64
	preempted <-chan struct{}
	prefill   bool
	generated int
	id        string
	created   int64
}

// release takes the request out of the server, from its slot or from the
// queue, and counts how it ended.
func (g *generation) release() {
	s := g.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaveLocked(g.e)
	if g.generated == g.output {
		s.counts.finished[g.finish]++
	} else {
		s.counts.finished[finishAbort]++
	}
}

// awaitRun waits until the request holds a slot: at its start, or after a
// preemption. It fails with the context's error if the client goes away
// first, and with errDown if the server goes down.
func (g *generation) awaitRun() error {
	s := g.s
	s.mu.Lock()
	ready := g.e.ready
	s.mu.Unlock()
	select {
	case <-ready:
	case <-g.ctx.Done():
		return g.ctx.Err()
	case <-g.abort:
		return errDown
	}
	s.mu.Lock()
	g.run, g.preempted = g.e.run, g.e.preempted
	s.mu.Unlock()
	return nil
}

// The outcomes of one step of work.
type stepResult int

const (
	stepDone      stepResult = iota // the time passed
	stepGone                        // the client went away or the server went down
	stepPreempted                   // the scheduler preempted the request
)

// wait waits for d of work in the current run.
func (g *generation) wait(d time.Duration) stepResult {
	if g.ctx.Err() != nil {
		return stepGone
	}
	select {
	case <-g.abort:
		return stepGone
	case <-g.preempted:
		return stepPreempted
	default:
	}
	if d <= 0 {
		return stepDone
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return stepDone
	case <-g.ctx.Done():
	case <-g.abort:
	case <-g.preempted:
		return stepPreempted
	}
	return stepGone
}

// next works until the request's next token and reports whether it may go
// on: neither its client gone nor the server down. The work is a prefill —
// the first, or the recompute over the prompt and the tokens generated so
// far after a preemption — or one decode step. A preemption abandons the
// step under way: the request waits to run again, then recomputes.
func (g *generation) next() bool {
	for {
		d := g.s.cfg.decodeStep()
		if g.prefill {
			d = g.s.cfg.Prefill(g.req.promptTokens + g.generated)
		}
		switch g.wait(d) {
		case stepGone:
			return false
		case stepDone:
			if g.token() {
				g.prefill = false
				return true
			}
		}
		if g.awaitRun() != nil {
			return false
		}
		g.prefill = true
	}
}

// aborted reports whether the server went down under the request.
func (g *generation) aborted() bool {
	select {
	case <-g.abort:
		return true
	default:
		return false
	}
}

// token records one generated token, and reports false, recording
// nothing, if the run it was generated in was preempted meanwhile.
func (g *generation) token() bool {
	s := g.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !g.e.granted || g.e.run != g.run {
		return false
	}
	if g.generated == 0 {
		s.counts.promptTokens += int64(g.req.promptTokens)
	}
	s.held++
	s.counts.generationTokens++
	g.e.held++
	g.e.context++
	g.generated++
	return true
}

// writeAnswer generates the answer and writes it to w.
func (g *generation) writeAnswer(w http.ResponseWriter) {
	s := g.s
	s.mu.Lock()
	s.nextID++
	g.id = fmt.Sprintf("%s-%s-%d", idPrefix[g.req.endpoint], s.cfg.Name, s.nextID)
	s.mu.Unlock()
	g.created = time.Now().Unix()

	if !g.next() { // the prefill's token
		g.fail(w, false)
		return
	}
	if g.req.stream {
		g.stream(w)
		return
	}
	for g.generated < g.output {
		if !g.next() {
			g.fail(w, false)
			return
		}
	}
	text := completionText(g.output)
	finish := g.finish.String()
	c := choice{Index: 0, FinishReason: &finish}
	if g.req.endpoint == completions {
		c.Text = &text
	} else {
		c.Message = &message{Role: "assistant", Content: text}
	}
	resp := g.header()
	resp.Choices = []choice{c}
	resp.Usage = g.usage()
	writeJSON(w, http.StatusOK, resp)
}

// fail ends a request that stopped early: 503 if the server went down
// before anything was written, a broken connection if after; nothing if
// the client left.
func (g *generation) fail(w http.ResponseWriter, written bool) {
	if !g.aborted() {
		return
	}
	if written {
		panic(http.ErrAbortHandler)
	}
	writeError(w, errDown)
}

var (
	idPrefix      = [...]string{completions: "cmpl", chatCompletions: "chatcmpl"}
	objectName    = [...]string{completions: "text_completion", chatCompletions: "chat.completion"}
	chunkObject   = [...]string{completions: "text_completion", chatCompletions: "chat.completion.chunk"}
	assistantRole = "assistant"
)

func (g *generation) header() response {
	return response{ID: g.id, Object: objectName[g.req.endpoint], Created: g.created, Model: g.s.cfg.Model}
}

func (g *generation) usage() *usage {
	return &usage{PromptTokens: g.req.promptTokens, CompletionTokens: g.generated,
		TotalTokens: g.req.promptTokens + g.generated}
}

// stream writes the answer as server-sent events, one token per chunk, the
// first token having been generated.
func (g *generation) stream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(c choice, u *usage) bool {
		resp := g.header()
		resp.Object = chunkObject[g.req.endpoint]
		if c != (choice{}) {
			resp.Choices = []choice{c}
		} else {
			resp.Choices = []choice{} // the usage chunk: no choice
		}
		resp.Usage = u
		if _, err := fmt.Fprintf(w, "data: %s\n\n", mustMarshal(resp)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	piece := func(i int) choice {
		text := tokenText(i)
		if g.req.endpoint == completions {
			return choice{Text: &text}
		}
		return choice{Delta: &delta{Content: &text}}
	}
	if g.req.endpoint == chatCompletions {
		empty := ""
		if !send(choice{Delta: &delta{Role: assistantRole, Content: &empty}}, nil) {
			return
		}
	}
	if !send(piece(0), nil) {
		return
	}
	for g.generated < g.output {
		if !g.next() {
			g.fail(w, true)
			return
		}
		if !send(piece(g.generated-1), nil) {
			return
		}
	}
	finish := g.finish.String()
	last := choice{FinishReason: &finish}
	if g.req.endpoint == completions {
		empty := ""
		last.Text = &empty
	} else {
		last.Delta = &delta{}
	}
	if !send(last, nil) {
		return
	}
	if g.req.includeUsage && !send(choice{}, g.usage()) {
		return
	}
	if _, err := io.WriteString(w, "data: [DONE]\n\n"); err == nil {
		_ = rc.Flush()
	}
}

// passage is what the model says, one word per token, over and over.
var passage = [...]string{
	"Flow", "control", "holds", "requests", "in", "priority", "bands", "until", "a", "model",
	"server", "has", "room,", "then", "lets", "the", "most", "urgent", "one", "go", "first.",
}

// tokenText is the text of the i-th generated token.
func tokenText(i int) string {
	w := passage[i%len(passage)]
	if i == 0 {
		return w
	}
	return " " + w
}

// completionText is the text of an answer of n tokens.
func completionText(n int) string {
	b := make([]byte, 0, n*8)
	for i := range n {
		b = append(b, tokenText(i)...)
	}
	return string(b)
}
