package modelserver

import (
	"cmp"
	"fmt"
	"math"
	"time"
)

// Config describes one simulated model server. The zero value of every field
// takes the default its doc names, so Config{} is a usable server.
type Config struct {
	// Name identifies the server (in the ids of its responses, say);
	// default "modelserver".
	Name string
	// Model is the served model name: what GET /v1/models lists, what
	// responses and the model_name label of /metrics carry, and what a
	// request's "model" must be when it names one; default "sim".
	Model string

	// Slots is how many requests run at once, like vLLM's --max-num-seqs;
	// later ones wait in the server's own queue. Default 8.
	Slots int
	// SchedulingPolicy orders that queue, as vLLM's --scheduling-policy:
	// PolicyFCFS ("fcfs", the default), first come, first served; or
	// PolicyPriority ("priority"), by each request's body field
	// "priority" (an integer, default 0; lower runs first), ties first
	// come. Under the priority policy, when the head of the queue cannot
	// start — no free slot, or no room in the KV cache — and a running
	// request has a higher priority value, the running request of the
	// highest value (the latest arrival among ties) is preempted by
	// recompute, as vLLM preempts: it frees its slot and its KV cache,
	// keeps the tokens it has generated (a stream pauses, and sends no
	// token twice), and goes back to the queue in its order; when it runs
	// again it prefills its prompt and those tokens (PrefillBase +
	// PrefillPerToken × both) before its next token. This repeats until
	// the head starts or no running request has a higher value. Under
	// fcfs a request whose priority is not 0 is refused with 400, as
	// vLLM refuses it.
	SchedulingPolicy string
	// KVCacheTokens is the KV cache's capacity in tokens. A running
	// request holds its prompt's tokens and those it has generated so far;
	// KV-cache usage is the tokens held ÷ KVCacheTokens. A waiting request
	// starts only when a slot is free and the cache can also take its
	// prompt and its whole output (or, under the priority policy, when
	// preempting lower-priority requests makes that room), so a running
	// request never outgrows the cache (vLLM would preempt for that too)
	// and usage never exceeds 1. Default 16384; at least MaxModelLen.
	KVCacheTokens int
	// MaxModelLen is the context length: a request whose prompt tokens
	// plus max_tokens exceed it is refused with 400, as vLLM refuses it.
	// Default 4096.
	MaxModelLen int
	// DefaultMaxTokens is the output length of a request that sets neither
	// max_tokens nor max_completion_tokens (capped by what the context
	// leaves after its prompt); default 16, the default of OpenAI's
	// completions API, or MaxModelLen−1 if that is less.
	DefaultMaxTokens int
	// ReplyTokens, when positive, is the length of the model's natural
	// answer: a request allowed more tokens stops after ReplyTokens with
	// finish_reason "stop", unless it sets vLLM's "ignore_eos". When zero
	// (the default) every answer runs to its max_tokens and ends with
	// finish_reason "length", as in vLLM benchmarks run with ignore_eos.
	ReplyTokens int

	// The service time of a request that has a slot: a prefill of
	// PrefillBase + PrefillPerToken × prompt tokens, which yields the first
	// token, then one token per DecodeStep. Its time to first token is its
	// wait in the queue plus the prefill. Defaults 10ms, 40µs and 5ms.
	PrefillBase     time.Duration
	PrefillPerToken time.Duration
	DecodeStep      time.Duration
	// Speed divides every duration of the service time: 10 runs ten times
	// faster than the durations say. Default 1.
	Speed float64
}

// Defaults of [Config].
const (
	DefaultName             = "modelserver"
	DefaultModel            = "sim"
	DefaultSlots            = 8
	DefaultKVCacheTokens    = 16384
	DefaultMaxModelLen      = 4096
	DefaultDefaultMaxTokens = 16
	DefaultPrefillBase      = 10 * time.Millisecond
	DefaultPrefillPerToken  = 40 * time.Microsecond
	DefaultDecodeStep       = 5 * time.Millisecond
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.Name = cmp.Or(c.Name, DefaultName)
	c.Model = cmp.Or(c.Model, DefaultModel)
	c.Slots = cmp.Or(c.Slots, DefaultSlots)
	c.SchedulingPolicy = cmp.Or(c.SchedulingPolicy, PolicyFCFS)
	c.MaxModelLen = cmp.Or(c.MaxModelLen, DefaultMaxModelLen)
	if c.KVCacheTokens == 0 {
		c.KVCacheTokens = max(DefaultKVCacheTokens, c.MaxModelLen)
	}
	if c.DefaultMaxTokens == 0 {
		c.DefaultMaxTokens = min(DefaultDefaultMaxTokens, max(c.MaxModelLen-1, 1))
	}
	c.PrefillBase = cmp.Or(c.PrefillBase, DefaultPrefillBase)
	c.PrefillPerToken = cmp.Or(c.PrefillPerToken, DefaultPrefillPerToken)
	c.DecodeStep = cmp.Or(c.DecodeStep, DefaultDecodeStep)
	c.Speed = cmp.Or(c.Speed, 1)
	return c
}

// validate reports the first field of c (with defaults applied) that no
// server can run with.
func (c Config) validate() error {
	switch {
	case c.Slots < 1:
		return fmt.Errorf("modelserver: Slots %d: must be positive", c.Slots)
	case c.SchedulingPolicy != PolicyFCFS && c.SchedulingPolicy != PolicyPriority:
		return fmt.Errorf("modelserver: SchedulingPolicy %q: want %q or %q", c.SchedulingPolicy, PolicyFCFS, PolicyPriority)
	case c.MaxModelLen < 1:
		return fmt.Errorf("modelserver: MaxModelLen %d: must be positive", c.MaxModelLen)
	case c.KVCacheTokens < c.MaxModelLen:
		// Otherwise a request within the context length could never start.
		return fmt.Errorf("modelserver: KVCacheTokens %d: must be at least MaxModelLen (%d)", c.KVCacheTokens, c.MaxModelLen)
	case c.DefaultMaxTokens < 1 || c.DefaultMaxTokens >= c.MaxModelLen:
		return fmt.Errorf("modelserver: DefaultMaxTokens %d: must be between 1 and MaxModelLen−1 (%d)", c.DefaultMaxTokens, c.MaxModelLen-1)
	case c.ReplyTokens < 0:
		return fmt.Errorf("modelserver: ReplyTokens %d: must not be negative", c.ReplyTokens)
	case c.PrefillBase < 0 || c.PrefillPerToken < 0 || c.DecodeStep < 0:
		return fmt.Errorf("modelserver: PrefillBase %v, PrefillPerToken %v, DecodeStep %v: must not be negative",
			c.PrefillBase, c.PrefillPerToken, c.DecodeStep)
	case !(c.Speed > 0) || math.IsInf(c.Speed, 1):
		return fmt.Errorf("modelserver: Speed %v: must be positive and finite", c.Speed)
	}
	return nil
}

// Prefill is how long a server with this configuration takes to prefill a
// prompt of promptTokens tokens: the time from a slot to the first token.
func (c Config) Prefill(promptTokens int) time.Duration {
	c = c.withDefaults()
	return c.scale(c.PrefillBase + time.Duration(promptTokens)*c.PrefillPerToken)
}

// ServiceTime is how long a server with this configuration works on a
// request of promptTokens prompt tokens that generates outputTokens tokens
// (at least 1), from the slot to the last token: its prefill, then one
// decode step for each token after the first.
func (c Config) ServiceTime(promptTokens, outputTokens int) time.Duration {
	c = c.withDefaults()
	return c.Prefill(promptTokens) + time.Duration(max(outputTokens-1, 0))*c.decodeStep()
}

func (c Config) decodeStep() time.Duration { return c.scale(c.DecodeStep) }

func (c Config) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.Speed)
}
