package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// GracePeriodFlag is the shutdown grace period's flag. Kubernetes calls
// the same wait terminationGracePeriodSeconds (kubectl: --grace-period),
// and the file gateway.gracePeriod.
const GracePeriodFlag = "grace-period"

// Flags are the flags both Sluice binaries take, under the same names and
// with the same meaning: the configuration file, the model servers, the
// request classification, which requests are inference, the metrics'
// pool label, logging, the shutdown's drain delay and grace period, and
// -version. A binary defines them with [Flags.Register] beside
// its own and parses with [Flags.Parse]. A flag that is given wins over the
// file.
type Flags struct {
	// ConfigPath is -config, the YAML file; "" for none.
	ConfigPath string
	// Backends are the -backend URLs, in the order given.
	Backends []*url.URL
	// Classifier is what -priority-header, -objective and
	// -default-priority set.
	Classifier flowhttp.HeaderClassifier
	// EmitProvisionalHeadroom is -emit-provisional-headroom.
	EmitProvisionalHeadroom bool
	// Pool is -pool, the inference_pool label of the metrics.
	Pool string
	// LogLevel is -log-level.
	LogLevel slog.Level
	// GracePeriod is -grace-period, DefaultGracePeriod unless given;
	// GracePeriodSet says whether it was.
	GracePeriod    time.Duration
	GracePeriodSet bool
	// CheckConfig is -check-config: check the configuration, print what
	// would run ([Effective]) and exit, starting nothing.
	CheckConfig bool
	// DrainDelay is -drain-delay, DefaultDrainDelay unless given;
	// DrainDelaySet says whether it was.
	DrainDelay    time.Duration
	DrainDelaySet bool
	// InferenceRoutes is -inference-path: the requests flow control
	// admits; DefaultInferenceRoutes unless given.
	InferenceRoutes InferenceRoutes
	// Version is -version: [Flags.Parse] prints the build and returns
	// flag.ErrHelp.
	Version bool
	// PriorityHandoff is -priority-handoff; PriorityHandoffSet says
	// whether it was given. [Flags.Handoff] applies it to the file's
	// gateway.priorityHandoff.
	PriorityHandoff    bool
	PriorityHandoffSet bool

	logLevel string
}

// Register defines the shared flags on fs. A binary whose reading of a flag
// is narrower may reword its usage (fs.Lookup(name).Usage) after Register.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.ConfigPath, "config", "", "YAML configuration `file` (Sluice's form or llm-d-router's EndpointPickerConfig); flags given win over it; reloaded on SIGHUP")
	fs.Var(BackendsFlag{URLs: &f.Backends}, "backend", "base `URL` of a model server (its root: /v1/... and /metrics are below it), repeatable; added to gateway.backends")
	fs.StringVar(&f.Classifier.PriorityHeader, "priority-header", "", "request `header` carrying an integer priority (off when empty)")
	fs.Var(ObjectivesFlag{Objectives: &f.Classifier.Objectives}, "objective", "`name=priority` of an inference objective (x-llm-d-inference-objective), repeatable")
	fs.IntVar(&f.Classifier.DefaultPriority, "default-priority", 0, "priority of requests nothing else classifies")
	fs.BoolVar(&f.EmitProvisionalHeadroom, "emit-provisional-headroom", false,
		"also stamp the headroom as x-llm-d-flow-band-headroom, the name llm-d-async's dispatcher reads")
	fs.StringVar(&f.Pool, "pool", "", "inference_pool label of every flow_control_* metric (none when empty)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.DurationVar(&f.GracePeriod, GracePeriodFlag, DefaultGracePeriod, "how long admitted requests may finish after SIGINT or SIGTERM; overrides gateway.gracePeriod")
	fs.BoolVar(&f.CheckConfig, CheckConfigFlag, false, "check the flags and the -config file, print the configuration that would run and its warnings, and exit: 0 when valid, 2 when not; starts nothing")
	fs.DurationVar(&f.DrainDelay, "drain-delay", DefaultDrainDelay, "after SIGTERM, how long to keep serving while readiness answers 503, before refusing new requests (0: none); overrides gateway.drainDelay")
	f.InferenceRoutes = DefaultInferenceRoutes()
	fs.Var(&InferenceRoutesFlag{Routes: &f.InferenceRoutes}, "inference-path", "`route` of inference requests, \"[METHOD] PATH\" such as \"POST /v1/rerank\" (a PATH ending in / covers its subtree): flow control admits them, every other request goes straight to a backend. Repeatable; the first replaces the default")
	fs.BoolVar(&f.PriorityHandoff, PriorityHandoffFlag, false,
		"set each admitted request's JSON body field priority (vLLM's, lower served first: run vLLM with --scheduling-policy priority) from the band that admitted it, replacing the client's; overrides gateway.priorityHandoff.enabled, whose map and bounds still apply (default: priority = -band)")
	fs.BoolVar(&f.Version, "version", false, "print the version, VCS revision and Go version, and exit")
}

// SetUsage makes fs's usage header, then the flags' defaults, then footer.
func SetUsage(fs *flag.FlagSet, header, footer string) {
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), header)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), footer)
	}
}

// Parse parses args with fs, on which f's flags are registered, and checks
// f's values; it returns the names of the flags given, for the binary's
// own checks and for which of the file's settings a flag replaces. For -h
// it writes fs's usage to stdout and returns flag.ErrHelp, and for -version
// the build ([ReadBuildInfo]) and flag.ErrHelp too; a flag that does
// not parse is written to stderr with the usage, and every other error as
// [Fail] writes it.
func (f *Flags) Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (given map[string]bool, err error) {
	var usage strings.Builder
	fs.SetOutput(&usage)
	err = fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		io.WriteString(stdout, usage.String())
		return nil, err
	case err != nil:
		io.WriteString(stderr, usage.String())
		return nil, err
	case f.Version:
		fmt.Fprintf(stdout, "%s %s\n", fs.Name(), ReadBuildInfo())
		return nil, flag.ErrHelp
	}
	given = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	if err := f.check(fs, given); err != nil {
		return nil, Fail(stderr, fs.Name(), err)
	}
	return given, nil
}

func (f *Flags) check(fs *flag.FlagSet, given map[string]bool) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	f.GracePeriodSet = given[GracePeriodFlag]
	if f.GracePeriod < 0 {
		return fmt.Errorf("-%s %v: negative", GracePeriodFlag, f.GracePeriod)
	}
	f.DrainDelaySet = given["drain-delay"]
	f.PriorityHandoffSet = given[PriorityHandoffFlag]
	if f.DrainDelay < 0 {
		return fmt.Errorf("-drain-delay %v: negative", f.DrainDelay)
	}
	if h := f.Classifier.PriorityHeader; h != "" && !httpguts.ValidHeaderFieldName(h) {
		return fmt.Errorf("-priority-header %q: not a valid header name", h)
	}
	if err := f.LogLevel.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("-log-level %q: want debug, info, warn or error", f.logLevel)
	}
	return nil
}

// Fail writes err to stderr for the binary named name, with where to read
// the usage, and returns err.
func Fail(stderr io.Writer, name string, err error) error {
	fmt.Fprintf(stderr, "%s: %v\nRun %s -h for usage.\n", name, err, name)
	return err
}
