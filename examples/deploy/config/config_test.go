package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/ordering"
)

// cmpOpts compares configurations: limits by value, policies by their type
// name and parameters.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b capacity.Limit) bool { return a == b }),
	cmp.Comparer(func(a, b ordering.Policy) bool { return policyString(a) == policyString(b) }),
	cmp.Comparer(func(a, b flowcontrol.Fairness) bool { return fairnessString(a) == fairnessString(b) }),
	cmpopts.IgnoreFields(flowcontrol.Config{}, "Gate", "Clock", "Observer"),
}

// defaultGateway is the gateway section of a file that sets none of it.
var defaultGateway = Gateway{Listen: DefaultListen, ScrapeInterval: DefaultScrapeInterval, ScrapeTimeout: DefaultScrapeTimeout, GracePeriod: DefaultGracePeriod, DrainDelay: DefaultDrainDelay}

func policyString(p ordering.Policy) string {
	if p == nil {
		return "<nil>"
	}
	return p.TypeName()
}

// fairnessString names a fairness policy and prints its parameters (a map
// prints sorted).
func fairnessString(f flowcontrol.Fairness) string {
	if f == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s %+v", f.TypeName(), f)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func ptr[T any](v T) *T { return &v }

func drr(quantum int64, weights map[string]int64) flowcontrol.Fairness {
	return flowcontrol.DeficitRoundRobin(flowcontrol.DRRConfig{Quantum: quantum, Weights: weights})
}

// mustNew checks that flowcontrol.New accepts the file's configuration,
// with the gate a binary runs it behind (see newController).
func mustNew(t *testing.T, f *File) {
	t.Helper()
	c, err := newController(f)
	if err != nil {
		t.Fatalf("flowcontrol.New refused the parsed configuration: %v", err)
	}
	c.Close()
}

// newController builds the file's controller as sluice-gateway does: with
// the file's gate, or llm-d-router's saturation gate when the file sets
// none, over one endpoint.
func newController(f *File) (*flowcontrol.FlowController, error) {
	g := f.Gate
	if !g.hasGate() {
		g.Saturation = &Saturation{
			QueueDepthThreshold:       gate.DefaultQueueDepthThreshold,
			KVCacheUtilThreshold:      gate.DefaultKVCacheUtilThreshold,
			MetricsStalenessThreshold: gate.DefaultMetricsStalenessThreshold,
		}
	}
	gs, err := g.Build(BuildOptions{Endpoints: 1})
	if err != nil {
		return nil, err
	}
	cfg := f.Flow
	cfg.Gate = gs.Gate
	return flowcontrol.New(cfg)
}

func TestSluiceFileMapsEveryField(t *testing.T) {
	f, err := Load("testdata/sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &File{
		Form: FormSluice,
		Gateway: Gateway{
			Listen:         "127.0.0.1:9090",
			Backends:       []*url.URL{mustURL(t, "http://127.0.0.1:8000"), mustURL(t, "http://127.0.0.1:8001/")},
			ScrapeInterval: 25 * time.Millisecond,
			ScrapeTimeout:  20 * time.Millisecond,
			GracePeriod:    20 * time.Second,
			DrainDelay:     2 * time.Second,
			PriorityHandoff: flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: -10, 0: 0, -5: 5},
				Min: -100, Max: 100},
		},
		Flow: flowcontrol.Config{
			RequestCapacity: capacity.Bounded(2000),
			ByteCapacity:    capacity.Bounded(512 << 20),
			CostCapacity:    capacity.Unbounded(),
			DefaultTTL:      30 * time.Second,
			NoEndpointsTTL:  10 * time.Second,
			NoDisplacement:  true,
			Eviction:        &flowcontrol.Eviction{MaxPerDecision: 4, Grace: 300 * time.Millisecond, Timeout: 5 * time.Second},
			Bands: []flowcontrol.BandConfig{
				{
					Priority:        10,
					RequestCapacity: capacity.Bounded(100),
					ByteCapacity:    capacity.Bounded(64 << 20),
					TTL:             5 * time.Second,
					Policy:          ordering.SLODeadline(),
					Fairness:        flowcontrol.RoundRobin(),
					Guarantee:       0.25,
				},
				{
					Priority:            0,
					RequestCapacity:     capacity.Bounded(1000),
					FlowRequestCapacity: capacity.Bounded(50),
					Policy:              ordering.FCFS(),
					Queue:               ordering.QueueFIFO,
					Fairness:            flowcontrol.GlobalStrict(),
				},
				{
					Priority:     -5,
					CostCapacity: capacity.Bounded(4_000_000),
					TTL:          10 * time.Minute,
					Policy:       ordering.EDF(),
					Queue:        ordering.QueueHeap,
					Fairness:     drr(512, map[string]int64{"tenant-a": 3, "tenant-b": 1}),
				},
			},
		},
		Gate: Gate{
			MaxInFlight: ptr(256),
			Saturation: &Saturation{
				QueueDepthThreshold:       8,
				KVCacheUtilThreshold:      0.9,
				MetricsStalenessThreshold: 150 * time.Millisecond,
			},
			Concurrency: &Concurrency{Mode: "hybrid", MaxConcurrency: 64, MaxTokenConcurrency: 500_000},
			UsageLimit:  &UsageLimit{Type: "priority-holdback-policy", Threshold: 1, Shape: "linear", Domain: "value", MinCeiling: 0.6, MaxCeiling: 1},
		},
	}
	if diff := cmp.Diff(want, f, cmpOpts); diff != "" {
		t.Errorf("Load(testdata/sluice.yaml) mismatch (-want +got):\n%s", diff)
	}
	mustNew(t, f)
}

func TestLLMDFileLoadsUnchanged(t *testing.T) {
	f, err := Load("testdata/llmd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	template := flowcontrol.BandConfig{
		RequestCapacity: capacity.Bounded(300),
		ByteCapacity:    capacity.Bounded(LLMDDefaultBandMaxBytes),
		Policy:          ordering.FCFS(),
		Fairness:        flowcontrol.RoundRobin(),
	}
	band0 := template
	want := &File{
		Form:    FormLLMD,
		Gateway: defaultGateway,
		Flow: flowcontrol.Config{
			RequestCapacity: capacity.Bounded(2000),
			ByteCapacity:    capacity.Bounded(8 << 30),
			DefaultTTL:      45 * time.Second,
			NoEndpointsTTL:  20 * time.Second,
			NoDisplacement:  true,
			Bands: []flowcontrol.BandConfig{
				{
					Priority:        100,
					RequestCapacity: capacity.Bounded(400),
					ByteCapacity:    capacity.Bounded(LLMDDefaultBandMaxBytes),
					Policy:          ordering.EDF(),
					Fairness:        flowcontrol.RoundRobin(),
				},
				{
					Priority:        10,
					RequestCapacity: capacity.Bounded(1500),
					ByteCapacity:    capacity.Bounded(2_000_000_000),
					Policy:          ordering.FCFS(),
					Fairness:        flowcontrol.GlobalStrict(),
				},
				{
					Priority:        -10,
					RequestCapacity: capacity.Bounded(50),
					ByteCapacity:    capacity.Bounded(LLMDDefaultBandMaxBytes),
					Policy:          ordering.FCFS(),
					Fairness:        flowcontrol.RoundRobin(),
				},
				band0, // from defaultPriorityBand: priority 0 is not listed
			},
		},
		DefaultBand: &template,
		DefaultNegativeBand: &flowcontrol.BandConfig{
			RequestCapacity: capacity.Bounded(20),
			ByteCapacity:    capacity.Bounded(100 << 20),
			Policy:          ordering.FCFS(),
			Fairness:        flowcontrol.GlobalStrict(),
		},
		Gate: Gate{Concurrency: &Concurrency{Mode: "tokens", MaxConcurrency: 128, MaxTokenConcurrency: 250_000, PerEndpoint: true}},
	}
	// Each warning's words are TestLLMDSamplesSayWhatIsLost's.
	wantWarnings := []string{"plugins[0]", "plugins[1]", "plugins[2]", "schedulingProfiles"}
	if got := warningPaths(f.Warnings); !slices.Equal(got, wantWarnings) {
		t.Errorf("Load(testdata/llmd.yaml): warnings at %q, want %q", got, wantWarnings)
	}
	want.Warnings = f.Warnings
	if diff := cmp.Diff(want, f, cmpOpts); diff != "" {
		t.Errorf("Load(testdata/llmd.yaml) mismatch (-want +got):\n%s", diff)
	}
	mustNew(t, f)

	// Priorities the file does not list: llm-d-router's templates.
	for _, tc := range []struct {
		priority int
		requests int64
	}{{5, 300}, {0, 300}, {-1, 20}, {-1000, 20}} {
		bc, ok := f.DynamicBand(tc.priority)
		if !ok || bc.Priority != tc.priority || bc.RequestCapacity != capacity.Bounded(tc.requests) {
			t.Errorf("DynamicBand(%d) = %+v, %v; want priority %d with %d requests", tc.priority, bc, ok, tc.priority, tc.requests)
		}
	}
}

func TestLLMDDefaults(t *testing.T) {
	// The deprecated top-level saturationDetector names a
	// utilization-detector plugin; flowControl is absent, so every
	// controller value is llm-d-router's default.
	f, err := Load("testdata/llmd-utilization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sys := flowcontrol.BandConfig{
		RequestCapacity: capacity.Bounded(LLMDDefaultBandMaxRequests),
		ByteCapacity:    capacity.Bounded(LLMDDefaultBandMaxBytes),
		Policy:          ordering.FCFS(),
		Fairness:        flowcontrol.GlobalStrict(),
	}
	wantFlow := flowcontrol.Config{
		Bands:          []flowcontrol.BandConfig{sys},
		DefaultTTL:     LLMDDefaultRequestTTL,
		NoDisplacement: true,
	}
	if diff := cmp.Diff(wantFlow, f.Flow, cmpOpts); diff != "" {
		t.Errorf("Flow mismatch (-want +got):\n%s", diff)
	}
	wantGate := Gate{Saturation: &Saturation{QueueDepthThreshold: 10, KVCacheUtilThreshold: 0.95, MetricsStalenessThreshold: 500 * time.Millisecond}}
	if diff := cmp.Diff(wantGate, f.Gate); diff != "" {
		t.Errorf("Gate mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&sys, f.DefaultBand, cmpOpts); diff != "" {
		t.Errorf("DefaultBand mismatch (-want +got):\n%s", diff)
	}
	if f.DefaultNegativeBand != nil {
		t.Errorf("DefaultNegativeBand = %+v, want nil", f.DefaultNegativeBand)
	}
	mustNew(t, f)
}

// TestFieldMapping checks one value at a time, in both forms, against the
// part of the result it sets.
func TestFieldMapping(t *testing.T) {
	sluiceBand := func(yaml string) string {
		return "controller:\n  bands:\n  - priority: 0\n    " + strings.ReplaceAll(yaml, "\n", "\n    ") + "\n"
	}
	llmdBand := func(yaml string) string {
		return "flowControl:\n  priorityBands:\n  - priority: 0\n    " + strings.ReplaceAll(yaml, "\n", "\n    ") + "\n"
	}
	band0 := func(f *File) any { return f.Flow.Bands[0] }
	tests := []struct {
		name string
		yaml string
		get  func(*File) any
		want any
	}{
		{"empty file", "", func(f *File) any { return f.Flow }, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{}}}},
		{"comment only", "# nothing\n", func(f *File) any { return f.Form }, FormSluice},
		{"controller without bands", "controller:\n  fallbackPriority: 3\n", func(f *File) any { return f.Flow.Bands }, []flowcontrol.BandConfig{{Priority: 3}}},
		{"global requests", "controller:\n  maxRequests: 10\n", func(f *File) any { return f.Flow.RequestCapacity }, capacity.Bounded(10)},
		{"global requests 0 is a bound", "controller:\n  maxRequests: 0\n", func(f *File) any { return f.Flow.RequestCapacity }, capacity.Bounded(0)},
		{"global bytes quantity", "controller:\n  maxBytes: 4Mi\n", func(f *File) any { return f.Flow.ByteCapacity }, capacity.Bounded(4 << 20)},
		{"global cost", "controller:\n  maxCost: 1e6\n", func(f *File) any { return f.Flow.CostCapacity }, capacity.Bounded(1_000_000)},
		{"unbounded", "controller:\n  maxBytes: unbounded\n", func(f *File) any { return f.Flow.ByteCapacity }, capacity.Unbounded()},
		{"null is unset", "controller:\n  maxBytes: null\n", func(f *File) any { return f.Flow.ByteCapacity }, capacity.Unbounded()},
		{"default ttl", "controller:\n  defaultTTL: 1m30s\n", func(f *File) any { return f.Flow.DefaultTTL }, 90 * time.Second},
		{"bare zero duration", "controller:\n  defaultTTL: 0\n", func(f *File) any { return f.Flow.DefaultTTL }, time.Duration(0)},
		{"no endpoints ttl", "controller:\n  noEndpointsTTL: 2m\n", func(f *File) any { return f.Flow.NoEndpointsTTL }, 2 * time.Minute},
		{"displacement on by default", "controller: {}\n", func(f *File) any { return f.Flow.NoDisplacement }, false},
		{"displacement off", "controller:\n  displacement: false\n", func(f *File) any { return f.Flow.NoDisplacement }, true},
		{"never promote", "controller:\n  neverPromote: true\n  bands: [{priority: 5}]\n", func(f *File) any { return f.Flow.NeverPromote }, true},
		{"fallback", "controller:\n  fallbackPriority: -1\n  bands: [{priority: 5}, {priority: -1}]\n", func(f *File) any { return f.Flow.FallbackPriority }, -1},
		{"band requests", sluiceBand("maxRequests: 7"), band0, flowcontrol.BandConfig{RequestCapacity: capacity.Bounded(7)}},
		{"band bytes", sluiceBand("maxBytes: 1.5Ki"), band0, flowcontrol.BandConfig{ByteCapacity: capacity.Bounded(1536)}},
		{"band cost", sluiceBand(`maxCost: "2k"`), band0, flowcontrol.BandConfig{CostCapacity: capacity.Bounded(2000)}},
		{"band flow requests", sluiceBand("maxFlowRequests: 3"), band0, flowcontrol.BandConfig{FlowRequestCapacity: capacity.Bounded(3)}},
		{"band ttl", sluiceBand("ttl: 250ms"), band0, flowcontrol.BandConfig{TTL: 250 * time.Millisecond}},
		{"band queue", sluiceBand("queue: heap"), band0, flowcontrol.BandConfig{Queue: ordering.QueueHeap}},
		{"drr adaptive", sluiceBand("fairness: deficit-round-robin-fairness-policy"), band0, flowcontrol.BandConfig{Fairness: drr(0, nil)}},
		{"drr weights only", sluiceBand("fairness: {type: deficit-round-robin-fairness-policy, weights: {a: 2}}"), band0,
			flowcontrol.BandConfig{Fairness: drr(0, map[string]int64{"a": 2})}},
		{"gate max in flight 0", "gate:\n  maxInFlight: 0\n", func(f *File) any { return *f.Gate.MaxInFlight }, 0},
		{"gate saturation defaults", "gate:\n  saturation: {}\n", func(f *File) any { return *f.Gate.Saturation },
			Saturation{QueueDepthThreshold: 5, KVCacheUtilThreshold: 0.8, MetricsStalenessThreshold: 200 * time.Millisecond}},
		{"gate concurrency defaults", "gate:\n  concurrency: {}\n", func(f *File) any { return *f.Gate.Concurrency },
			Concurrency{Mode: "requests", MaxConcurrency: 100, MaxTokenConcurrency: 1_000_000}},
		{"kv threshold as integer", "gate:\n  saturation: {kvCacheUtilThreshold: 1}\n", func(f *File) any { return f.Gate.Saturation.KVCacheUtilThreshold }, 1.0},
		{"no gate", "controller: {}\n", func(f *File) any { return f.Gate }, Gate{}},
		{"gateway defaults", "gateway: {}\n", func(f *File) any { return f.Gateway }, defaultGateway},
		{"gateway grace 0", "gateway: {gracePeriod: 0s}\n", func(f *File) any { return f.Gateway.GracePeriod }, time.Duration(0)},
		{"gateway drain 0", "gateway: {drainDelay: 0}\n", func(f *File) any { return f.Gateway.DrainDelay }, time.Duration(0)},
		{"gateway drain", "gateway: {drainDelay: 1500ms}\n", func(f *File) any { return f.Gateway.DrainDelay }, 1500 * time.Millisecond},
		{"priority hand-off off by default", "gateway: {}\n", func(f *File) any { return f.Gateway.PriorityHandoff }, flowhttp.PriorityHandoff{}},
		{"priority hand-off true", "gateway: {priorityHandoff: true}\n", func(f *File) any { return f.Gateway.PriorityHandoff },
			flowhttp.PriorityHandoff{Enabled: true}},
		{"priority hand-off mapping", "gateway:\n  priorityHandoff:\n    enabled: true\n    map: {10: 0, 0: 5, -1: 9}\n    min: 0\n    max: 9\n",
			func(f *File) any { return f.Gateway.PriorityHandoff },
			flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: 0, 0: 5, -1: 9}, Min: 0, Max: 9}},
		{"priority hand-off map kept while off", "gateway:\n  priorityHandoff: {enabled: false, map: {1: -1}}\n",
			func(f *File) any { return f.Gateway.PriorityHandoff }, flowhttp.PriorityHandoff{Map: map[int]int64{1: -1}}},
		{"priority hand-off with llm-d's form", "gateway: {priorityHandoff: {enabled: true}}\nflowControl: {}\n",
			func(f *File) any { return f.Gateway.PriorityHandoff }, flowhttp.PriorityHandoff{Enabled: true}},

		// llm-d-router's form.
		{"llm-d band requests default", llmdBand("maxRequests: 0"), func(f *File) any { return f.Flow.Bands[0].RequestCapacity }, capacity.Bounded(5000)},
		{"llm-d band bytes quantity", llmdBand(`maxBytes: "500M"`), func(f *File) any { return f.Flow.Bands[0].ByteCapacity }, capacity.Bounded(500_000_000)},
		{"llm-d band requests number", llmdBand("maxRequests: 12"), func(f *File) any { return f.Flow.Bands[0].RequestCapacity }, capacity.Bounded(12)},
		{"llm-d global 0 is unbounded", "flowControl:\n  maxRequests: \"0\"\n  maxBytes: 0\n", func(f *File) any { return [2]capacity.Limit{f.Flow.RequestCapacity, f.Flow.ByteCapacity} },
			[2]capacity.Limit{capacity.Unbounded(), capacity.Unbounded()}},
		{"llm-d global fraction rounds up", "flowControl:\n  maxRequests: 0.5\n", func(f *File) any { return f.Flow.RequestCapacity }, capacity.Bounded(1)},
		{"llm-d ttl 0s is none", "flowControl:\n  defaultRequestTTL: 0s\n", func(f *File) any { return f.Flow.DefaultTTL }, time.Duration(0)},
		{"llm-d no-endpoint ttl follows", "flowControl:\n  defaultRequestTTL: 10s\n", func(f *File) any { return f.Flow.NoEndpointsTTL }, time.Duration(0)},
		{"llm-d no-endpoint ttl longer", "flowControl:\n  defaultRequestTTL: 10s\n  noEndpointRequestTTL: 5m\n", func(f *File) any { return f.Flow.NoEndpointsTTL }, time.Duration(0)},
		{"llm-d lists band 0", llmdBand("maxRequests: 12"), func(f *File) any { return len(f.Flow.Bands) }, 1},
		{"llm-d default gate", "kind: EndpointPickerConfig\n", func(f *File) any { return f.Gate },
			Gate{Saturation: &Saturation{QueueDepthThreshold: 5, KVCacheUtilThreshold: 0.8, MetricsStalenessThreshold: 200 * time.Millisecond}}},
		{"llm-d detector by type", "flowControl:\n  saturationDetector: {pluginRef: concurrency-detector}\n", func(f *File) any { return *f.Gate.Concurrency },
			Concurrency{Mode: "requests", MaxConcurrency: 100, MaxTokenConcurrency: 1_000_000, PerEndpoint: true}},
		{"gate concurrency per endpoint", "gate:\n  concurrency: {perEndpoint: true, maxConcurrency: 3}\n", func(f *File) any { return *f.Gate.Concurrency },
			Concurrency{Mode: "requests", MaxConcurrency: 3, MaxTokenConcurrency: 1_000_000, PerEndpoint: true}},
		{"llm-d new detector wins", "saturationDetector: {pluginRef: utilization-detector}\nflowControl:\n  saturationDetector: {pluginRef: concurrency-detector}\n",
			func(f *File) any { return f.Gate.Saturation == nil && f.Gate.Concurrency != nil }, true},
		{"llm-d gate section replaces detector", "flowControl: {}\ngate: {maxInFlight: 4}\n", func(f *File) any { return f.Gate }, Gate{MaxInFlight: ptr(4)}},
		{"llm-d static usage limit", "plugins: [{type: static-usage-limit-policy, parameters: {threshold: 1.0}}]\nflowControl: {usageLimitPolicyPluginRef: static-usage-limit-policy}\n",
			func(f *File) any { return *f.Gate.UsageLimit }, UsageLimit{Type: "static-usage-limit-policy", Threshold: 1, MaxCeiling: 1}},
		{"llm-d static usage limit below 1", "plugins: [{type: static-usage-limit-policy, parameters: {threshold: 0.7}}]\nflowControl: {usageLimitPolicyPluginRef: static-usage-limit-policy}\n",
			func(f *File) any { return f.Gate.UsageLimit.Threshold }, 0.7},
		{"llm-d static usage limit by type", "flowControl: {usageLimitPolicyPluginRef: static-usage-limit-policy}\n",
			func(f *File) any { return f.Gate.UsageLimit.Threshold }, 1.0},
		{"llm-d soft-reflective ceiling", "plugins: [{type: soft-reflective-ceiling-policy, parameters: {}}]\nflowControl: {usageLimitPolicyPluginRef: soft-reflective-ceiling-policy}\n",
			func(f *File) any { return *f.Gate.UsageLimit }, UsageLimit{Type: "soft-reflective-ceiling-policy", Threshold: 1, MaxCeiling: 1}},
		{"llm-d priority holdback", "plugins: [{name: h, type: priority-holdback-policy, parameters: {shape: linear, domain: value, minCeiling: 0.3, maxCeiling: 0.9}}]\nflowControl: {usageLimitPolicyPluginRef: h}\n",
			func(f *File) any { return *f.Gate.UsageLimit }, UsageLimit{Type: "priority-holdback-policy", Threshold: 1, Shape: "linear", Domain: "value", MinCeiling: 0.3, MaxCeiling: 0.9}},
		{"llm-d usage limit on the gate section's gate", "flowControl: {usageLimitPolicyPluginRef: soft-reflective-ceiling-policy}\ngate: {maxInFlight: 4}\n",
			func(f *File) any { return f.Gate.String() }, "[maxInFlight 4 usageLimit (soft-reflective-ceiling-policy)]"},
		{"gate usage limit by name", "gate:\n  maxInFlight: 8\n  usageLimit: soft-reflective-ceiling-policy\n",
			func(f *File) any { return f.Gate.UsageLimit.Type }, "soft-reflective-ceiling-policy"},
		{"gate usage limit holdback", "gate:\n  maxInFlight: 8\n  usageLimit: {type: priority-holdback-policy, minCeiling: 0.25}\n",
			func(f *File) any { return *f.Gate.UsageLimit }, UsageLimit{Type: "priority-holdback-policy", Threshold: 1, MinCeiling: 0.25, MaxCeiling: 1}},
		{"gate usage limit static", "gate:\n  concurrency: {}\n  usageLimit: {type: static-usage-limit-policy, threshold: 0.5}\n",
			func(f *File) any { return f.Gate.UsageLimit.Threshold }, 0.5},
		{"llm-d drr plugin with parameters", "plugins:\n- {name: d, type: deficit-round-robin-fairness-policy, parameters: {quantum: 64, weights: {x: 5}}}\n" + llmdBand("fairnessPolicyRef: d"),
			func(f *File) any { return f.Flow.Bands[0].Fairness }, drr(64, map[string]int64{"x": 5})},
		{"llm-d feature gate false", "featureGates: [\"flowControl=false\"]\n", func(f *File) any { return f.Form }, FormLLMD},
		{"llm-d template priority ignored", "flowControl:\n  defaultPriorityBand: {priority: 7, maxRequests: 8}\n", func(f *File) any { return f.Flow.Bands[0].Priority }, 0},
		{"llm-d gateway", "gateway: {listen: \"[::1]:9000\"}\nflowControl: {}\n", func(f *File) any { return f.Gateway.Listen }, "[::1]:9000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse:\n%s\nerror: %v", tc.yaml, err)
			}
			if diff := cmp.Diff(tc.want, tc.get(f), cmpOpts); diff != "" {
				t.Errorf("Parse:\n%s\nmismatch (-want +got):\n%s", tc.yaml, diff)
			}
			mustNew(t, f)
		})
	}
}

func TestAliases(t *testing.T) {
	f, err := Parse([]byte("x-band: &b\n  maxRequests: 9\n"))
	if err == nil {
		t.Fatalf("an unknown top-level key parsed: %+v", f)
	}
	f, err = Parse([]byte(`
controller:
  bands:
  - priority: 1
    maxRequests: &n 9
    fairness: &drr {type: deficit-round-robin-fairness-policy, quantum: 3}
  - priority: 0
    maxRequests: *n
    fairness: *drr
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []flowcontrol.BandConfig{
		{Priority: 1, RequestCapacity: capacity.Bounded(9), Fairness: drr(3, nil)},
		{Priority: 0, RequestCapacity: capacity.Bounded(9), Fairness: drr(3, nil)},
	}
	if diff := cmp.Diff(want, f.Flow.Bands, cmpOpts); diff != "" {
		t.Errorf("bands mismatch (-want +got):\n%s", diff)
	}
}

// wantBandZero parses each of docs and reports an error unless it
// parses, flowcontrol.New accepts it, and what (ordering, fairness) of
// its first band, as of reads it, is the policy name.
func wantBandZero(t *testing.T, what, name string, of func(flowcontrol.BandConfig) string, docs ...string) {
	t.Helper()
	for _, doc := range docs {
		f, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("Parse:\n%s\nerror: %v", doc, err)
			continue
		}
		if got := of(f.Flow.Bands[0]); got != name {
			t.Errorf("Parse:\n%s\n%s %q, want %q", doc, what, got, name)
		}
		mustNew(t, f)
	}
}

// TestPolicyNamesRoundTrip gives every policy name in both forms and reads
// back the same name from the built policy.
func TestPolicyNamesRoundTrip(t *testing.T) {
	for _, name := range OrderingPolicies {
		p, err := ordering.PolicyByName(name)
		if err != nil || p.TypeName() != name {
			t.Errorf("ordering.PolicyByName(%q) = %v, %v", name, p, err)
		}
		wantBandZero(t, "ordering", name, func(b flowcontrol.BandConfig) string { return b.Policy.TypeName() },
			"controller:\n  bands:\n  - priority: 0\n    ordering: "+name+"\n",
			"flowControl:\n  priorityBands:\n  - priority: 0\n    orderingPolicyRef: "+name+"\n",
			"plugins: [{name: mine, type: "+name+"}]\nflowControl:\n  priorityBands:\n  - priority: 0\n    orderingPolicyRef: mine\n",
		)
	}
	for _, name := range FairnessPolicies {
		fp, err := flowcontrol.FairnessByName(name)
		if err != nil || fp.TypeName() != name {
			t.Errorf("flowcontrol.FairnessByName(%q) = %v, %v", name, fp, err)
		}
		wantBandZero(t, "fairness", name, func(b flowcontrol.BandConfig) string { return b.Fairness.TypeName() },
			"controller:\n  bands:\n  - priority: 0\n    fairness: "+name+"\n",
			"controller:\n  bands:\n  - priority: 0\n    fairness: {type: "+name+"}\n",
			"flowControl:\n  priorityBands:\n  - priority: 0\n    fairnessPolicyRef: "+name+"\n",
			"plugins: [{name: mine, type: "+name+"}]\nflowControl:\n  defaultPriorityBand:\n    fairnessPolicyRef: mine\n",
		)
	}
	for _, mode := range ConcurrencyModes {
		f, err := Parse([]byte("gate: {concurrency: {concurrencyMode: " + mode + "}}"))
		if err != nil || f.Gate.Concurrency.Mode != mode {
			t.Errorf("concurrencyMode %q: %+v, %v", mode, f, err)
		}
	}
}

// wantErr is a problem a test expects: its line, its path and a part of
// its message.
type wantErr struct {
	line int
	path string
	msg  string
}

// checkErrs checks that err holds every problem of want, each an *Error.
func checkErrs(t *testing.T, doc string, err error, want ...wantErr) {
	t.Helper()
	if err == nil {
		t.Fatalf("Parse:\n%s\nsucceeded, want errors %+v", doc, want)
	}
	var got []*Error
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range u.Unwrap() {
			var ce *Error
			if errors.As(e, &ce) {
				got = append(got, ce)
			}
		}
	} else {
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("error %v is not an *Error", err)
		}
		got = append(got, ce)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if g.Path == w.path && (w.line == 0 || g.Line == w.line) && strings.Contains(g.Msg, w.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("Parse:\n%s\nwant a problem at line %d, %s: …%s…; got:\n%v", doc, w.line, w.path, w.msg, err)
		}
	}
}

func TestErrorsNameTheirPath(t *testing.T) {
	tests := []struct {
		yaml string
		want []wantErr
	}{
		{"flowControl:\n  priorityBands:\n  - priority: 1\n  - priority: 2\n    maxRequest: 5\n",
			[]wantErr{{5, "flowControl.priorityBands[1].maxRequest", `unknown key (did you mean "maxRequests"?)`}}},
		{"controler: {}\n", []wantErr{{1, "controler", `unknown key (did you mean "controller"?)`}}},
		{"controller:\n  bands:\n  - priority: 0\n    ordering: fifo-ordering-policy\n",
			[]wantErr{{4, "controller.bands[0].ordering", `unknown ordering policy "fifo-ordering-policy" (did you mean "fcfs-ordering-policy"?)`}}},
		{"controller:\n  bands:\n  - priority: 0\n    ordering: nonsense\n",
			[]wantErr{{4, "controller.bands[0].ordering", "known: fcfs-ordering-policy, edf-ordering-policy, slo-deadline-ordering-policy"}}},
		{"controller:\n  bands:\n  - priority: 0\n    fairness: fair\n",
			[]wantErr{{4, "controller.bands[0].fairness", `unknown fairness policy "fair"`}}},
		{"controller:\n  bands:\n  - priority: 0\n    fairness: {type: round-robin-fairness-policy, quantum: 4}\n",
			[]wantErr{{4, "controller.bands[0].fairness.quantum", "quantum and weights belong to deficit-round-robin-fairness-policy only, not round-robin-fairness-policy"}}},
		{"controller:\n  bands:\n  - priority: 0\n    fairness: {quantum: 4}\n",
			[]wantErr{{4, "controller.bands[0].fairness", "type is required"}}},
		{"controller:\n  bands:\n  - priority: 0\n    fairness: {type: deficit-round-robin-fairness-policy, weights: {a: 0}}\n",
			[]wantErr{{4, "controller.bands[0].fairness.weights.a", "out of range"}}},
		{"controller:\n  bands:\n  - priority: 0\n    ordering: edf-ordering-policy\n    queue: fifo\n",
			[]wantErr{{5, "controller.bands[0].queue", "cannot run edf-ordering-policy"}}},
		{"controller:\n  bands:\n  - priority: 0\n    queue: list\n",
			[]wantErr{{4, "controller.bands[0].queue", `unknown queue "list"`}}},
		{"controller:\n  bands:\n  - maxRequests: 3\n",
			[]wantErr{{3, "controller.bands[0]", "priority is required"}}},
		{"controller:\n  bands:\n  - priority: 1\n  - priority: 0\n  - priority: 1\n",
			[]wantErr{{5, "controller.bands[2].priority", "1 duplicates controller.bands[0].priority"}}},
		{"controller:\n  bands:\n  - priority: 1\n",
			[]wantErr{{2, "controller.bands", "no band of priority 0"}}},
		{"controller:\n  fallbackPriority: 4\n  bands:\n  - priority: 1\n",
			[]wantErr{{2, "controller.fallbackPriority", "4 names no band (bands: 1)"}}},
		{"controller:\n  neverPromote: true\n  fallbackPriority: 1\n  bands: [{priority: 1}]\n",
			[]wantErr{{3, "controller.fallbackPriority", "must be left unset with neverPromote"}}},
		{"controller:\n  bands: []\n", []wantErr{{2, "controller.bands", "at least one band"}}},
		{"controller:\n  maxRequests: -1\n", []wantErr{{2, "controller.maxRequests", "negative amount -1"}}},
		{"controller:\n  maxRequests: lots\n", []wantErr{{2, "controller.maxRequests", `got "lots"`}}},
		{"controller:\n  maxBytes: 4MB\n", []wantErr{{2, "controller.maxBytes", `unknown suffix "MB"`}}},
		{"controller:\n  maxBytes: 99999999999999999999\n", []wantErr{{2, "controller.maxBytes", "out of range"}}},
		{"controller:\n  maxBytes: 16Ei\n", []wantErr{{2, "controller.maxBytes", "out of range"}}},
		{"controller:\n  defaultTTL: 30\n", []wantErr{{2, "controller.defaultTTL", "want a duration with a unit"}}},
		{"controller:\n  defaultTTL: soon\n", []wantErr{{2, "controller.defaultTTL", `got "soon"`}}},
		{"controller:\n  defaultTTL: -1s\n", []wantErr{{2, "controller.defaultTTL", "negative duration"}}},
		{"controller:\n  displacement: yes\n", []wantErr{{2, "controller.displacement", "want true or false"}}},
		{"controller:\n  fallbackPriority: \"0\"\n", []wantErr{{2, "controller.fallbackPriority", "want an integer"}}},
		{"controller:\n  bands: {priority: 0}\n", []wantErr{{2, "controller.bands", "want a list, got a mapping"}}},
		{"controller:\n  bands:\n  - priority: 0\n    ordering: 7\n", []wantErr{{4, "controller.bands[0].ordering", "want a string"}}},
		{"controller: {}\ncontroller: {}\n", []wantErr{{2, "controller", "duplicate key (first at line 1)"}}},
		{"controller:\n  <<: {maxRequests: 1}\n", []wantErr{{2, "controller", "merge keys"}}},
		{"- a\n- b\n", []wantErr{{1, "", "want a mapping, got a list"}}},
		{"gate:\n  saturation:\n    kvCacheUtilThreshold: 1.5\n", []wantErr{{3, "gate.saturation.kvCacheUtilThreshold", "out of range"}}},
		{"gate:\n  saturation:\n    kvCacheUtilThreshold: .nan\n", []wantErr{{3, "gate.saturation.kvCacheUtilThreshold", "finite"}}},
		{"gate:\n  saturation:\n    queueDepthThreshold: 0\n", []wantErr{{3, "gate.saturation.queueDepthThreshold", "out of range"}}},
		{"gate:\n  saturation:\n    metricsStalenessThreshold: 0s\n", []wantErr{{3, "gate.saturation.metricsStalenessThreshold", "above zero"}}},
		{"gate:\n  saturation:\n    headroom: 0.2\n", []wantErr{{3, "gate.saturation.headroom", "unknown key"}}},
		{"plugins:\n- type: concurrency-detector\n  parameters: {perEndpoint: false}\n", []wantErr{{3, "plugins[0].parameters.perEndpoint", "unknown key"}}},
		{"gate:\n  concurrency:\n    concurrencyMode: request\n", []wantErr{{3, "gate.concurrency.concurrencyMode", `did you mean "requests"`}}},
		{"gate:\n  concurrency:\n    maxConcurrency: 0\n", []wantErr{{3, "gate.concurrency.maxConcurrency", "out of range"}}},
		{"gate:\n  maxInFlight: -1\n", []wantErr{{2, "gate.maxInFlight", "out of range"}}},
		{"gate:\n  saturation: {metricsStalenessThreshold: 40ms}\ngateway:\n  scrapeInterval: 50ms\n",
			[]wantErr{{4, "gateway.scrapeInterval", "not below the saturation gate's metricsStalenessThreshold"}}},
		{"gate:\n  saturation: {metricsStalenessThreshold: 50ms}\n",
			[]wantErr{{2, "gateway.scrapeInterval", "50ms is not below"}}},
		{"gateway:\n  listen: 8080\n", []wantErr{{2, "gateway.listen", "want a string"}}},
		{"gateway:\n  listen: localhost\n", []wantErr{{2, "gateway.listen", "want host:port"}}},
		{"gateway:\n  backends: [127.0.0.1:8000]\n", []wantErr{{2, "gateway.backends[0]", "want an http or https URL"}}},
		{"gateway:\n  backends: [\"http://a:1\", \"http://a:1\"]\n", []wantErr{{2, "gateway.backends[1]", "duplicates gateway.backends[0]"}}},
		{"gateway:\n  scrapeTimeout: 0s\n", []wantErr{{2, "gateway.scrapeTimeout", "above zero"}}},
		{"gateway:\n  priorityHandoff: yes please\n", []wantErr{{2, "gateway.priorityHandoff", "want true, false or a mapping of enabled, map, min and max"}}},
		{"gateway:\n  priorityHandoff: {enable: true}\n", []wantErr{{2, "gateway.priorityHandoff.enable", `did you mean "enabled"`}}},
		{"gateway:\n  priorityHandoff:\n    enabled: true\n    map:\n      10: 5\n      0: 3\n",
			[]wantErr{{5, "gateway.priorityHandoff.map[10]", "band 10 maps to 5, above band 0's 3: vLLM serves the lower value first"}}},
		{"gateway:\n  priorityHandoff:\n    map:\n      chat: 5\n", []wantErr{{4, "gateway.priorityHandoff.map", "want a band's priority, an integer"}}},
		{"gateway:\n  priorityHandoff:\n    map:\n      1: high\n", []wantErr{{4, "gateway.priorityHandoff.map[1]", "want an integer"}}},
		{"gateway:\n  priorityHandoff:\n    map:\n      1:\n", []wantErr{{4, "gateway.priorityHandoff.map[1]", "got null"}}},
		{"gateway:\n  priorityHandoff:\n    min: 5\n    max: 1\n", []wantErr{{3, "gateway.priorityHandoff.min", "5 is above max 1"}}},
		{"gateway:\n  priorityHandoff:\n    max: 10\n    map: {1: 11}\n", []wantErr{{4, "gateway.priorityHandoff.map[1]", "11 is outside [0, 10] (min, max)"}}},
		{"kind: Deployment\n", []wantErr{{1, "kind", "want EndpointPickerConfig"}}},
		{"controller: {}\nflowControl: {}\n", []wantErr{{1, "controller", "cannot be mixed with llm-d-router's (flowControl at line 2)"}}},

		// llm-d-router's form.
		{"flowControl:\n  maxRequests: -5\n", []wantErr{{2, "flowControl.maxRequests", "negative amount"}}},
		{"flowControl:\n  maxBytes: 1GB\n", []wantErr{{2, "flowControl.maxBytes", `unknown suffix "GB"`}}},
		{"flowControl:\n  maxBytes: unbounded\n", []wantErr{{2, "flowControl.maxBytes", `got "unbounded"`}}},
		{"flowControl:\n  defaultRequestTTL: 60\n", []wantErr{{2, "flowControl.defaultRequestTTL", "with a unit"}}},
		{"flowControl:\n  priorityBands:\n  - priority: 0\n    orderingPolicyRef: nope\n",
			[]wantErr{{4, "flowControl.priorityBands[0].orderingPolicyRef", `no plugin named "nope" and no ordering policy of that type`}}},
		{"flowControl:\n  priorityBands:\n  - priority: 0\n    orderingPolicyRef: edf-ordering\n",
			[]wantErr{{4, "flowControl.priorityBands[0].orderingPolicyRef", `did you mean "edf-ordering-policy"`}}},
		{"plugins: [{name: s, type: queue-scorer}]\nflowControl:\n  priorityBands:\n  - priority: 0\n    orderingPolicyRef: s\n",
			[]wantErr{{5, "flowControl.priorityBands[0].orderingPolicyRef", `plugin "s" (plugins[0]) has type "queue-scorer", which is not an ordering policy Sluice has`}}},
		{"plugins: [{type: program-aware-fairness}]\nflowControl:\n  defaultPriorityBand:\n    fairnessPolicyRef: program-aware-fairness\n",
			[]wantErr{{4, "flowControl.defaultPriorityBand.fairnessPolicyRef", `has type "program-aware-fairness", which is not a fairness policy Sluice has`}}},
		{"flowControl:\n  priorityBands:\n  - priority: 0\n    defaultRequestTTL: 5s\n",
			[]wantErr{{4, "flowControl.priorityBands[0].defaultRequestTTL", "unknown key"}}},
		{"flowControl:\n  priorityBands:\n  - priority: 3\n  - priority: 3\n",
			[]wantErr{{4, "flowControl.priorityBands[1].priority", "3 duplicates flowControl.priorityBands[0].priority"}}},
		{"plugins:\n- type: a\n- name: a\n  type: b\n", []wantErr{{3, "plugins[1].name", `plugin name "a" is already used by plugins[0]`}}},
		{"plugins:\n- name: x\n", []wantErr{{2, "plugins[0].type", "required"}}},
		{"plugins:\n- type: x\n  params: {}\n", []wantErr{{3, "plugins[0].params", `did you mean "parameters"`}}},
		{"plugins:\n- type: fcfs-ordering-policy\n  parameters: {a: 1}\n", []wantErr{{3, "plugins[0].parameters", "takes no parameters"}}},
		{"plugins:\n- type: utilization-detector\n  parameters: {queueDepthThreshold: 0}\n",
			[]wantErr{{3, "plugins[0].parameters.queueDepthThreshold", "out of range"}}},
		{"plugins:\n- type: utilization-detector\n  parameters:\n    kvCacheUtil: 0.5\n",
			[]wantErr{{4, "plugins[0].parameters.kvCacheUtil", "unknown key"}}},
		{"plugins:\n- type: concurrency-detector\n  parameters: {concurrencyMode: bytes, headroom: -1}\n",
			[]wantErr{{3, "plugins[0].parameters.concurrencyMode", "unknown concurrency mode"}, {3, "plugins[0].parameters.headroom", "must not be negative"}}},
		{"flowControl:\n  saturationDetector:\n    pluginRef: queue-scorer\n",
			[]wantErr{{3, "flowControl.saturationDetector.pluginRef", `no plugin named "queue-scorer"`}}},
		{"flowControl:\n  saturationDetector:\n    queueDepthThreshold: 5\n",
			[]wantErr{{3, "flowControl.saturationDetector.queueDepthThreshold", "unknown key"}}},
		{"flowControl:\n  saturationDetector: {pluginRef: utilization-detector}\ngate: {maxInFlight: 3}\n",
			[]wantErr{{2, "flowControl.saturationDetector.pluginRef", "both configure the gate"}}},
		{"plugins: [{type: soft-reflective-ceiling-policy, parameters: {threshold: 0.5}}]\nflowControl: {usageLimitPolicyPluginRef: soft-reflective-ceiling-policy}\n",
			[]wantErr{{1, "plugins[0].parameters", "takes no parameters"}}},
		{"plugins: [{type: static-usage-limit-policy, parameters: {threshold: 1.5}}]\nflowControl: {usageLimitPolicyPluginRef: static-usage-limit-policy}\n",
			[]wantErr{{1, "plugins[0].parameters", "not a fraction in (0, 1]"}}},
		{"plugins:\n- type: priority-holdback-policy\n", []wantErr{{2, "plugins[0].parameters", "needs minCeiling"}}},
		{"plugins:\n- type: priority-holdback-policy\n  parameters:\n    minCeiling: 0\n",
			[]wantErr{{4, "plugins[0].parameters.minCeiling", "0 holds the lowest band back whatever the saturation: its requests would never start"}}},
		{"gate:\n  maxInFlight: 2\n  usageLimit: {type: static-usage-limit-policy, threshold: 0}\n",
			[]wantErr{{3, "gate.usageLimit.threshold", "0 holds every band back whatever the saturation: no request would ever start"}}},
		{"plugins:\n- type: priority-holdback-policy\n  parameters: {minCeiling: 0.6, maxCeiling: 0.5}\n",
			[]wantErr{{3, "plugins[0].parameters", "not below MaxCeiling"}}},
		{"plugins:\n- type: priority-holdback-policy\n  parameters: {minCeiling: 0.5, shape: sigmoid}\n",
			[]wantErr{{3, "plugins[0].parameters", "want \"linear\""}}},
		{"plugins:\n- type: priority-holdback-policy\n  parameters: {domain: explicit, ceilings: {10: 0.9}}\n",
			[]wantErr{{3, "plugins[0].parameters.domain", "\"rank\" and \"value\" domains only"}, {3, "plugins[0].parameters.ceilings", "\"rank\" and \"value\" domains only"}}},
		{"flowControl: {usageLimitPolicyPluginRef: priority-holdback-policy}\n",
			[]wantErr{{1, "flowControl.usageLimitPolicyPluginRef", "needs minCeiling"}}},
		{"flowControl: {usageLimitPolicyPluginRef: static-usage-limit-policy}\ngate: {usageLimit: soft-reflective-ceiling-policy, maxInFlight: 2}\n",
			[]wantErr{{1, "flowControl.usageLimitPolicyPluginRef", "both set the band ceilings"}}},
		{"gate: {usageLimit: soft-reflective-ceiling-policy}\n", []wantErr{{1, "gate.usageLimit", "sets none"}}},
		{"gate:\n  maxInFlight: 2\n  usageLimit: soft-reflectiv-ceiling-policy\n", []wantErr{{3, "gate.usageLimit", "soft-reflective-ceiling-policy"}}},
		{"gate:\n  maxInFlight: 2\n  usageLimit: {minCeiling: 0.5}\n", []wantErr{{3, "gate.usageLimit", "type is required"}}},
		{"gate:\n  maxInFlight: 2\n  usageLimit: {type: static-usage-limit-policy, minCeiling: 0.5}\n", []wantErr{{3, "gate.usageLimit.minCeiling", "unknown key"}}},
		{"featureGates: [\"flowControl=maybe\"]\n", []wantErr{{1, "featureGates[0]", "flowControl=true or flowControl=false"}}},
		{"flowControl:\n  enableEviction: 1\n", []wantErr{{2, "flowControl.enableEviction", "want true or false"}}},
		{"apiVersion: 1\nflowControl: {}\n", []wantErr{{1, "apiVersion", "want a string"}}},

		// YAML itself.
		{"controller: [\n", []wantErr{{0, "", "invalid YAML"}}},
		{"controller: {}\n---\ncontroller: {}\n", []wantErr{{2, "", "more than one YAML document"}}},
	}
	for i, tc := range tests {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			f, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse:\n%s\nsucceeded (%+v), want %+v", tc.yaml, f, tc.want)
			}
			checkErrs(t, tc.yaml, err, tc.want...)
		})
	}
}

func TestEveryProblemIsReported(t *testing.T) {
	doc := "controller:\n  maxRequest: 1\n  bands:\n  - priority: 0\n    ttl: 5\n    ordering: lifo\ngate:\n  maxInFlight: x\n"
	_, err := Parse([]byte(doc))
	checkErrs(t, doc, err,
		wantErr{2, "controller.maxRequest", "unknown key"},
		wantErr{5, "controller.bands[0].ttl", "with a unit"},
		wantErr{6, "controller.bands[0].ordering", "unknown ordering policy"},
		wantErr{8, "gate.maxInFlight", "want an integer"},
	)
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 4 {
		t.Errorf("got %d problems, want 4:\n%v", n, err)
	}
}

func TestTooManyProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString("controller:\n")
	for i := range maxErrors + 7 {
		fmt.Fprintf(&b, "  bad%d: 1\n", i)
	}
	_, err := Parse([]byte(b.String()))
	if err == nil || !strings.HasSuffix(err.Error(), "config: 7 more problems not shown") {
		t.Fatalf("err = %v, want the last line to count 7 more", err)
	}
}

func TestAliasExpansionIsBounded(t *testing.T) {
	// 2,000 bands, each an alias of one band whose weights are an alias of
	// 2,000 entries: 4 million values from 30 kB.
	var b strings.Builder
	b.WriteString("w: &w {")
	for i := range 2000 {
		fmt.Fprintf(&b, "k%d: 1, ", i)
	}
	b.WriteString("}\ncontroller:\n  bands:\n  - &b {priority: 0, fairness: {type: deficit-round-robin-fairness-policy, weights: *w}}\n")
	for range 2000 {
		b.WriteString("  - *b\n")
	}
	_, err := Parse([]byte(b.String()))
	checkErrs(t, "(4 million values through aliases)", err,
		wantErr{1, "w", "unknown key"},
		wantErr{1, "controller.bands[48].fairness.weights", "more than 100000 values"})
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 2 {
		t.Errorf("got %d problems, want 2:\n%v", n, err)
	}
}

// TestBadFiles parses each testdata/bad-*.yaml, whose first line says the
// problem it must be reported with: "# want: LINE PATH: MESSAGE".
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/bad-*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad files: %v", err)
	}
	wantRE := regexp.MustCompile(`^# want: (\d+) (\S*): (.*)$`)
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			m := wantRE.FindStringSubmatch(first)
			if m == nil {
				t.Fatalf("first line %q is not # want: LINE PATH: MESSAGE", first)
			}
			line, _ := strconv.Atoi(m[1])
			_, err = Load(name)
			checkErrs(t, string(data), err, wantErr{line, m[2], m[3]})
			var ce *Error
			if errors.As(err, &ce) && ce.File != name {
				t.Errorf("Error.File = %q, want %q", ce.File, name)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%s:%d:", name, line)) {
				t.Errorf("error %q does not start with %s:%d:", err, name, line)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		err  Error
		want string
	}{
		{Error{File: "a.yaml", Line: 3, Column: 5, Path: "gate.maxInFlight", Msg: "bad"}, "config: a.yaml:3:5: gate.maxInFlight: bad"},
		{Error{Line: 3, Column: 5, Path: "gate", Msg: "bad"}, "config: line 3, column 5: gate: bad"},
		{Error{File: "a.yaml", Msg: "invalid YAML"}, "config: a.yaml: invalid YAML"},
		{Error{Msg: "bad"}, "config: bad"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v.Error() = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want os.ErrNotExist", err)
	}
}

func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string
	}{
		{"flowControl:\n  maxRequests: 5\n", `line 1, column 1: flowControl: llm-d-router applies this section only with the "flowControl" feature gate`},
		{"featureGates: [\"flowControl=false\"]\nflowControl:\n  maxRequests: 5\n", "feature gate"},
		{"featureGates: [flowControl]\nflowControl:\n  noEndpointRequestTTL: 5m\n", "Sluice never lengthens a request's TTL"},
		{"plugins: [{type: utilization-detector, parameters: {headroom: 0.2}}]\n", "plugins[0].parameters.headroom: accepted and unused"},
	} {
		f, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Errorf("Parse:\n%s\nerror: %v", tc.yaml, err)
			continue
		}
		if !slicesContain(f.Warnings, tc.want) {
			t.Errorf("Parse:\n%s\nwarnings %q, want one containing %q", tc.yaml, f.Warnings, tc.want)
		}
	}
}

func slicesContain(list []Warning, part string) bool {
	for _, w := range list {
		if strings.Contains(w.String(), part) {
			return true
		}
	}
	return false
}

// TestPackageDocExamples parses the two example files of the package doc,
// so that the documentation cannot drift from what Parse accepts.
func TestPackageDocExamples(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	// A code block is a run of "//\t" lines, with bare "//" lines inside.
	var blocks []string
	var cur []string
	flush := func() {
		for len(cur) > 0 && cur[len(cur)-1] == "" {
			cur = cur[:len(cur)-1]
		}
		if len(cur) > 0 {
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		}
		cur = nil
	}
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "//\t"):
			cur = append(cur, strings.TrimPrefix(line, "//\t"))
		case line == "//" && len(cur) > 0:
			cur = append(cur, "")
		default:
			flush()
		}
	}
	flush()
	forms := map[string]Form{"gateway:": FormSluice, "apiVersion:": FormLLMD}
	found := 0
	for _, b := range blocks {
		key, _, _ := strings.Cut(b, " ")
		key, _, _ = strings.Cut(key, "\n")
		form, ok := forms[key]
		if !ok {
			continue
		}
		found++
		f, err := Parse([]byte(b))
		if err != nil {
			t.Errorf("the package doc's example does not parse:\n%s\n%v", b, err)
			continue
		}
		if f.Form != form {
			t.Errorf("the package doc's example parses as form %s, want %s", f.Form, form)
		}
		// The llm-d example keeps one scorer and its profile, to show
		// the form: each is named as not read.
		var want []string
		if form == FormLLMD {
			want = []string{"plugins[0]", "schedulingProfiles"}
		}
		if got := warningPaths(f.Warnings); !slices.Equal(got, want) {
			t.Errorf("the package doc's example has warnings at %q, want %q: %q", got, want, f.Warnings)
		}
		mustNew(t, f)
	}
	if found != 2 {
		t.Errorf("found %d example files in the package doc, want 2", found)
	}
}
