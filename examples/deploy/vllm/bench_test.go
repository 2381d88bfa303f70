package vllm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// BenchmarkParse parses the realistic page (one vLLM engine: 50 KB, 530
// lines, 20 histograms). The baseline, impl=expfmt, is expfmt's text parser
// alone on the same bytes: the floor under any expfmt-based reader.
// impl=Parse is the exported one-shot function (a new parser each call);
// impl=reused is what each scrape goroutine runs, one parser reused.
func BenchmarkParse(b *testing.B) {
	for _, file := range []string{"vllm-metrics.txt", "vllm-metrics-v0.txt"} {
		pg := readFixture(b, file)
		var rd bytes.Reader
		b.Run("page="+file+"/impl=expfmt", func(b *testing.B) {
			b.SetBytes(int64(len(pg)))
			b.ReportAllocs()
			p := expfmt.NewTextParser(model.UTF8Validation)
			for b.Loop() {
				rd.Reset(pg)
				if _, err := p.TextToMetricFamilies(&rd); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("page="+file+"/impl=Parse", func(b *testing.B) {
			b.SetBytes(int64(len(pg)))
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(pg)
				if _, err := Parse(&rd, expfmt.FmtText); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("page="+file+"/impl=reused", func(b *testing.B) {
			b.SetBytes(int64(len(pg)))
			b.ReportAllocs()
			var d decoder
			for b.Loop() {
				rd.Reset(pg)
				if _, err := d.decode(&rd, expfmt.FmtText); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScrape is one scrape of the realistic page from an httptest
// server over loopback, as a scrape goroutine does it (keep-alive
// connection, reused buffers). The baseline, impl=get, is the same GET with
// the body read into a reused buffer and not parsed: what the transport
// alone costs. Server-side work runs in the same process and is counted.
func BenchmarkScrape(b *testing.B) {
	pg := readFixture(b, "vllm-metrics.txt")
	srv := httptest.NewServer(serveBytes(pg))
	defer srv.Close()
	s, err := New(Config{Targets: []string{srv.URL}, Sink: &recorder{}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.client.CloseIdleConnections()
	url := s.targets[0].url
	ctx := context.Background()

	b.Run("impl=get", func(b *testing.B) {
		b.SetBytes(int64(len(pg)))
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Accept", acceptHeader)
			resp, err := s.client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			_, err = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if err != nil || buf.Len() != len(pg) {
				b.Fatalf("read %d bytes: %v", buf.Len(), err)
			}
		}
	})
	b.Run("impl=scrape", func(b *testing.B) {
		b.SetBytes(int64(len(pg)))
		b.ReportAllocs()
		var p page
		for b.Loop() {
			if _, err := s.scrape(ctx, url, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLongLine parses a page holding one gauge whose label value is
// len bytes long, followed by the three vLLM gauges. It backs Parse's
// reason for refusing OpenMetrics: format=openmetrics is expfmt v0.73's
// OpenMetrics decoder; the baseline, format=text, is its text parser on the
// same page without the "# EOF" line.
func BenchmarkLongLine(b *testing.B) {
	for _, n := range []int{100, 300, 1000} {
		text := "# TYPE vllm:cache_config_info gauge\n" +
			`vllm:cache_config_info{note="` + strings.Repeat("x", n) + "\"} 1\n" +
			"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 1\n" +
			"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 2\n" +
			"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0.5\n"
		om := text + "# EOF\n"
		b.Run(fmt.Sprintf("len=%d/format=text", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p := expfmt.NewTextParser(model.UTF8Validation)
				fams, err := p.TextToMetricFamilies(strings.NewReader(text))
				if err != nil || len(fams) != 4 {
					b.Fatalf("%d families, %v", len(fams), err)
				}
			}
		})
		decodeOM := func(b *testing.B) {
			dec := expfmt.NewDecoder(strings.NewReader(om), expfmt.FmtOpenMetrics_1_0_0)
			fams := 0
			for {
				var mf dto.MetricFamily
				err := dec.Decode(&mf)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				fams++
			}
			if fams != 4 {
				b.Fatalf("%d families", fams)
			}
		}
		b.Run(fmt.Sprintf("len=%d/format=openmetrics", n), func(b *testing.B) {
			decodeOM(b) // the decoder compiles its grammar once per process; not timed
			b.ReportAllocs()
			for b.Loop() {
				decodeOM(b)
			}
		})
	}
}
