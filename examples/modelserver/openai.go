package modelserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicegate/sluice/internal/openaierror"
)

// endpoint is one of the two generation routes.
type endpoint int

const (
	completions     endpoint = iota // POST /v1/completions
	chatCompletions                 // POST /v1/chat/completions
)

// wireRequest is the part of an OpenAI completion or chat completion
// request the server reads; every other field (temperature, stop, ...) is
// accepted and ignored.
type wireRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	IgnoreEOS bool   `json:"ignore_eos"` // vLLM's extension
	Priority  *int64 `json:"priority"`   // vLLM's extension
}

// request is a decoded, validated generation request.
type request struct {
	endpoint     endpoint
	model        string // as the client named it; "" when it did not
	promptTokens int
	maxTokens    int // explicit or the default
	stream       bool
	includeUsage bool
	ignoreEOS    bool
	priority     int // vLLM's "priority": lower runs first
}

// The bounds of a request's priority: a 32-bit integer. vLLM takes any
// integer; one this large orders no differently.
const (
	minPriority = -1 << 31
	maxPriority = 1<<31 - 1
)

// apiError is a refusal in OpenAI's error shape.
type apiError struct {
	status  int
	message string
	typ     string
	param   string // "" → null
	code    string // "" → null
}

func (e *apiError) Error() string { return e.message }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: 400, message: fmt.Sprintf(format, args...), typ: "invalid_request_error", param: param}
}

// decodeRequest decodes and checks the body of a request to ep against the
// limits of cfg (defaults applied). Every failure is an *apiError with
// status 400.
func decodeRequest(ep endpoint, body []byte, cfg Config) (request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return request{}, badRequest("", "the request body is not a valid JSON request: %v", err)
	}
	req := request{endpoint: ep, model: w.Model, stream: w.Stream, ignoreEOS: w.IgnoreEOS}
	var err error
	switch ep {
	case completions:
		if w.Prompt == nil || isNull(w.Prompt) {
			return request{}, badRequest("prompt", "prompt is required")
		}
		req.promptTokens, err = promptTokens(w.Prompt)
	default:
		if w.Messages == nil || isNull(w.Messages) {
			return request{}, badRequest("messages", "messages is required")
		}
		req.promptTokens, err = messagesTokens(w.Messages)
	}
	if err != nil {
		return request{}, err
	}
	if w.Priority != nil {
		switch p := *w.Priority; {
		case p < minPriority || p > maxPriority:
			return request{}, badRequest("priority", "priority %d: must be between %d and %d", p, minPriority, maxPriority)
		case p != 0 && cfg.SchedulingPolicy != PolicyPriority:
			return request{}, badRequest("priority", "Got priority %d but Priority scheduling is not enabled.", p)
		default:
			req.priority = int(p)
		}
	}
	if w.N != nil && *w.N != 1 {
		return request{}, badRequest("n", "n %d: this server generates one choice per request", *w.N)
	}
	if w.StreamOptions != nil && !w.Stream {
		return request{}, badRequest("stream_options", "stream_options can only be set when stream is true")
	}
	req.includeUsage = w.StreamOptions != nil && w.StreamOptions.IncludeUsage

	req.maxTokens = cfg.DefaultMaxTokens
	param := ""
	for _, limit := range []struct {
		name  string
		value *int
	}{{"max_tokens", w.MaxTokens}, {"max_completion_tokens", w.MaxCompletionTokens}} {
		if limit.value == nil {
			continue
		}
		if *limit.value < 1 {
			return request{}, badRequest(limit.name, "%s must be at least 1, got %d", limit.name, *limit.value)
		}
		// OpenAI deprecates max_tokens for max_completion_tokens; a request
		// with both gets the smaller.
		if param == "" || *limit.value < req.maxTokens {
			req.maxTokens, param = *limit.value, limit.name
		}
	}
	if param == "" {
		// Without a limit the answer gets what the context leaves, up to
		// the default.
		req.maxTokens = min(req.maxTokens, max(cfg.MaxModelLen-req.promptTokens, 1))
		param = "max_tokens"
	}
	if req.promptTokens >= cfg.MaxModelLen || req.maxTokens > cfg.MaxModelLen-req.promptTokens {
		return request{}, badRequest(param,
			"this model's maximum context length is %d tokens; the request asks for %d (%d in the prompt, %d in the completion)",
			cfg.MaxModelLen, req.promptTokens+req.maxTokens, req.promptTokens, req.maxTokens)
	}
	return req, nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// countTokens is the server's tokenizer: one token per word, split at white
// space. A simulation needs sizes that grow with the text, not real tokens.
func countTokens(s string) int { return len(strings.Fields(s)) }

// promptTokens counts the tokens of a completion prompt: a string, a list
// of token ids, or a list holding one string. A prompt without any token
// is refused, as is a batch of several prompts.
func promptTokens(raw json.RawMessage) (int, error) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if n := countTokens(text); n > 0 {
			return n, nil
		}
		return 0, badRequest("prompt", "prompt is empty")
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		if len(ids) > 0 {
			return len(ids), nil
		}
		return 0, badRequest("prompt", "prompt is empty")
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) != 1 {
			return 0, badRequest("prompt", "prompt holds %d prompts: this server takes one per request", len(texts))
		}
		return promptTokens(json.RawMessage(mustMarshal(texts[0])))
	}
	return 0, badRequest("prompt", "prompt must be a string, a list of token ids or a list of one string")
}

// tokensPerMessage is what a chat template adds around each message (its
// role and separators), and replyPriming what it adds to start the answer.
const (
	tokensPerMessage = 3
	replyPriming     = 3
)

// wireMessage is one chat message. Content is a string, a list of content
// parts, or null (an assistant message carrying tool calls).
type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// messagesTokens counts the tokens of a chat prompt: the words of every
// message's text, plus the chat template's own.
func messagesTokens(raw json.RawMessage) (int, error) {
	var msgs []wireMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return 0, badRequest("messages", "messages must be a list of messages: %v", err)
	}
	if len(msgs) == 0 {
		return 0, badRequest("messages", "messages is empty")
	}
	n := replyPriming
	for i, m := range msgs {
		if m.Role == "" {
			return 0, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d] has no role", i)
		}
		n += tokensPerMessage
		if m.Content == nil || isNull(m.Content) {
			continue
		}
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			n += countTokens(text)
			continue
		}
		var parts []contentPart
		if json.Unmarshal(m.Content, &parts) != nil {
			return 0, badRequest(fmt.Sprintf("messages[%d].content", i),
				"messages[%d].content must be a string or a list of content parts", i)
		}
		for _, p := range parts {
			n += countTokens(p.Text)
		}
	}
	return n, nil
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("modelserver: " + err.Error())
	}
	return b
}

// Response bodies. Field order follows OpenAI's.

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// delta is a streamed chat chunk's change: the role first, then pieces of
// content, then nothing beside the finish reason.
type delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type choice struct {
	Index        int       `json:"index"`
	Text         *string   `json:"text,omitempty"`    // completions
	Message      *message  `json:"message,omitempty"` // chat, whole
	Delta        *delta    `json:"delta,omitempty"`   // chat, streamed
	Logprobs     *struct{} `json:"logprobs"`          // always null
	FinishReason *string   `json:"finish_reason"`
}

type response struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage,omitempty"`
}

func (e *apiError) body() []byte {
	return openaierror.JSON(e.typ, e.message, e.param, e.code)
}
