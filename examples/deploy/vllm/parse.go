package vllm

import (
	"errors"
	"fmt"
	"io"
	"math"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The vLLM metric names a reading is made of.
const (
	// MetricWaiting is the gauge of requests queued inside the server.
	MetricWaiting = "vllm:num_requests_waiting"
	// MetricRunning is the gauge of requests in the running batch.
	MetricRunning = "vllm:num_requests_running"
	// MetricKVCacheUsage is the fraction (0 to 1) of KV-cache blocks in use.
	MetricKVCacheUsage = "vllm:kv_cache_usage_perc"
	// MetricGPUCacheUsage is the name vLLM gave [MetricKVCacheUsage] before
	// 0.9. It is read only when a page has no series of the new name.
	MetricGPUCacheUsage = "vllm:gpu_cache_usage_perc"
)

// Errors a page can fail with. Each is wrapped with the metric and value at
// fault.
var (
	// ErrMissingMetric means the page has no series of a metric a reading
	// needs: the server is not vLLM, or not yet serving. It is an error,
	// not a reading of zero, so that an unknown server never looks idle.
	ErrMissingMetric = errors.New("vllm: metric missing from page")
	// ErrInvalidValue means a series holds a value no vLLM server reports:
	// NaN, an infinity, a negative count or a KV-cache usage outside [0, 1].
	ErrInvalidValue = errors.New("vllm: invalid metric value")
	// ErrUnsupportedFormat means the page came in a format other than the
	// Prometheus text format.
	ErrUnsupportedFormat = errors.New("vllm: unsupported exposition format")
)

// maxCount bounds a summed request count, so that its conversion to int is
// exact on every platform.
const maxCount = math.MaxInt32

// Parse reads one /metrics page in the Prometheus text format and returns
// the reading it holds, with a zero ReadAt. The format is what
// [expfmt.ResponseFormat] makes of the response's headers; text (version
// 0.0.4, or no version) is read, and so is [expfmt.FmtUnknown], as text.
// Other formats are refused with [ErrUnsupportedFormat] without reading a
// byte: vLLM serves text unless asked otherwise, and the other decoders of
// expfmt v0.73 are not fit for a page from the network. Its delimited
// protobuf decoder allocates whatever length each message claims before
// reading it, and its OpenMetrics parser's time grows faster than the
// square of a line's length: BenchmarkLongLine measures more than a second
// and 390 MB for one 1,000-byte label value that the text parser reads in
// tens of microseconds.
//
// A server that runs several engines (data parallel) or models labels each
// series apart. Parse sums the waiting and running counts over every series,
// since they all queue in front of the same endpoint, and takes the largest
// KV-cache usage, since the fullest cache is the one that saturates first.
// Counts are rounded to the nearest integer.
//
// Metric and label names are checked as UTF-8 (the colons of vLLM's names
// are legal under every scheme), so a page never fails over another
// exporter's unusual name. Any syntax error fails the whole page.
func Parse(r io.Reader, format expfmt.Format) (Metrics, error) {
	var d decoder
	return d.decode(r, format)
}

// decoder parses pages one after another, reusing its text parser's buffers.
// It is not safe for concurrent use; each scrape loop has its own.
type decoder struct {
	text    expfmt.TextParser
	hasText bool
}

// checkFormat refuses every format but text; unknown ones are read as text.
func checkFormat(format expfmt.Format) error {
	if t := format.FormatType(); t != expfmt.TypeTextPlain && t != expfmt.TypeUnknown {
		return fmt.Errorf("%w: %s", ErrUnsupportedFormat, format)
	}
	return nil
}

func (d *decoder) decode(r io.Reader, format expfmt.Format) (Metrics, error) {
	if err := checkFormat(format); err != nil {
		return Metrics{}, err
	}
	if !d.hasText {
		// The zero TextParser has no validation scheme and panics on the
		// first name it checks.
		d.text = expfmt.NewTextParser(model.UTF8Validation)
		d.hasText = true
	}
	fams, err := d.text.TextToMetricFamilies(r)
	if err != nil {
		return Metrics{}, fmt.Errorf("vllm: decoding page: %w", err)
	}
	return extract(fams)
}

func extract(fams map[string]*dto.MetricFamily) (Metrics, error) {
	waiting, err := sumCount(fams, MetricWaiting)
	if err != nil {
		return Metrics{}, err
	}
	running, err := sumCount(fams, MetricRunning)
	if err != nil {
		return Metrics{}, err
	}
	kvName := MetricKVCacheUsage
	if len(fams[kvName].GetMetric()) == 0 {
		kvName = MetricGPUCacheUsage
	}
	if len(fams[kvName].GetMetric()) == 0 {
		return Metrics{}, fmt.Errorf("%w: neither %s nor %s", ErrMissingMetric, MetricKVCacheUsage, MetricGPUCacheUsage)
	}
	kv, err := maxFraction(fams[kvName])
	if err != nil {
		return Metrics{}, err
	}
	return Metrics{Waiting: waiting, Running: running, KVCache: kv}, nil
}

func sumCount(fams map[string]*dto.MetricFamily, name string) (int, error) {
	mf := fams[name]
	if len(mf.GetMetric()) == 0 {
		return 0, fmt.Errorf("%w: %s", ErrMissingMetric, name)
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		v, err := gaugeValue(mf, m)
		if err != nil {
			return 0, err
		}
		if math.IsNaN(v) || v < 0 || v > maxCount {
			return 0, fmt.Errorf("%w: %s is %v", ErrInvalidValue, name, v)
		}
		sum += v
	}
	sum = math.Round(sum)
	if sum > maxCount {
		return 0, fmt.Errorf("%w: %s sums to %v", ErrInvalidValue, name, sum)
	}
	return int(sum), nil
}

func maxFraction(mf *dto.MetricFamily) (float64, error) {
	var hi float64
	for _, m := range mf.GetMetric() {
		v, err := gaugeValue(mf, m)
		if err != nil {
			return 0, err
		}
		if math.IsNaN(v) || v < 0 || v > 1 {
			return 0, fmt.Errorf("%w: %s is %v, want a fraction in [0, 1]", ErrInvalidValue, mf.GetName(), v)
		}
		hi = max(hi, v)
	}
	return hi, nil
}

// gaugeValue reads a gauge, or an untyped sample (a page without TYPE
// lines, or an OpenMetrics "unknown").
func gaugeValue(mf *dto.MetricFamily, m *dto.Metric) (float64, error) {
	switch mf.GetType() {
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue(), nil
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue(), nil
	default:
		return 0, fmt.Errorf("%w: %s has type %s, want gauge", ErrInvalidValue, mf.GetName(), mf.GetType())
	}
}
