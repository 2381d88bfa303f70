package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluicegate/sluice/headroom"
)

// Service time of a simulated model server: a prefill that grows with the
// prompt, then one token every decodeStep.
const (
	prefillBase     = 10 * time.Millisecond
	prefillPerToken = 40 * time.Microsecond
	decodeStep      = 5 * time.Millisecond
	maxPromptBytes  = 1 << 20
	maxOutputTokens = 512
)

// serviceTime is how long a model server works on a request with the given
// prompt and output sizes, in tokens.
func serviceTime(promptTokens, outputTokens int) time.Duration {
	return prefillBase + time.Duration(promptTokens)*prefillPerToken + time.Duration(outputTokens)*decodeStep
}

// completionRequest is the part of an OpenAI-style completion request the
// simulated server reads.
type completionRequest struct {
	Model     string `json:"model"`
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"`
}

// modelServer simulates one model server: it works on at most len(slots)
// requests at once (later ones wait for a slot), and streams its answer as
// server-sent events, one token per event.
type modelServer struct {
	slots chan struct{}
}

func newModelServer(concurrency int) *modelServer {
	return &modelServer{slots: make(chan struct{}, concurrency)}
}

func (m *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPromptBytes)).Decode(&req); err != nil {
		http.Error(w, "bad completion request: "+err.Error(), http.StatusBadRequest)
		return
	}
	promptTokens := len(strings.Fields(req.Prompt))
	outputTokens := min(max(req.MaxTokens, 1), maxOutputTokens)

	ctx := r.Context()
	select {
	case m.slots <- struct{}{}:
		defer func() { <-m.slots }()
	case <-ctx.Done():
		return
	}
	// A model server has no business advertising the router's headroom;
	// this one does anyway, and the gateway replaces it.
	w.Header().Set(headroom.HeaderName, "999")
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	if !sleep(ctx, prefillBase+time.Duration(promptTokens)*prefillPerToken) {
		return
	}
	rc := http.NewResponseController(w)
	for i := range outputTokens {
		fmt.Fprintf(w, "data: {\"index\":%d,\"text\":\"tok%d\"}\n\n", i, i)
		if rc.Flush() != nil || !sleep(ctx, decodeStep) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// sleep waits for d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
