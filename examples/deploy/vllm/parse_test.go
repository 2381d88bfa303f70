package vllm

import (
	"bytes"
	"errors"
	"math"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Metrics
	}{
		// vLLM v1 (0.10 and later): kv_cache_usage_perc, engine label.
		{"vllm-metrics.txt", Metrics{Waiting: 3, Running: 7, KVCache: 0.4127604166666667}},
		// vLLM before 0.9: gpu_cache_usage_perc only.
		{"vllm-metrics-v0.txt", Metrics{Waiting: 9, Running: 12, KVCache: 0.9315726290516206}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			page := readFixture(t, tc.file)
			for _, format := range []expfmt.Format{expfmt.FmtText, expfmt.FmtUnknown, "text/plain"} {
				got, err := Parse(bytes.NewReader(page), format)
				if err != nil {
					t.Fatalf("format %q: %v", format, err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("format %q: reading (-want +got):\n%s", format, diff)
				}
			}
		})
	}
}

// gauges builds a text page of gauges from name/labels/value lines.
func gauges(lines ...string) string {
	var b strings.Builder
	typed := map[string]bool{}
	for _, l := range lines {
		name := l[:strings.IndexAny(l, "{ ")]
		if !typed[name] {
			typed[name] = true
			b.WriteString("# TYPE " + name + " gauge\n")
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

func TestParseAggregation(t *testing.T) {
	for _, tc := range []struct {
		name string
		page string
		want Metrics
	}{{
		name: "both KV names: the new one wins",
		page: gauges(
			`vllm:num_requests_waiting{model_name="m"} 1`,
			`vllm:num_requests_running{model_name="m"} 2`,
			`vllm:gpu_cache_usage_perc{model_name="m"} 0.9`,
			`vllm:kv_cache_usage_perc{model_name="m"} 0.25`,
		),
		want: Metrics{Waiting: 1, Running: 2, KVCache: 0.25},
	}, {
		name: "two engines: counts add up, the fuller cache counts",
		page: gauges(
			`vllm:num_requests_waiting{engine="0",model_name="m"} 4`,
			`vllm:num_requests_waiting{engine="1",model_name="m"} 5`,
			`vllm:num_requests_running{engine="0",model_name="m"} 16`,
			`vllm:num_requests_running{engine="1",model_name="m"} 15`,
			`vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5`,
			`vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75`,
		),
		want: Metrics{Waiting: 9, Running: 31, KVCache: 0.75},
	}, {
		name: "two models on one server",
		page: gauges(
			`vllm:num_requests_waiting{model_name="a"} 0`,
			`vllm:num_requests_waiting{model_name="b"} 2`,
			`vllm:num_requests_running{model_name="a"} 3`,
			`vllm:num_requests_running{model_name="b"} 1`,
			`vllm:kv_cache_usage_perc{model_name="a"} 0.125`,
			`vllm:kv_cache_usage_perc{model_name="b"} 0`,
		),
		want: Metrics{Waiting: 2, Running: 4, KVCache: 0.125},
	}, {
		name: "no TYPE lines (untyped), no labels, counts rounded",
		page: "vllm:num_requests_waiting 2.6\nvllm:num_requests_running 0.4\nvllm:kv_cache_usage_perc 1\n",
		want: Metrics{Waiting: 3, Running: 0, KVCache: 1},
	}, {
		name: "an idle server",
		page: gauges(
			`vllm:num_requests_waiting{model_name="m"} 0.0`,
			`vllm:num_requests_running{model_name="m"} 0.0`,
			`vllm:kv_cache_usage_perc{model_name="m"} 0.0`,
		),
		want: Metrics{},
	}, {
		name: "another exporter's UTF-8 name does not fail the page",
		page: gauges(
			`{"http.server.active_requests"} 3`,
			`vllm:num_requests_waiting 1`,
			`vllm:num_requests_running 1`,
			`vllm:kv_cache_usage_perc 0.5`,
		),
		want: Metrics{Waiting: 1, Running: 1, KVCache: 0.5},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.page), expfmt.FmtText)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reading (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	fixture := string(readFixture(t, "vllm-metrics.txt"))
	complete := gauges(
		`vllm:num_requests_waiting{model_name="m"} 1`,
		`vllm:num_requests_running{model_name="m"} 2`,
		`vllm:kv_cache_usage_perc{model_name="m"} 0.5`,
	)
	for _, tc := range []struct {
		name   string
		page   string
		format expfmt.Format
		is     error  // the sentinel it wraps, if any
		says   string // a piece of its message
	}{
		{name: "empty page", page: "", is: ErrMissingMetric, says: MetricWaiting},
		{name: "not vLLM", page: "# TYPE up gauge\nup 1\n", is: ErrMissingMetric, says: MetricWaiting},
		{name: "no running", page: strings.ReplaceAll(complete, "num_requests_running", "num_requests_swapped"),
			is: ErrMissingMetric, says: MetricRunning},
		{name: "no KV usage under either name", page: strings.ReplaceAll(complete, "kv_cache", "cpu_cache"),
			is: ErrMissingMetric, says: MetricGPUCacheUsage},
		{name: "HTML error page", page: "<html><body>502 Bad Gateway</body></html>\n", says: "decoding page"},
		{name: "cut mid-line", page: fixture[:len(fixture)/2] + "vllm:num_requests_running{model_na", says: "decoding page"},
		{name: "no value", page: "vllm:num_requests_waiting{model_name=\"m\"}\n", says: "decoding page"},
		{name: "unterminated label value", page: "vllm:num_requests_waiting{model_name=\"m} 1\n", says: "decoding page"},
		{name: "bad value", page: "vllm:num_requests_waiting{model_name=\"m\"} three\n", says: "decoding page"},
		{name: "two TYPE lines", page: "# TYPE vllm:num_requests_waiting gauge\n" + complete, says: "decoding page"},
		{name: "NaN waiting", page: strings.Replace(complete, "} 1", "} NaN", 1), is: ErrInvalidValue, says: MetricWaiting},
		{name: "negative running", page: strings.Replace(complete, "} 2", "} -2", 1), is: ErrInvalidValue, says: MetricRunning},
		{name: "infinite waiting", page: strings.Replace(complete, "} 1", "} +Inf", 1), is: ErrInvalidValue},
		{name: "too many waiting", page: strings.Replace(complete, "} 1", "} 1e10", 1), is: ErrInvalidValue},
		{name: "KV usage a percentage", page: strings.Replace(complete, "0.5", "50", 1), is: ErrInvalidValue, says: "[0, 1]"},
		{name: "KV usage negative", page: strings.Replace(complete, "0.5", "-0.1", 1), is: ErrInvalidValue},
		{name: "KV usage NaN", page: strings.Replace(complete, "0.5", "NaN", 1), is: ErrInvalidValue},
		{name: "waiting typed as a counter", page: strings.Replace(complete, "num_requests_waiting gauge", "num_requests_waiting counter", 1),
			is: ErrInvalidValue, says: "want gauge"},
		{name: "delimited protobuf", page: "\x00", format: expfmt.FmtProtoDelim, is: ErrUnsupportedFormat},
		{name: "OpenMetrics 1.0", page: complete + "# EOF\n", format: expfmt.FmtOpenMetrics_1_0_0, is: ErrUnsupportedFormat},
		{name: "OpenMetrics 2.0", page: complete + "# EOF\n", format: expfmt.FmtOpenMetrics_2_0_0, is: ErrUnsupportedFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			format := tc.format
			if format == "" {
				format = expfmt.FmtText
			}
			got, err := Parse(strings.NewReader(tc.page), format)
			if err == nil {
				t.Fatalf("parsed without error: %+v", got)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %q", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if got != (Metrics{}) {
				t.Errorf("failed parse returned a reading: %+v", got)
			}
		})
	}
}

// A decoder reused after a failed page reads the next page afresh.
func TestDecoderReuse(t *testing.T) {
	var d decoder
	good := readFixture(t, "vllm-metrics.txt")
	for i, p := range [][]byte{good, []byte("vllm:num_requests_waiting{"), good, []byte("up 1\n"), good} {
		got, err := d.decode(bytes.NewReader(p), expfmt.FmtText)
		wantErr := i%2 == 1
		if (err != nil) != wantErr {
			t.Fatalf("page %d: error %v, want error: %t", i, err, wantErr)
		}
		if !wantErr && got != (Metrics{Waiting: 3, Running: 7, KVCache: 0.4127604166666667}) {
			t.Fatalf("page %d: reading %+v", i, got)
		}
	}
}

// FuzzParse feeds Parse arbitrary pages under arbitrary Content-Type
// headers: it must never panic, and a reading it returns must be in range.
func FuzzParse(f *testing.F) {
	text := string(expfmt.FmtText)
	f.Add(readFixture(f, "vllm-metrics.txt"), text)
	f.Add(readFixture(f, "vllm-metrics-v0.txt"), "text/plain")
	f.Add([]byte("vllm:num_requests_waiting 1\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.5\n"), "")
	f.Add([]byte("vllm:num_requests_waiting 1\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.5\n# EOF\n"),
		string(expfmt.FmtOpenMetrics_1_0_0))
	f.Add([]byte("# TYPE vllm:num_requests_waiting histogram\nvllm:num_requests_waiting_bucket{le=\"+Inf\"} NaN\n"), text)
	f.Add([]byte("\x08\x12\x04vllm"), string(expfmt.FmtProtoDelim))
	f.Fuzz(func(t *testing.T, data []byte, contentType string) {
		format := expfmt.ResponseFormat(http.Header{"Content-Type": {contentType}})
		m, err := Parse(bytes.NewReader(data), format)
		if err != nil {
			if m != (Metrics{}) {
				t.Fatalf("error %v came with a reading %+v", err, m)
			}
			return
		}
		if m.Waiting < 0 || m.Running < 0 || m.Waiting > math.MaxInt32 || m.Running > math.MaxInt32 ||
			!(m.KVCache >= 0 && m.KVCache <= 1) || !m.ReadAt.IsZero() {
			t.Fatalf("reading out of range: %+v", m)
		}
	})
}
