package modelserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/internal/testhttp"
)

// The wire schema as an OpenAI client reads it, written from OpenAI's API
// reference rather than from the server's own types, and decoded with
// unknown fields disallowed, so that a renamed or stray field fails.

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type wireChoice struct {
	Index   int     `json:"index"`
	Text    *string `json:"text"`
	Message *struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	Delta *struct {
		Role    *string `json:"role"`
		Content *string `json:"content"`
	} `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type wireCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage"`
}

func strictDecode(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	if dec.More() {
		t.Fatalf("trailing data after %s", data)
	}
}

// newServer starts cfg (fast unless it sets a speed) on loopback.
func newServer(t *testing.T, cfg modelserver.Config) (*modelserver.Server, string) {
	t.Helper()
	if cfg.Speed == 0 {
		cfg.Speed = 1000 // a decode step of 5µs
	}
	s := mustNew(t, cfg)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	data := testhttp.Body(t, resp, err)
	return resp, []byte(data)
}

func TestCompletion(t *testing.T) {
	_, url := newServer(t, modelserver.Config{})
	resp, data := post(t, url+"/v1/completions", `{"model":"sim","prompt":"say something about flow control","max_tokens":7,"temperature":0}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	var c wireCompletion
	strictDecode(t, data, &c)
	if !strings.HasPrefix(c.ID, "cmpl-") || c.Object != "text_completion" || c.Created == 0 || c.Model != "sim" {
		t.Errorf("id %q, object %q, created %d, model %q", c.ID, c.Object, c.Created, c.Model)
	}
	if len(c.Choices) != 1 {
		t.Fatalf("%d choices", len(c.Choices))
	}
	ch := c.Choices[0]
	if ch.Index != 0 || ch.Text == nil || ch.Message != nil || ch.Delta != nil || string(ch.Logprobs) != "null" {
		t.Errorf("choice %+v", ch)
	}
	if ch.Text != nil && len(strings.Fields(*ch.Text)) != 7 {
		t.Errorf("text %q: want 7 words, one per token", *ch.Text)
	}
	if ch.FinishReason == nil || *ch.FinishReason != "length" {
		t.Errorf("finish_reason %v, want length", ch.FinishReason)
	}
	if want := (wireUsage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12}); c.Usage == nil || *c.Usage != want {
		t.Errorf("usage %+v, want %+v", c.Usage, want)
	}
}

func TestChatCompletion(t *testing.T) {
	_, url := newServer(t, modelserver.Config{Model: "llama", ReplyTokens: 4})
	// Two messages of 2 and 3 words, the second in content parts: 5
	// words, 3 template tokens per message and 3 to prime the reply.
	body := `{"model":"llama","messages":[{"role":"system","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"what is"},{"type":"text","text":"headroom?"}]}],
		"max_completion_tokens":10}`
	resp, data := post(t, url+"/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var c wireCompletion
	strictDecode(t, data, &c)
	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Model != "llama" || len(c.Choices) != 1 {
		t.Fatalf("%+v", c)
	}
	ch := c.Choices[0]
	if ch.Message == nil || ch.Message.Role != "assistant" || len(strings.Fields(ch.Message.Content)) != 4 || ch.Text != nil {
		t.Errorf("choice %+v, message %+v: want the assistant's 4-token reply", ch, ch.Message)
	}
	// The model's natural answer (ReplyTokens) is shorter than the limit.
	if ch.FinishReason == nil || *ch.FinishReason != "stop" {
		t.Errorf("finish_reason %v, want stop", ch.FinishReason)
	}
	if want := (wireUsage{PromptTokens: 5 + 2*3 + 3, CompletionTokens: 4, TotalTokens: 18}); *c.Usage != want {
		t.Errorf("usage %+v, want %+v", *c.Usage, want)
	}
}

// The output length: max_tokens or max_completion_tokens (the smaller of
// both), the default without either, the natural reply unless ignore_eos.
func TestOutputLength(t *testing.T) {
	_, url := newServer(t, modelserver.Config{DefaultMaxTokens: 9, ReplyTokens: 6})
	for _, c := range []struct {
		body   string
		tokens int
		finish string
	}{
		{`{"prompt":"a","max_tokens":3}`, 3, "length"},
		{`{"prompt":"a","max_completion_tokens":2}`, 2, "length"},
		{`{"prompt":"a","max_tokens":5,"max_completion_tokens":4}`, 4, "length"},
		{`{"prompt":"a","max_tokens":4,"max_completion_tokens":5}`, 4, "length"},
		{`{"prompt":"a","max_tokens":null}`, 6, "stop"},
		{`{"prompt":"a","max_tokens":20}`, 6, "stop"},
		{`{"prompt":"a","max_tokens":20,"ignore_eos":true}`, 20, "length"},
		{`{"prompt":"a","ignore_eos":true}`, 9, "length"},
		{`{"prompt":[1,2,3],"max_tokens":2}`, 2, "length"},
		{`{"prompt":["one prompt"],"max_tokens":2}`, 2, "length"},
	} {
		resp, data := post(t, url+"/v1/completions", c.body)
		if resp.StatusCode != 200 {
			t.Errorf("%s: status %d: %s", c.body, resp.StatusCode, data)
			continue
		}
		var got wireCompletion
		strictDecode(t, data, &got)
		if got.Usage.CompletionTokens != c.tokens || *got.Choices[0].FinishReason != c.finish ||
			len(strings.Fields(*got.Choices[0].Text)) != c.tokens {
			t.Errorf("%s: %d tokens (%q), finish %s; want %d, %s", c.body, got.Usage.CompletionTokens,
				*got.Choices[0].Text, *got.Choices[0].FinishReason, c.tokens, c.finish)
		}
	}
}

// readEvents reads a server-sent event stream: the data of every event,
// checking that each is one "data: " line followed by a blank line.
func readEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var events []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		events = append(events, data)
		if !sc.Scan() || sc.Text() != "" {
			t.Fatalf("event %q is not followed by a blank line", data)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

func TestStreamedChat(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		_, url := newServer(t, modelserver.Config{})
		opts := ""
		if includeUsage {
			opts = `,"stream_options":{"include_usage":true}`
		}
		resp, data := post(t, url+"/v1/chat/completions",
			`{"model":"sim","messages":[{"role":"user","content":"hi there"}],"max_tokens":5,"stream":true`+opts+`}`)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		events := readEvents(t, bytes.NewReader(data))
		if len(events) == 0 || events[len(events)-1] != "[DONE]" {
			t.Fatalf("events %q: want [DONE] last", events)
		}
		var chunks []wireCompletion
		for _, e := range events[:len(events)-1] {
			var c wireCompletion
			strictDecode(t, []byte(e), &c)
			chunks = append(chunks, c)
		}
		// role, 5 content pieces, the finish, and the usage if asked.
		want := 1 + 5 + 1
		if includeUsage {
			want++
		}
		if len(chunks) != want {
			t.Fatalf("include_usage %v: %d chunks, want %d: %q", includeUsage, len(chunks), want, events)
		}
		var content strings.Builder
		for i, c := range chunks {
			if c.Object != "chat.completion.chunk" || c.ID != chunks[0].ID || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Model != "sim" {
				t.Errorf("chunk %d: id %q, object %q, model %q", i, c.ID, c.Object, c.Model)
			}
			if includeUsage && i == len(chunks)-1 {
				if len(c.Choices) != 0 || c.Usage == nil || *c.Usage != (wireUsage{PromptTokens: 2 + 3 + 3, CompletionTokens: 5, TotalTokens: 13}) {
					t.Errorf("usage chunk %+v: want no choice and the usage", c)
				}
				continue
			}
			if c.Usage != nil || len(c.Choices) != 1 || c.Choices[0].Delta == nil || c.Choices[0].Message != nil {
				t.Fatalf("chunk %d: %+v: want one delta and no usage", i, c)
			}
			d, finish := c.Choices[0].Delta, c.Choices[0].FinishReason
			switch {
			case i == 0:
				if d.Role == nil || *d.Role != "assistant" || finish != nil {
					t.Errorf("first chunk's delta %+v: want the assistant role", d)
				}
			case i <= 5:
				if d.Role != nil || d.Content == nil || *d.Content == "" || finish != nil {
					t.Errorf("chunk %d's delta %+v: want a content piece", i, d)
				} else {
					content.WriteString(*d.Content)
				}
			default:
				if d.Role != nil || d.Content != nil || finish == nil || *finish != "length" {
					t.Errorf("last chunk's delta %+v, finish %v: want an empty delta and length", d, finish)
				}
			}
		}
		// The pieces make the same answer as a whole response.
		_, whole := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi there"}],"max_tokens":5}`)
		var w wireCompletion
		strictDecode(t, whole, &w)
		if content.String() != w.Choices[0].Message.Content {
			t.Errorf("streamed %q, whole %q", content.String(), w.Choices[0].Message.Content)
		}
	}
}

func TestStreamedCompletion(t *testing.T) {
	_, url := newServer(t, modelserver.Config{})
	resp, data := post(t, url+"/v1/completions",
		`{"prompt":"one two three","max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readEvents(t, bytes.NewReader(data))
	if len(events) != 3+1+1+1 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q: want 3 tokens, the finish, the usage and [DONE]", events)
	}
	var text strings.Builder
	for i, e := range events[:5] {
		var c wireCompletion
		strictDecode(t, []byte(e), &c)
		if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") {
			t.Errorf("chunk %d: object %q, id %q", i, c.Object, c.ID)
		}
		switch {
		case i < 3:
			if len(c.Choices) != 1 || c.Choices[0].Text == nil || *c.Choices[0].Text == "" || c.Choices[0].FinishReason != nil || c.Usage != nil {
				t.Errorf("chunk %d: %+v: want a piece of text", i, c)
				continue
			}
			text.WriteString(*c.Choices[0].Text)
		case i == 3:
			if len(c.Choices) != 1 || c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != "length" {
				t.Errorf("finish chunk %+v", c)
			}
		default:
			if len(c.Choices) != 0 || c.Usage == nil || *c.Usage != (wireUsage{3, 3, 6}) {
				t.Errorf("usage chunk %+v", c)
			}
		}
	}
	if len(strings.Fields(text.String())) != 3 {
		t.Errorf("text %q: want 3 words", text.String())
	}
}

// checkError checks an OpenAI error body: every key present, message and
// type set.
func checkError(t *testing.T, what string, resp *http.Response, data []byte, status int, param string) {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: status %d, content type %q; want %d, application/json", what, resp.StatusCode, resp.Header.Get("Content-Type"), status)
	}
	var keys struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &keys); err != nil {
		t.Fatalf("%s: %s: %v", what, data, err)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := keys.Error[k]; !ok {
			t.Errorf("%s: error body %s lacks %q", what, data, k)
		}
	}
	var e testhttp.OpenAIError
	strictDecode(t, data, &e)
	if e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("%s: error %s: want a message and a type", what, data)
	}
	if param != "" && (e.Error.Param == nil || *e.Error.Param != param) {
		t.Errorf("%s: param %v, want %q", what, e.Error.Param, param)
	}
}

func TestBadRequests(t *testing.T) {
	_, url := newServer(t, modelserver.Config{MaxModelLen: 10})
	for _, c := range []struct {
		path, body string
		status     int
		param      string
	}{
		{"/v1/completions", `{"prompt":"a",`, 400, ""},
		{"/v1/completions", `not json`, 400, ""},
		{"/v1/completions", `{"prompt":"a"} {}`, 400, ""},
		{"/v1/completions", `{"prompt":42}`, 400, "prompt"},
		{"/v1/completions", `{"max_tokens":1}`, 400, "prompt"},
		{"/v1/completions", `{"prompt":"  "}`, 400, "prompt"},
		{"/v1/completions", `{"prompt":["a","b"]}`, 400, "prompt"},
		{"/v1/completions", `{"prompt":"a","max_tokens":0}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt":"a","max_completion_tokens":-1}`, 400, "max_completion_tokens"},
		{"/v1/completions", `{"prompt":"a","max_tokens":"many"}`, 400, ""},
		{"/v1/completions", `{"prompt":"a b c d e","max_tokens":6}`, 400, "max_tokens"}, // 11 > MaxModelLen 10
		{"/v1/completions", `{"prompt":"a b c d e f g h i j"}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt":"a","n":2}`, 400, "n"},
		{"/v1/completions", `{"prompt":"a","stream_options":{"include_usage":true}}`, 400, "stream_options"},
		{"/v1/completions", `{"model":"gpt-9","prompt":"a"}`, 404, "model"},
		{"/v1/chat/completions", `{"prompt":"a"}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages":[]}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages":[{"content":"a"}]}`, 400, "messages[0].role"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":7}]}`, 400, "messages[0].content"},
		{"/v1/embeddings", `{}`, 404, ""},
	} {
		resp, data := post(t, url+c.path, c.body)
		checkError(t, c.path+" "+c.body, resp, data, c.status, c.param)
	}
	resp, err := http.Get(url + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkError(t, "GET /v1/completions", resp, data, 405, "")
	if resp.Header.Get("Allow") != "POST" {
		t.Errorf("Allow %q", resp.Header.Get("Allow"))
	}
}

func get(t *testing.T, method, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	data := testhttp.Body(t, resp, err)
	return resp, []byte(data)
}

func TestModels(t *testing.T) {
	_, url := newServer(t, modelserver.Config{Model: "llama-3-8b", MaxModelLen: 2048})
	resp, data := get(t, "GET", url+"/v1/models")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string  `json:"id"`
			Object      string  `json:"object"`
			Created     int64   `json:"created"`
			OwnedBy     string  `json:"owned_by"`
			Root        string  `json:"root"`
			Parent      *string `json:"parent"`
			MaxModelLen int     `json:"max_model_len"`
		} `json:"data"`
	}
	strictDecode(t, data, &list)
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "llama-3-8b" || list.Data[0].Object != "model" ||
		list.Data[0].Created == 0 || list.Data[0].OwnedBy == "" || list.Data[0].MaxModelLen != 2048 {
		t.Errorf("%s", data)
	}
}

func TestHealthAndDown(t *testing.T) {
	s, url := newServer(t, modelserver.Config{})
	check := func(when string, want int) {
		t.Helper()
		for _, path := range []string{"/healthz", "/health"} {
			for _, method := range []string{"GET", "HEAD"} {
				if resp, _ := get(t, method, url+path); resp.StatusCode != want {
					t.Errorf("%s: %s %s: %d, want %d", when, method, path, resp.StatusCode, want)
				}
			}
		}
	}
	check("up", 200)
	s.SetDown(true)
	if !s.Load().Down {
		t.Error("Load().Down is false after SetDown(true)")
	}
	check("down", 503)
	resp, data := post(t, url+"/v1/completions", `{"prompt":"a"}`)
	checkError(t, "completion while down", resp, data, 503, "")
	resp, data = post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"stream":true}`)
	checkError(t, "streamed chat while down", resp, data, 503, "")
	for _, path := range []string{"/metrics", "/v1/models"} {
		if resp, _ := get(t, "GET", url+path); resp.StatusCode != 503 {
			t.Errorf("down: GET %s: %d, want 503", path, resp.StatusCode)
		}
	}
	s.SetDown(false)
	check("up again", 200)
	if resp, data := post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":2}`); resp.StatusCode != 200 {
		t.Errorf("up again: completion: %d %s", resp.StatusCode, data)
	}
}

// The metrics page: every family with HELP and TYPE, vLLM's names and
// types, the model_name label, counters that count.
func TestMetricsPage(t *testing.T) {
	_, url := newServer(t, modelserver.Config{Model: `m"1`})
	post(t, url+"/v1/completions", `{"model":"m\"1","prompt":"one two three four","max_tokens":6}`)
	post(t, url+"/v1/completions", `{"prompt":"one","max_tokens":2,"stream":true}`)
	resp, data := get(t, "GET", url+"/metrics")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	label := `model_name="m\"1"`
	for _, want := range []string{
		"# TYPE vllm:num_requests_running gauge",
		"vllm:num_requests_running{" + label + "} 0",
		"# TYPE vllm:num_requests_waiting gauge",
		"vllm:num_requests_waiting{" + label + "} 0",
		"# TYPE vllm:kv_cache_usage_perc gauge",
		"vllm:kv_cache_usage_perc{" + label + "} 0",
		"# TYPE vllm:prompt_tokens_total counter",
		"vllm:prompt_tokens_total{" + label + "} 5",
		"# TYPE vllm:generation_tokens_total counter",
		"vllm:generation_tokens_total{" + label + "} 8",
		"# TYPE vllm:request_success_total counter",
		`vllm:request_success_total{finished_reason="length",` + label + "} 2",
		`vllm:request_success_total{finished_reason="stop",` + label + "} 0",
		`vllm:request_success_total{finished_reason="abort",` + label + "} 0",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("metrics lack %q:\n%s", want, data)
		}
	}
	// Every family: HELP, then TYPE, then its samples.
	for i, line := range lines {
		name, ok := strings.CutPrefix(line, "# TYPE ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		if i == 0 || !strings.HasPrefix(lines[i-1], "# HELP "+name+" ") || i+1 == len(lines) || !strings.HasPrefix(lines[i+1], name+"{") {
			t.Errorf("family %s: want # HELP before # TYPE and a sample after", name)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []modelserver.Config{
		{Slots: -1},
		{MaxModelLen: 100, KVCacheTokens: 99},
		{MaxModelLen: -5},
		{DefaultMaxTokens: 4096},
		{ReplyTokens: -1},
		{DecodeStep: -1},
		{Speed: -2},
	} {
		if _, err := modelserver.New(cfg); err == nil || !strings.HasPrefix(err.Error(), "modelserver: ") {
			t.Errorf("New(%+v): %v, want a modelserver error", cfg, err)
		}
	}
	s := mustNew(t, modelserver.Config{MaxModelLen: 32768})
	// The cache takes at least one request of the whole context.
	if got := s.Config().KVCacheTokens; got != 32768 {
		t.Errorf("KVCacheTokens %d, want 32768", got)
	}
}

func TestServiceTime(t *testing.T) {
	cfg := modelserver.Config{}
	if got, want := cfg.ServiceTime(100, 10), 10_000_000+100*40_000+9*5_000_000; int64(got) != int64(want) {
		t.Errorf("ServiceTime(100, 10) = %v, want %v", got, want)
	}
	cfg.Speed = 10
	if got, want := cfg.Prefill(100), 1_400_000; int64(got) != int64(want) {
		t.Errorf("Prefill(100) at speed 10 = %v, want %v", got, want)
	}
}

// Over a real connection, a client that closes it mid-stream frees its
// slot: the next request runs.
func TestDisconnectFreesSlot(t *testing.T) {
	s, url := newServer(t, modelserver.Config{Slots: 1, Speed: 1})
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"a","max_tokens":2000,"stream":true}`)) // 10s of decoding
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if got := s.Load(); got.Running != 1 {
		t.Fatalf("streaming: Load() = %+v, want one running", got)
	}
	resp.Body.Close() // the transport closes a connection whose body was not read to its end
	// The next request gets the only slot once the server has seen the
	// close; it would wait 10s otherwise.
	deadline := time.Now().Add(5 * time.Second)
	next, data := post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":2}`)
	if next.StatusCode != 200 || time.Now().After(deadline) {
		t.Fatalf("next request: %d %s, done in time: %v", next.StatusCode, data, !time.Now().After(deadline))
	}
	if got := s.Load(); got != (modelserver.Load{}) {
		t.Errorf("after both: Load() = %+v", got)
	}
}
