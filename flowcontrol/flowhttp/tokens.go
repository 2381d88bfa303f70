package flowhttp

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// DefaultMaxTokens is the largest estimate [EstimateTokens] returns when it
// is given no maximum of its own: 131,072 tokens (128 Ki), the context
// length of common current models (Llama 3.1, Qwen 2.5 and others). No
// request to such a model can use more, prompt and output together, so a
// larger estimate only lets one client's claim crowd out others'.
const DefaultMaxTokens = 1 << 17

// EstimateTokens estimates the tokens an OpenAI-style completion or chat
// completion request will use, from its body and without a tokenizer: the
// body's bytes ÷ 4, rounded up (roughly right for English text and the
// common BPE tokenizers; the JSON around the prompt adds little), plus the
// output it may generate — its top-level max_completion_tokens when that
// is given, else its max_tokens. The sum is clamped to [1, maxTokens]:
// maxTokens is the model's context length, or a configured maximum, and
// 0 or a negative value means [DefaultMaxTokens]. It is the cost a
// classifier gives a request ([Classification.Cost]); it has to rank
// demands, not bill them.
//
// The body is a client's, so nothing in it is trusted:
//   - an output limit is read as the model server (Python's JSON and
//     pydantic's lax integers) would: a JSON integer, an integral float
//     such as 100.0 or 1e3, or a string holding one; a value beyond
//     int64, such as 1e30 or 9223372036854775808, counts as the maximum,
//     and a negative, fractional or otherwise unusable one counts as no
//     limit;
//   - the keys are matched exactly (not in any letter case, as
//     encoding/json would), and when a key repeats its last value counts,
//     as for the model server;
//   - a body that is not one JSON object — not JSON, truncated, nested
//     deeper than encoding/json allows — costs its bytes ÷ 4 alone: the
//     model server refuses it, so it generates nothing.
//
// Every sum saturates, and the work is linear in the body's size, which
// the caller has bounded ([Config.MaxBodyBytes]).
func EstimateTokens(body []byte, maxTokens int64) int64 {
	return estimate(len(body), readFields(body).outputLimit(), maxTokens)
}

// EstimateTokensAndModel returns what [EstimateTokens] and [Model] return
// for body, from a single read of it, for a classifier that wants both.
func EstimateTokensAndModel(body []byte, maxTokens int64) (tokens int64, model string) {
	f := readFields(body)
	return estimate(len(body), f.outputLimit(), maxTokens), f.modelName()
}

// estimate is EstimateTokens for a body of size bytes that asks for
// output tokens.
func estimate(size int, output, maxTokens int64) int64 {
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	// size ≤ MaxInt, so the rounding up cannot overflow an int64.
	prompt := int64(size)/4 + min(int64(size)%4, 1)
	cost := satAdd(prompt, output)
	return min(max(cost, 1), maxTokens)
}

// tokenCount reads an output limit: a JSON number or a string holding
// one, integral and not negative, saturated at math.MaxInt64. ok is false
// for anything else, null included.
func tokenCount(raw json.RawMessage) (n int64, ok bool) {
	if len(raw) == 0 {
		return 0, false
	}
	if len(raw) <= 18 && raw[0] != '0' || len(raw) == 1 {
		// The common case, a plain integer of up to 18 digits (no sign,
		// fraction, exponent or leading zero), read without converting
		// the bytes to a string: it cannot overflow an int64.
		var n int64
		digits := true
		for _, c := range raw {
			if c < '0' || c > '9' {
				digits = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if digits {
			return n, true
		}
	}
	s := string(raw)
	if raw[0] == '"' {
		// A string must hold a JSON number too: strconv would also read
		// hexadecimal, underscores, "Inf" and "NaN".
		if json.Unmarshal(raw, &s) != nil {
			return 0, false
		}
		if s = strings.TrimSpace(s); !json.Valid([]byte(s)) || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
			return 0, false
		}
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, i >= 0
	} else if ne, isNum := err.(*strconv.NumError); isNum && ne.Err == strconv.ErrRange && s[0] != '-' {
		return math.MaxInt64, true
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !isRangeError(err), f < 0, f != math.Trunc(f):
		// Not a number (true, an object), or not a count.
		return 0, false
	case f >= math.MaxInt64:
		return math.MaxInt64, true // +Inf included
	}
	return int64(f), true
}

// isRangeError reports whether err is strconv's out-of-range error, which
// ParseFloat returns with ±Inf or 0 for a number it cannot represent.
func isRangeError(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// satAdd returns a + b for a, b ≥ 0, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
