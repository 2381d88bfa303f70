package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// Form names which of the two accepted shapes a file has.
type Form string

const (
	// FormSluice is Sluice's own shape: a controller section (or none).
	FormSluice Form = "sluice"
	// FormLLMD is llm-d-router's EndpointPickerConfig: a flowControl
	// section, its plugins, and sibling sections that are accepted unread.
	FormLLMD Form = "llm-d"
)

// Defaults of the gateway section.
const (
	DefaultListen         = "127.0.0.1:8080"
	DefaultScrapeInterval = 50 * time.Millisecond
	DefaultScrapeTimeout  = 100 * time.Millisecond
	DefaultGracePeriod    = 30 * time.Second
	// DefaultDrainDelay is how long a binary keeps serving after SIGTERM
	// with its readiness already failed: Kubernetes removes a pod from its
	// Service's endpoints and Envoy from a cluster only after a probe or an
	// endpoint watch notices, a few seconds (a readiness probe's default
	// periodSeconds is 10, kube-proxy and Envoy's EDS follow the
	// EndpointSlice in about a second). 5 s is the usual preStop sleep.
	DefaultDrainDelay = 5 * time.Second
)

// llm-d-router's defaults, which the llm-d form applies as llm-d-router
// does.
const (
	// LLMDDefaultRequestTTL is flowControl.defaultRequestTTL when it is
	// omitted.
	LLMDDefaultRequestTTL = 60 * time.Second
	// LLMDDefaultBandMaxRequests is a band's maxRequests when it is
	// omitted or 0.
	LLMDDefaultBandMaxRequests = 5000
	// LLMDDefaultBandMaxBytes is a band's maxBytes when it is omitted or
	// 0 (1G).
	LLMDDefaultBandMaxBytes = 1_000_000_000
)

// File is a parsed configuration: what a binary needs to build a
// [flowcontrol.FlowController], its gate, and the gateway around it.
type File struct {
	// Form is the shape the file was written in.
	Form Form
	// Gateway holds the server settings, with defaults filled in.
	Gateway Gateway
	// Flow is the controller's configuration, every field but Gate, Clock
	// and Observer, which are the binary's: [File.Controller] adds a
	// freshly built gate. flowcontrol.New accepts it.
	Flow flowcontrol.Config
	// DefaultBand and DefaultNegativeBand are, in the llm-d form, the
	// bands llm-d-router provisions on first sight for a priority the file
	// does not list (defaultPriorityBand, and defaultNegativePriorityBand
	// for priorities below 0); see [File.DynamicBand]. Nil in Sluice's
	// form, and DefaultNegativeBand is nil when the file sets none.
	DefaultBand, DefaultNegativeBand *flowcontrol.BandConfig
	// Gate holds the gate's settings; [Gate.Build] or [File.Controller]
	// builds it.
	Gate Gate
	// Warnings lists what the file asks for and Sluice accepts but does
	// not do — llm-d-router's scheduling plugins and profiles, its
	// admitters — each at its place in the file and
	// saying what is lost, in file order. A binary should log them.
	Warnings []Warning
	// Source is where the file wrote each value, for the problems a
	// binary finds beyond the file's own checks: see [File.ErrorAt].
	Source Source
}

// Source records where a parsed file wrote its values. Its zero value
// knows no place. Two Sources are always Equal (as go-cmp compares them):
// where a value was written is no part of a configuration.
type Source struct {
	file string
	at   map[string]*yaml.Node
}

// Equal reports true: see [Source].
func (Source) Equal(Source) bool { return true }

// ErrorAt returns a problem with the value at path (in the file's own
// spelling, such as "gateway.scrapeInterval"), located at the key that
// wrote it, or else at the nearest enclosing key the file wrote, or else
// at the start of the file: an [*Error] with the file's name, line and
// column, like those Load returns. A binary calls it for the problems it
// finds once flags and defaults are applied, so that they too name the
// line. The message is format and args, as fmt.Sprintf makes it.
func (f *File) ErrorAt(path, format string, args ...any) *Error {
	e := &Error{File: f.Source.file, Path: path, Msg: fmt.Sprintf(format, args...), Line: 1, Column: 1}
	d := decoder{at: f.Source.at}
	if n := d.pos(path); n != nil && n.Line > 0 {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

// Wrote reports whether the file wrote a value at path, in the file's own
// spelling (such as "controller.noEndpointsTTL"): for a binary whose
// default differs from the one the file's form implies when a key is
// left out.
func (f *File) Wrote(path string) bool { return f.Source.at[path] != nil }

// Gateway holds the settings of the sluice-gateway binary: where it
// listens, which model servers it forwards to, how it reads their metrics
// and how long it drains on shutdown.
type Gateway struct {
	// Listen is the address to listen on, host:port; DefaultListen
	// (loopback only) unless set.
	Listen string
	// Backends are the model servers' base URLs (http or https), in file
	// order; none unless set.
	Backends []*url.URL
	// ScrapeInterval is how often each backend's metrics are read;
	// DefaultScrapeInterval unless set. It must be shorter than the
	// saturation gate's metricsStalenessThreshold, or every endpoint
	// reads as stale and the gate never admits.
	ScrapeInterval time.Duration
	// ScrapeTimeout bounds one read of a backend's metrics;
	// DefaultScrapeTimeout unless set.
	ScrapeTimeout time.Duration
	// GracePeriod is how long shutdown waits for requests in flight;
	// DefaultGracePeriod unless set. Keep it below the orchestrator's
	// kill deadline.
	GracePeriod time.Duration
	// DrainDelay is how long, after SIGTERM, the binary keeps accepting and
	// serving requests while its readiness reports 503, before it refuses
	// new ones and the grace period starts; DefaultDrainDelay unless set,
	// 0 for none. The orchestrator's kill deadline must cover it and the
	// grace period.
	DrainDelay time.Duration
	// PriorityHandoff is gateway.priorityHandoff: whether the request
	// body's priority field (vLLM's) is set from the band that admits the
	// request, and how; off unless set. Its Map, Min and Max are kept when
	// it is not Enabled, for -priority-handoff to turn on:
	// [Flags.Handoff] gives what runs.
	PriorityHandoff flowhttp.PriorityHandoff
	// Fleet, when set (gateway.fleet), makes the binary one replica of a
	// fleet that shares its flow-control state in Redis; nil unless the
	// file sets it. Only a restart changes it.
	Fleet *Fleet
}

// Fleet is gateway.fleet: the Redis a fleet of sluice-gateway replicas
// shares and how this replica takes part. Zero fields take the binary's
// defaults (its -fleet-* flags' defaults), and a flag that is given wins.
type Fleet struct {
	// Redis is the Redis's host:port (redis).
	Redis string
	// PasswordFile is a file whose first line is the Redis password
	// (passwordFile).
	PasswordFile string
	// Prefix starts the fleet's Redis keys (prefix).
	Prefix string
	// ID names this replica in the fleet (id).
	ID string
	// Replicas is the fleet's size, for the static share in fallback
	// (replicas); 0 unless set.
	Replicas int
	// Period is how often the replica publishes and reads (period).
	Period time.Duration
	// Lease is how long Redis keeps the replica's state (lease).
	Lease time.Duration
	// Overdraft is how many requests of a band the replica may start
	// beyond its share while a lower band holds one of its slots
	// (overdraft; fleet.Config.Overdraft); 0 unless set: none.
	Overdraft int
}

// DynamicBand returns the band llm-d-router would provision for a priority
// the file does not list: the defaultNegativePriorityBand template for a
// negative priority when the file sets one, else the defaultPriorityBand
// template, with the priority filled in. It reports false in Sluice's
// form, where such a request goes to the fallback band instead. A gateway
// that wants llm-d-router's per-priority bands calls
// [flowcontrol.FlowController.ProvisionBand] with it before the first
// request of a new priority; one that does not gets the fallback band (the
// template's band at priority 0).
func (f *File) DynamicBand(priority int) (flowcontrol.BandConfig, bool) {
	t := f.DefaultBand
	if priority < 0 && f.DefaultNegativeBand != nil {
		t = f.DefaultNegativeBand
	}
	if t == nil {
		return flowcontrol.BandConfig{}, false
	}
	bc := *t
	bc.Priority = priority
	return bc, true
}

// Load reads and parses the file at path; errors name the file. See
// [Parse].
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return parse(data, path)
}

// Parse parses a configuration in either form (see the package doc). Every
// problem is reported, each as an [*Error] with its line and path; the
// errors are joined with [errors.Join].
func Parse(data []byte) (*File, error) { return parse(data, "") }

func parse(data []byte, file string) (*File, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(data, file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(data, file, err)
		}
		return nil, &Error{File: file, Line: extra.Line, Column: extra.Column, Msg: "more than one YAML document; a configuration is one"}
	}
	d := &decoder{}
	f := d.document(&doc)
	if err := d.err(file); err != nil {
		return nil, err
	}
	for i := range d.warns {
		d.warns[i].File = file
	}
	slices.SortStableFunc(d.warns, func(a, b Warning) int { return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column)) })
	f.Warnings = d.warns
	f.Source = Source{file: file, at: d.at}
	return f, nil
}

// topKeys are every top-level key, in the order they are read (plugins
// before the sections that refer to them).
var topKeys = []string{
	"apiVersion", "kind", "gateway", "controller", "gate",
	"featureGates", "plugins", "schedulingProfiles", "dataLayer",
	"requestHandler", "parser", "saturationDetector", "flowControl",
}

// llmdKeys are the top-level keys that only llm-d-router's
// EndpointPickerConfig has.
var llmdKeys = []string{
	"featureGates", "plugins", "schedulingProfiles", "dataLayer",
	"requestHandler", "parser", "saturationDetector", "flowControl",
}

// document reads the whole file.
func (d *decoder) document(doc *yaml.Node) *File {
	f := &File{
		Form: FormSluice,
		Gateway: Gateway{
			Listen:         DefaultListen,
			ScrapeInterval: DefaultScrapeInterval,
			ScrapeTimeout:  DefaultScrapeTimeout,
			GracePeriod:    DefaultGracePeriod,
			DrainDelay:     DefaultDrainDelay,
		},
		Flow: flowcontrol.Config{Bands: []flowcontrol.BandConfig{{}}},
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return f // an empty file: every default
	}
	root := resolve(doc.Content[0])
	if isNull(root) {
		return f
	}

	top := map[string]*yaml.Node{}
	keys := map[string]*yaml.Node{}
	fields := make([]field, len(topKeys))
	for i, k := range topKeys {
		fields[i] = field{key: k}
	}
	d.entries(root, "", func(k, v *yaml.Node) {
		for _, known := range topKeys {
			if k.Value == known {
				keys[known] = k
				d.remember(known, k)
				if !isNull(v) {
					top[known] = resolve(v)
				}
				return
			}
		}
		d.unknownKey(k, "", fields)
	})

	var llmdKey *yaml.Node
	for _, k := range llmdKeys {
		if keys[k] != nil {
			llmdKey = keys[k]
			break
		}
	}
	if n := top["kind"]; n != nil {
		if s, ok := d.str(n, "kind"); ok && s != "EndpointPickerConfig" {
			d.errorf(n, "kind", "want EndpointPickerConfig (llm-d-router's) or no kind (Sluice's form), got %q", truncate(s))
		}
		if llmdKey == nil {
			llmdKey = keys["kind"]
		}
	}
	if n := top["apiVersion"]; n != nil {
		d.str(n, "apiVersion") // any version: the fields are what counts
	}
	if llmdKey != nil {
		f.Form = FormLLMD
		if k := keys["controller"]; k != nil {
			d.errorf(k, "controller", "Sluice's controller section cannot be mixed with llm-d-router's (%s at line %d): write one form", llmdKey.Value, llmdKey.Line)
		}
	}

	if n := top["gateway"]; n != nil {
		d.gateway(n, "gateway", &f.Gateway)
	}
	gateSet := false
	if n := top["gate"]; n != nil {
		f.Gate, gateSet = d.gate(n, "gate"), true
	}
	if f.Form == FormLLMD {
		d.llmd(top, keys, f, gateSet)
	} else if n := top["controller"]; n != nil {
		f.Flow = d.controller(n, "controller")
	}
	d.checkScrape(f)
	return f
}

// gateway reads the gateway section.
func (d *decoder) gateway(n *yaml.Node, path string, g *Gateway) {
	d.mapping(n, path, []field{
		{"listen", func(n *yaml.Node, p string) {
			if s, ok := d.str(n, p); ok {
				if err := CheckListen(s); err != nil {
					d.errorf(n, p, "%q: %v", truncate(s), err)
					return
				}
				g.Listen = s
			}
		}},
		{"backends", func(n *yaml.Node, p string) {
			seen := map[string]string{}
			d.sequence(n, p, func(_ int, item *yaml.Node, p string) {
				s, ok := d.str(item, p)
				if !ok {
					return
				}
				u, err := ParseBackend(s)
				if err != nil {
					d.errorf(item, p, "%v", err)
					return
				}
				if first, dup := seen[u.String()]; dup {
					d.errorf(item, p, "duplicates %s", first)
					return
				}
				seen[u.String()] = p
				g.Backends = append(g.Backends, u)
			})
		}},
		{"scrapeInterval", d.positiveDuration(&g.ScrapeInterval)},
		{"scrapeTimeout", d.positiveDuration(&g.ScrapeTimeout)},
		{"gracePeriod", func(n *yaml.Node, p string) {
			if v, ok := d.duration(n, p); ok {
				g.GracePeriod = v
			}
		}},
		{"drainDelay", func(n *yaml.Node, p string) {
			if v, ok := d.duration(n, p); ok {
				g.DrainDelay = v
			}
		}},
		{"priorityHandoff", func(n *yaml.Node, p string) { g.PriorityHandoff = d.priorityHandoff(n, p) }},
		{"fleet", func(n *yaml.Node, p string) {
			g.Fleet = &Fleet{}
			d.fleet(n, p, g.Fleet)
		}},
	})
}

// fleet reads gateway.fleet; the binary checks the values against its own
// bounds, naming the key.
func (d *decoder) fleet(n *yaml.Node, path string, f *Fleet) {
	str := func(dst *string) func(*yaml.Node, string) {
		return func(n *yaml.Node, p string) {
			if s, ok := d.str(n, p); ok {
				*dst = s
			}
		}
	}
	d.mapping(n, path, []field{
		{"redis", str(&f.Redis)},
		{"passwordFile", str(&f.PasswordFile)},
		{"prefix", str(&f.Prefix)},
		{"id", str(&f.ID)},
		{"replicas", func(n *yaml.Node, p string) {
			if v, ok := d.intValue(n, p, 1, 1<<20); ok {
				f.Replicas = v
			}
		}},
		{"period", d.positiveDuration(&f.Period)},
		{"lease", d.positiveDuration(&f.Lease)},
		{"overdraft", func(n *yaml.Node, p string) {
			if v, ok := d.intValue(n, p, 0, 1<<20); ok {
				f.Overdraft = v
			}
		}},
	})
}

// positiveDuration returns a reader that stores a duration above zero.
func (d *decoder) positiveDuration(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, p string) {
		v, ok := d.duration(n, p)
		if !ok {
			return
		}
		if v <= 0 {
			d.errorf(n, p, "must be above zero")
			return
		}
		*dst = v
	}
}

// checkScrape refuses a scrape interval that leaves every endpoint's
// metrics stale before the next read: the saturation gate would then
// never admit.
func (d *decoder) checkScrape(f *File) {
	s := f.Gate.Saturation
	if s == nil || f.Gateway.ScrapeInterval < s.MetricsStalenessThreshold {
		return
	}
	where := d.at["gateway.scrapeInterval"]
	if where == nil {
		where = d.staleness
	}
	d.errorf(where, "gateway.scrapeInterval",
		"%s is not below the saturation gate's metricsStalenessThreshold %s: every endpoint would read as stale and the gate would never admit",
		f.Gateway.ScrapeInterval, s.MetricsStalenessThreshold)
}
