// Package vllm reads the load of vLLM model servers from their Prometheus
// /metrics pages and hands each reading to a saturation gate.
//
// A [Scraper] polls every endpoint on its own goroutine, so a slow or dead
// server never delays the readings of the others, and delivers
// [gate.Metrics] (requests waiting, requests running, KV-cache usage, the time
// the reading was taken) to a [Sink] such as a *gate.SaturationGate. A failed
// scrape delivers nothing: the endpoint's last reading ages until the gate
// finds it stale and fails closed. Failures are counted per endpoint
// ([Scraper.Stats]) and can be reported through a hook or a logger.
//
// [Parse] turns one page into a reading. It reads vllm:num_requests_waiting,
// vllm:num_requests_running and vllm:kv_cache_usage_perc, falling back to
// vllm:gpu_cache_usage_perc, the name vLLM used before 0.9. Pages are
// requested and decoded in the Prometheus text format, with
// github.com/prometheus/common/expfmt; other formats are refused (see
// [Parse] for why).
package vllm
