package flowhttp_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// prompt is the estimate of body without an output limit: its bytes ÷ 4,
// rounded up.
func prompt(body string) int64 { return (int64(len(body)) + 3) / 4 }

func TestEstimateTokens(t *testing.T) {
	const max = flowhttp.DefaultMaxTokens
	chat := `{"model":"m","messages":[{"role":"user","content":"Hello"}]`
	for _, c := range []struct {
		name string
		body string
		want int64 // with the default maximum
	}{
		{"empty body", ``, 1},
		{"not JSON", `not json at all`, prompt(`not json at all`)},
		{"no limit", chat + `}`, prompt(chat + `}`)},
		{"max_tokens", chat + `,"max_tokens":32}`, prompt(chat+`,"max_tokens":32}`) + 32},
		{"max_completion_tokens wins", chat + `,"max_tokens":32,"max_completion_tokens":16}`,
			prompt(chat+`,"max_tokens":32,"max_completion_tokens":16}`) + 16},
		{"max_completion_tokens wins, either order", chat + `,"max_completion_tokens":16,"max_tokens":32}`,
			prompt(chat+`,"max_completion_tokens":16,"max_tokens":32}`) + 16},
		{"null completion limit: max_tokens", chat + `,"max_completion_tokens":null,"max_tokens":32}`,
			prompt(chat+`,"max_completion_tokens":null,"max_tokens":32}`) + 32},
		// Defects 2 and 3: a client's max_tokens must not overflow the
		// cost, nor claim more than a model's context.
		{"MaxInt64", chat + `,"max_tokens":9223372036854775807}`, max},
		{"beyond int64", chat + `,"max_tokens":92233720368547758070}`, max},
		{"huge float", chat + `,"max_tokens":1e300}`, max},
		{"integral float", chat + `,"max_tokens":1e3}`, prompt(chat+`,"max_tokens":1e3}`) + 1000},
		{"integral float with a point", chat + `,"max_tokens":100.0}`, prompt(chat+`,"max_tokens":100.0}`) + 100},
		{"numeric string", chat + `,"max_tokens":"64"}`, prompt(chat+`,"max_tokens":"64"}`) + 64},
		{"huge numeric string", chat + `,"max_tokens":"9223372036854775808"}`, max},
		{"negative", chat + `,"max_tokens":-9223372036854775808}`, prompt(chat + `,"max_tokens":-9223372036854775808}`)},
		{"negative huge", chat + `,"max_tokens":-1e300}`, prompt(chat + `,"max_tokens":-1e300}`)},
		{"fraction", chat + `,"max_tokens":1.5}`, prompt(chat + `,"max_tokens":1.5}`)},
		{"hex string", chat + `,"max_tokens":"0x7fffffff"}`, prompt(chat + `,"max_tokens":"0x7fffffff"}`)},
		{"Inf string", chat + `,"max_tokens":"Inf"}`, prompt(chat + `,"max_tokens":"Inf"}`)},
		{"NaN string", chat + `,"max_tokens":"NaN"}`, prompt(chat + `,"max_tokens":"NaN"}`)},
		{"boolean", chat + `,"max_tokens":true}`, prompt(chat + `,"max_tokens":true}`)},
		{"object", chat + `,"max_tokens":{"n":5}}`, prompt(chat + `,"max_tokens":{"n":5}}`)},
		{"nested limit is not the request's", `{"extra":{"max_tokens":99999}}`, prompt(`{"extra":{"max_tokens":99999}}`)},
		{"keys match exactly", chat + `,"MAX_TOKENS":99999}`, prompt(chat + `,"MAX_TOKENS":99999}`)},
		{"the last of a repeated key", chat + `,"max_tokens":99999,"max_tokens":8}`, prompt(chat+`,"max_tokens":99999,"max_tokens":8}`) + 8},
		{"truncated", chat + `,"max_tokens":99999`, prompt(chat + `,"max_tokens":99999`)},
		{"two values", chat + `,"max_tokens":99999} {}`, prompt(chat + `,"max_tokens":99999} {}`)},
		{"trailing bytes", chat + `,"max_tokens":99999}x`, prompt(chat + `,"max_tokens":99999}x`)},
		{"an array", `[{"max_tokens":99999}]`, prompt(`[{"max_tokens":99999}]`)},
		{"deeply nested", `{"a":` + strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000) + `,"max_tokens":5}`,
			prompt(`{"a":`+strings.Repeat(`[`, 20000)+strings.Repeat(`]`, 20000)+`,"max_tokens":5}`) + 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, flowhttp.EstimateTokens([]byte(c.body), 0))
		})
	}
}

// The estimate is clamped to the maximum given, prompt and output
// together, and never below 1.
func TestEstimateTokensClamp(t *testing.T) {
	body := []byte(`{"prompt":"` + strings.Repeat("a", 4000) + `","max_tokens":500}`)
	require.EqualValues(t, prompt(string(body))+500, flowhttp.EstimateTokens(body, 0))
	require.EqualValues(t, 1024, flowhttp.EstimateTokens(body, 1024), "the configured maximum")
	require.EqualValues(t, 1, flowhttp.EstimateTokens(body, 1))
	require.EqualValues(t, 1, flowhttp.EstimateTokens(nil, 1024))
	require.EqualValues(t, math.MaxInt64, flowhttp.EstimateTokens([]byte(`{"max_tokens":9223372036854775807}`), math.MaxInt64),
		"with no clamp to speak of the sum saturates")
	huge := []byte(`{"max_tokens":1073741824}`)
	require.EqualValues(t, flowhttp.DefaultMaxTokens, flowhttp.EstimateTokens(huge, -1), "negative: the default")
	require.EqualValues(t, flowhttp.DefaultMaxTokens, flowhttp.EstimateTokens(huge, 0), "0: the default")
}

// The class property: for any output limit a client writes, as a number of
// any size and sign or as a string, the estimate is the prompt plus that
// limit when it is a count, clamped to [1, maximum]; it never overflows.
func TestEstimateTokensProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Int64().Draw(t, "maxTokens")
		maxTokens := rapid.Int64Range(-1, math.MaxInt64).Draw(t, "maximum")
		quoted := rapid.Bool().Draw(t, "quoted")
		v := fmt.Sprint(n)
		if quoted {
			v = `"` + v + `"`
		}
		text, _ := json.Marshal(rapid.String().Draw(t, "prompt"))
		body := fmt.Sprintf(`{"model":"m","prompt":%s,"max_tokens":%s}`, text, v)
		limit := maxTokens
		if limit <= 0 {
			limit = flowhttp.DefaultMaxTokens
		}
		want := prompt(body)
		if n > 0 {
			if n > math.MaxInt64-want {
				want = math.MaxInt64
			} else {
				want += n
			}
		}
		want = min(max(want, 1), limit)
		if got := flowhttp.EstimateTokens([]byte(body), maxTokens); got != want {
			t.Fatalf("EstimateTokens(%s, %d) = %d, want %d", body, maxTokens, got, want)
		}
	})
}

// FuzzEstimateTokens: whatever the body, the estimate is in
// [1, the maximum], at least the prompt's share (clamped), and the same
// every time.
func FuzzEstimateTokens(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"max_tokens":5}`, `{"max_tokens":9223372036854775807}`, `{"max_tokens":-1}`,
		`{"max_tokens":1e400}`, `{"max_tokens":"12"}`, `{"max_completion_tokens":3,"max_tokens":9}`,
		`[[[[[[`, `{"a":{"b":[1,2,{"max_tokens":4}]}}`, `{"max_tokens":0.5}`, "\xff\xfe",
	} {
		f.Add([]byte(seed), int64(0))
		f.Add([]byte(seed), int64(100))
	}
	f.Fuzz(func(t *testing.T, body []byte, maxTokens int64) {
		limit := maxTokens
		if limit <= 0 {
			limit = flowhttp.DefaultMaxTokens
		}
		got := flowhttp.EstimateTokens(body, maxTokens)
		if got < 1 || got > limit {
			t.Fatalf("EstimateTokens(%q, %d) = %d, outside [1, %d]", body, maxTokens, got, limit)
		}
		if floor := min(max(prompt(string(body)), 1), limit); got < floor {
			t.Fatalf("EstimateTokens(%q, %d) = %d, below the prompt's %d", body, maxTokens, got, floor)
		}
		if again := flowhttp.EstimateTokens(body, maxTokens); again != got {
			t.Fatalf("EstimateTokens(%q, %d) = %d, then %d", body, maxTokens, got, again)
		}
	})
}

// EstimateTokensAndModel is EstimateTokens and Model at once.
func TestEstimateTokensAndModel(t *testing.T) {
	for _, body := range []string{
		``, `not json`, `{"model":"m","max_tokens":32}`, `{"model":"m","max_completion_tokens":16,"max_tokens":32}`,
		`{"model":7,"max_tokens":"64"}`, `{"model":"a","model":"b","max_tokens":1e300}`, `[{"model":"m"}]`,
	} {
		for _, maxTokens := range []int64{0, 10, -1} {
			tokens, model := flowhttp.EstimateTokensAndModel([]byte(body), maxTokens)
			require.Equal(t, flowhttp.EstimateTokens([]byte(body), maxTokens), tokens, "body %s, maxTokens %d", body, maxTokens)
			require.Equal(t, flowhttp.Model([]byte(body)), model, "body %s", body)
		}
	}
}
