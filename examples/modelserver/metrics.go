package modelserver

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
)

// metricsContentType is the Prometheus text exposition format, version
// 0.0.4, which vLLM serves.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// serveMetrics writes the server's metrics under vLLM's names and types,
// every series labelled with model_name as vLLM labels them.
func (s *Server) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	load, counts := s.loadLocked(), s.counts
	s.mu.Unlock()

	var b bytes.Buffer
	model := `model_name="` + escapeLabel(s.cfg.Model) + `"`
	family := func(name, typ, help string) {
		b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
	}
	sample := func(name, labels string, v float64) {
		b.WriteString(name + "{" + labels + "} " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
	}
	family("vllm:num_requests_running", "gauge", "Requests running: holding a slot of the batch.")
	sample("vllm:num_requests_running", model, float64(load.Running))
	family("vllm:num_requests_waiting", "gauge", "Requests waiting in the server's queue for a slot.")
	sample("vllm:num_requests_waiting", model, float64(load.Waiting))
	family("vllm:kv_cache_usage_perc", "gauge", "Share of the KV cache in use, from 0 to 1.")
	sample("vllm:kv_cache_usage_perc", model, load.KVCacheUsage)
	family("vllm:num_preemptions_total", "counter", "Requests preempted by the scheduler, each time.")
	sample("vllm:num_preemptions_total", model, float64(counts.preemptions))
	family("vllm:prompt_tokens_total", "counter", "Prompt tokens prefilled.")
	sample("vllm:prompt_tokens_total", model, float64(counts.promptTokens))
	family("vllm:generation_tokens_total", "counter", "Tokens generated.")
	sample("vllm:generation_tokens_total", model, float64(counts.generationTokens))
	family("vllm:request_success_total", "counter", "Requests that ended, by finish reason.")
	for f, n := range counts.finished {
		sample("vllm:request_success_total", `finished_reason="`+finishReason(f).String()+`",`+model, float64(n))
	}

	w.Header().Set("Content-Type", metricsContentType)
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

// labelEscaper escapes a label value of the text format.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(v string) string { return labelEscaper.Replace(v) }
