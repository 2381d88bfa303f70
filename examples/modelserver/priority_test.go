package modelserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
)

// completion is the body of a streamed completion of a prompt of words
// words and maxTokens tokens, with "priority" if prio is not nil.
func completion(words, maxTokens int, prio *int) string {
	p := ""
	if prio != nil {
		p = fmt.Sprintf(`,"priority":%d`, *prio)
	}
	return fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"stream":true%s}`, strings.TrimSpace(strings.Repeat("w ", words)), maxTokens, p)
}

func prio(p int) *int { return &p }

// streamedTokens returns the tokens of a streamed completion, in order.
func streamedTokens(t *testing.T, body string) []string {
	t.Helper()
	var tokens []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if len(chunk.Choices) == 1 && chunk.Choices[0].FinishReason == nil {
			tokens = append(tokens, chunk.Choices[0].Text)
		}
	}
	return tokens
}

// prefill is the default configuration's prefill of n prompt tokens.
func prefill(n int) time.Duration { return modelserver.Config{}.Prefill(n) }

// With one slot, a request of higher priority (lower value) overtakes
// the ones queued before it under the priority policy, and does not
// preempt a running request of a lower value than its own; first come,
// first served runs them in arrival order, and refuses a priority other
// than 0, as vLLM does.
func TestPriorityOvertakesTheQueue(t *testing.T) {
	service := modelserver.Config{}.ServiceTime(4, 10) // 55.16ms
	for _, tc := range []struct {
		policy string
		prios  [4]*int // a, b, c, h
		order  [4]int  // the place each runs in
	}{
		{modelserver.PolicyPriority, [4]*int{prio(-10), prio(5), prio(5), prio(0)}, [4]int{0, 2, 3, 1}},
		{modelserver.PolicyFCFS, [4]*int{nil, prio(0), nil, nil}, [4]int{0, 1, 2, 3}},
	} {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, modelserver.Config{Slots: 1, SchedulingPolicy: tc.policy})
			begin := time.Now()
			a := start(s, "/v1/completions", completion(4, 10, tc.prios[0]))
			synctest.Wait()
			time.Sleep(time.Millisecond)
			var calls []*call
			for _, p := range tc.prios[1:] {
				calls = append(calls, start(s, "/v1/completions", completion(4, 10, p)))
				synctest.Wait()
			}
			checkLoad(t, s, tc.policy+": all sent", modelserver.Load{Running: 1, Waiting: 3, KVCacheUsage: 4.0 / 16384})
			for _, c := range append([]*call{a}, calls...) {
				<-c.done
			}
			for i, c := range append([]*call{a}, calls...) {
				if want := time.Duration(tc.order[i])*service + prefill(4); c.w.Code != 200 || c.w.first.Sub(begin) != want {
					t.Errorf("%s: request %d: %d, first byte after %v, want 200 after %v (place %d)", tc.policy, i, c.w.Code, c.w.first.Sub(begin), want, tc.order[i])
				}
			}
			if got := metrics(t, s)[`vllm:num_preemptions_total{model_name="sim"}`]; got != 0 {
				t.Errorf("%s: %v preemptions, want none", tc.policy, got)
			}
		})
	}
	// First come, first served refuses a priority: nothing would honour it.
	s := mustNew(t, modelserver.Config{})
	refused := start(s, "/v1/completions", completion(4, 10, prio(3)))
	<-refused.done
	if refused.w.Code != 400 || !strings.Contains(refused.w.Body.String(), `"param":"priority"`) ||
		!strings.Contains(refused.w.Body.String(), "Priority scheduling is not enabled") {
		t.Errorf("priority 3 under fcfs: %d %s, want 400 naming the priority", refused.w.Code, refused.w.Body)
	}
}

// Under the priority policy a request that finds every slot taken by
// requests of a higher value preempts one: the preempted stream pauses,
// keeps what it sent, and when the other ends it prefills its prompt and
// its tokens again and goes on, sending no token twice. First come, first
// served preempts nothing: the later request waits.
func TestPriorityPreemptsARunningRequest(t *testing.T) {
	step := modelserver.DefaultDecodeStep
	for _, tc := range []struct {
		policy     string
		lo, hi     *int
		preempted  bool
		hiFirst    time.Duration // from h's arrival at 100ms
		loDone     time.Duration
		recomputed int // the prompt and the tokens a had at 100ms
	}{
		// a's tokens come at 10.16ms + k×5ms: 18 by 100ms. h runs
		// 100–155.16ms; a prefills 22 tokens (10.88ms), then its 81 left.
		{modelserver.PolicyPriority, prio(5), prio(-5), true, prefill(4),
			100*time.Millisecond + modelserver.Config{}.ServiceTime(4, 10) + prefill(22) + 81*step, 22},
		{modelserver.PolicyFCFS, nil, nil, false, modelserver.Config{}.ServiceTime(4, 100) - 100*time.Millisecond + prefill(4),
			modelserver.Config{}.ServiceTime(4, 100), 0},
	} {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, modelserver.Config{Slots: 1, SchedulingPolicy: tc.policy})
			begin := time.Now()
			a := start(s, "/v1/completions", completion(4, 100, tc.lo))
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			sentBefore := len(streamedTokens(t, a.w.sofar()))
			h := start(s, "/v1/completions", completion(4, 10, tc.hi))
			time.Sleep(20 * time.Millisecond)
			synctest.Wait()
			if tc.preempted {
				// h holds its prompt and 2 tokens (110.16 and 115.16ms);
				// a waits, holding nothing.
				checkLoad(t, s, "h running", modelserver.Load{Running: 1, Waiting: 1, KVCacheUsage: 6.0 / 16384})
				if n := len(streamedTokens(t, a.w.sofar())); n != sentBefore || n != 18 {
					t.Errorf("a sent %d tokens by 100ms and %d by 120ms, want 18 and no more while preempted", sentBefore, n)
				}
			}
			<-a.done
			if got := time.Since(begin); got != tc.loDone {
				t.Errorf("%s: a done after %v, want %v", tc.policy, got, tc.loDone)
			}
			<-h.done
			if got := h.w.first.Sub(begin.Add(100 * time.Millisecond)); got != tc.hiFirst {
				t.Errorf("%s: h's first byte %v after it came, want %v", tc.policy, got, tc.hiFirst)
			}
			tokens := streamedTokens(t, a.w.Body.String())
			if a.w.Code != 200 || h.w.Code != 200 || len(tokens) != 100 || a.w.first.Sub(begin) != prefill(4) {
				t.Errorf("%s: a %d with %d tokens, first byte after %v; h %d", tc.policy, a.w.Code, len(tokens), a.w.first.Sub(begin), h.w.Code)
			}
			// The passage is 21 words long: token i is word i mod 21.
			for i, tok := range tokens {
				if strings.TrimSpace(tok) != strings.TrimSpace(tokens[i%21]) || i > 0 && !strings.HasPrefix(tok, " ") {
					t.Fatalf("%s: a's token %d is %q: a token sent twice or lost", tc.policy, i, tok)
				}
			}
			m := metrics(t, s)
			preemptions := 0.0
			if tc.preempted {
				preemptions = 1
			}
			for name, want := range map[string]float64{
				`vllm:num_preemptions_total{model_name="sim"}`:                          preemptions,
				`vllm:generation_tokens_total{model_name="sim"}`:                        110,
				`vllm:prompt_tokens_total{model_name="sim"}`:                            8,
				`vllm:request_success_total{finished_reason="length",model_name="sim"}`: 2,
			} {
				if m[name] != want {
					t.Errorf("%s: %s = %v, want %v", tc.policy, name, m[name], want)
				}
			}
			checkLoad(t, s, "both done", modelserver.Load{})
		})
	}
}

// The KV-cache budget: under the priority policy a request whose prompt
// and output do not fit beside the running ones preempts one of a higher
// value although slots are free; the preempted request, when it runs
// again, holds its prompt and the tokens it kept.
func TestPriorityPreemptsForKVCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := modelserver.Config{Slots: 4, KVCacheTokens: 100, MaxModelLen: 100, SchedulingPolicy: modelserver.PolicyPriority}
		s := mustNew(t, cfg)
		begin := time.Now()
		lo := start(s, "/v1/completions", completion(20, 50, prio(1))) // reserves 70
		time.Sleep(20 * time.Millisecond)                              // 2 tokens: at 10.8 and 15.8ms
		synctest.Wait()
		hi := start(s, "/v1/completions", completion(10, 30, prio(0))) // 40 more do not fit
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		checkLoad(t, s, "hi prefilling", modelserver.Load{Running: 1, Waiting: 1, KVCacheUsage: 0.10})
		<-hi.done
		if got := time.Since(begin); got != 20*time.Millisecond+cfg.ServiceTime(10, 30) {
			t.Errorf("hi done after %v", got)
		}
		synctest.Wait()
		checkLoad(t, s, "lo recomputing", modelserver.Load{Running: 1, Waiting: 0, KVCacheUsage: 0.22})
		<-lo.done
		// lo prefills 22 tokens again and generates its 48 left: one with
		// the prefill, 47 decode steps.
		if got, want := time.Since(begin), 20*time.Millisecond+cfg.ServiceTime(10, 30)+cfg.Prefill(22)+47*modelserver.DefaultDecodeStep; got != want {
			t.Errorf("lo done after %v, want %v", got, want)
		}
		if got := metrics(t, s)[`vllm:num_preemptions_total{model_name="sim"}`]; got != 1 || lo.w.Code != 200 || len(streamedTokens(t, lo.w.Body.String())) != 50 {
			t.Errorf("%v preemptions, lo %d with %d tokens: want 1, 200 with 50", got, lo.w.Code, len(streamedTokens(t, lo.w.Body.String())))
		}
	})
}

// A client that goes away while its request is preempted leaves the
// queue, and is counted aborted.
func TestPreemptedClientGoesAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, modelserver.Config{Slots: 1, SchedulingPolicy: modelserver.PolicyPriority})
		lo := start(s, "/v1/completions", completion(4, 100, prio(1)))
		time.Sleep(50 * time.Millisecond)
		hi := start(s, "/v1/completions", completion(4, 100, prio(0)))
		synctest.Wait()
		checkLoad(t, s, "lo preempted", modelserver.Load{Running: 1, Waiting: 1, KVCacheUsage: 4.0 / 16384})
		lo.cancel()
		<-lo.done
		checkLoad(t, s, "lo gone", modelserver.Load{Running: 1, Waiting: 0, KVCacheUsage: 4.0 / 16384})
		<-hi.done
		m := metrics(t, s)
		if m[`vllm:request_success_total{finished_reason="abort",model_name="sim"}`] != 1 || m[`vllm:num_preemptions_total{model_name="sim"}`] != 1 {
			t.Errorf("metrics %v: want one abort, one preemption", m)
		}
		checkLoad(t, s, "done", modelserver.Load{})
	})
}

// A request's priority is an integer within 32 bits; anything else is
// refused with 400 naming the field.
func TestPriorityIsBounded(t *testing.T) {
	s := mustNew(t, modelserver.Config{SchedulingPolicy: modelserver.PolicyPriority, Speed: 1000})
	for body, want := range map[string]int{
		`{"prompt":"a","max_tokens":1,"priority":2147483647}`:  200,
		`{"prompt":"a","max_tokens":1,"priority":-2147483648}`: 200,
		`{"prompt":"a","max_tokens":1,"priority":2147483648}`:  400,
		`{"prompt":"a","max_tokens":1,"priority":-1e30}`:       400,
		`{"prompt":"a","max_tokens":1,"priority":1.5}`:         400,
		`{"prompt":"a","max_tokens":1,"priority":"high"}`:      400,
	} {
		c := start(s, "/v1/completions", body)
		<-c.done
		if c.w.Code != want {
			t.Errorf("%s: %d %s, want %d", body, c.w.Code, c.w.Body, want)
		}
	}
	if _, err := modelserver.New(modelserver.Config{SchedulingPolicy: "lifo"}); err == nil || !strings.Contains(err.Error(), "SchedulingPolicy") {
		t.Errorf("New with SchedulingPolicy lifo: %v, want an error naming the field", err)
	}
}
