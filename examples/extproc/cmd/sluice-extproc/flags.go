package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/ordering"
)

// defaultBand is the band configured when no -band flag is given.
const defaultBand = "priority=0,capacity=100"

// options is the parsed command line.
type options struct {
	listen     string
	controller flowcontrol.Config
	classifier flowhttp.HeaderClassifier
	// emitProvisionalHeadroom also stamps x-llm-d-flow-band-headroom.
	emitProvisionalHeadroom bool
	logLevel                slog.Level
	shutdownTimeout         time.Duration
}

const usageHeader = `Usage: sluice-extproc [flags]

sluice-extproc is an Envoy external processor (envoy.service.ext_proc.v3)
that admits each HTTP request through a Sluice flow controller on its request
headers, and stamps x-llm-d-flow-band-headroom-requests and
x-llm-d-flow-queue-duration-ms on its response headers. Configure Envoy's
ext_proc filter with request_header_mode SEND, response_header_mode SEND,
response_trailer_mode SEND (so backend trailers cannot carry the router's
headers) and no bodies (see examples/extproc/envoy.yaml).

Requests are classified by x-llm-d-inference-fairness-id (the flow),
-priority-header or the objective header with -objective (the band), and
x-llm-d-inference-ttl (a Go duration that can only shorten the queue wait;
a malformed, zero or negative value is answered 400).

It stops on SIGINT or SIGTERM: queued requests are answered 503
rejected-shutting-down, admitted ones may finish within -shutdown-timeout.

Flags:
`

const usageFooter = `
Band keys (-band, comma-separated key=value; priority is required):
  priority=N    band priority; higher is more important, negative is sheddable
  capacity=N    queued-request capacity, or "unbounded" (the default)
  bytes=N       queued-byte capacity, or "unbounded" (the default)
  ttl=D         queue-wait TTL, e.g. 30s (default none)
  policy=NAME   fcfs-ordering-policy (default), edf-ordering-policy,
                slo-deadline-ordering-policy
  queue=KIND    fifo or heap (default: what the policy needs)

Example:
  sluice-extproc -listen 127.0.0.1:9002 -max-inflight 64 \
    -band priority=10,capacity=100,policy=slo-deadline-ordering-policy \
    -band priority=0,capacity=200 \
    -band priority=-10,capacity=50,ttl=30s \
    -objective chat=10 -objective batch=-10
`

// bandsFlag collects repeated -band flags.
type bandsFlag struct{ bands *[]flowcontrol.BandConfig }

func (f bandsFlag) String() string {
	if f.bands == nil {
		return ""
	}
	parts := make([]string, len(*f.bands))
	for i, b := range *f.bands {
		parts[i] = fmt.Sprintf("priority=%d,capacity=%s", b.Priority, b.RequestCapacity)
	}
	return strings.Join(parts, " ")
}

func (f bandsFlag) Set(spec string) error {
	b, err := parseBand(spec)
	if err != nil {
		return err
	}
	*f.bands = append(*f.bands, b)
	return nil
}

// objectivesFlag collects repeated -objective name=priority flags.
type objectivesFlag struct{ m *map[string]int }

func (f objectivesFlag) String() string { return "" }

func (f objectivesFlag) Set(spec string) error {
	name, value, ok := strings.Cut(spec, "=")
	if !ok || name == "" {
		return fmt.Errorf("objective %q: want name=priority", spec)
	}
	p, err := strconv.Atoi(value)
	if err != nil {
		return fmt.Errorf("objective %q: priority %q is not an integer", spec, value)
	}
	if *f.m == nil {
		*f.m = make(map[string]int)
	}
	if _, dup := (*f.m)[name]; dup {
		return fmt.Errorf("objective %q: %q given twice", spec, name)
	}
	(*f.m)[name] = p
	return nil
}

// parseBand parses one -band value, such as
// "priority=10,capacity=100,policy=slo-deadline-ordering-policy".
func parseBand(spec string) (flowcontrol.BandConfig, error) {
	var b flowcontrol.BandConfig
	seen := make(map[string]bool)
	for field := range strings.SplitSeq(spec, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			return b, fmt.Errorf("band %q: %q is not key=value", spec, field)
		}
		if seen[key] {
			return b, fmt.Errorf("band %q: %s given twice", spec, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "priority":
			b.Priority, err = strconv.Atoi(value)
		case "capacity":
			b.RequestCapacity, err = parseLimit(value)
		case "bytes":
			b.ByteCapacity, err = parseLimit(value)
		case "ttl":
			b.TTL, err = time.ParseDuration(value)
			if err == nil && b.TTL < 0 {
				err = errors.New("negative")
			}
		case "policy":
			b.Policy, err = ordering.PolicyByName(value)
		case "queue":
			b.Queue = ordering.QueueKind(value)
		default:
			return b, fmt.Errorf("band %q: unknown key %q (known: priority, capacity, bytes, ttl, policy, queue)", spec, key)
		}
		if err != nil {
			return b, fmt.Errorf("band %q: %s=%q: %w", spec, key, value, err)
		}
	}
	if !seen["priority"] {
		return b, fmt.Errorf("band %q: priority is required", spec)
	}
	return b, nil
}

// parseLimit parses a capacity: a count of at least 0, or "unbounded".
func parseLimit(s string) (capacity.Limit, error) {
	if s == "unbounded" {
		return capacity.Unbounded(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return capacity.Limit{}, errors.New(`not an integer or "unbounded"`)
	}
	if n < 0 {
		return capacity.Limit{}, errors.New("negative")
	}
	return capacity.Bounded(n), nil
}

// parseFlags parses args. For -h it prints the usage to stdout and returns
// flag.ErrHelp; for a bad flag it prints the error and the usage to stderr.
func parseFlags(args []string, stdout, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("sluice-extproc", flag.ContinueOnError)
	var usage strings.Builder
	fs.SetOutput(&usage)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHeader)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), usageFooter)
	}

	var (
		bands        []flowcontrol.BandConfig
		maxInFlight  int
		globalCap    string
		logLevel     string
		neverPromote bool
	)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:9002", "gRPC listen `address` for Envoy's ext_proc filter (loopback unless told otherwise)")
	fs.Var(bandsFlag{&bands}, "band", "a priority `band`, repeatable (keys below; default "+strconv.Quote(defaultBand)+")")
	fs.IntVar(&maxInFlight, "max-inflight", 0, "requests admitted at once across all bands; 0 admits everything at once")
	fs.StringVar(&globalCap, "capacity", "unbounded", "queued-request capacity across all bands, or \"unbounded\"")
	fs.IntVar(&o.controller.FallbackPriority, "fallback-priority", 0, "band for requests whose own band is not configured")
	fs.BoolVar(&neverPromote, "never-promote", false, "fall back only to the nearest band at or below the requested priority")
	fs.DurationVar(&o.controller.DefaultTTL, "default-ttl", 0, "queue-wait TTL for bands without their own; 0 means none")
	fs.StringVar(&o.classifier.PriorityHeader, "priority-header", "", "request `header` carrying an integer priority (off when empty)")
	fs.StringVar(&o.classifier.ObjectiveHeader, "objective-header", flowhttp.DefaultObjectiveHeader,
		"request `header` naming the inference objective (the default also reads "+flowhttp.DeprecatedObjectiveHeader+")")
	fs.Var(objectivesFlag{&o.classifier.Objectives}, "objective", "`name=priority` of an inference objective, repeatable")
	fs.IntVar(&o.classifier.DefaultPriority, "default-priority", 0, "priority of requests nothing else classifies")
	fs.BoolVar(&o.emitProvisionalHeadroom, "emit-provisional-headroom", false,
		"also stamp the headroom as x-llm-d-flow-band-headroom, the name llm-d-async's dispatcher reads")
	fs.StringVar(&logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long admitted requests may finish after SIGINT/SIGTERM")

	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		io.WriteString(stdout, usage.String())
		return o, err
	case err != nil:
		io.WriteString(stderr, usage.String())
		return o, err
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments: %q", fs.Args())
		fmt.Fprintf(stderr, "%v\nRun sluice-extproc -h for usage.\n", err)
		return o, err
	}

	fail := func(err error) (options, error) {
		fmt.Fprintf(stderr, "%v\nRun sluice-extproc -h for usage.\n", err)
		return o, err
	}
	if len(bands) == 0 {
		b, err := parseBand(defaultBand)
		if err != nil {
			panic(err) // the constant is wrong
		}
		bands = append(bands, b)
	}
	o.controller.Bands = bands
	o.controller.NeverPromote = neverPromote
	if maxInFlight < 0 {
		return fail(fmt.Errorf("-max-inflight %d: negative", maxInFlight))
	}
	if maxInFlight > 0 {
		o.controller.Gate = flowcontrol.MaxInFlight(maxInFlight)
	}
	if o.controller.RequestCapacity, err = parseLimit(globalCap); err != nil {
		return fail(fmt.Errorf("-capacity %q: %w", globalCap, err))
	}
	if err := o.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return fail(fmt.Errorf("-log-level %q: want debug, info, warn or error", logLevel))
	}
	if o.shutdownTimeout < 0 {
		return fail(fmt.Errorf("-shutdown-timeout %v: negative", o.shutdownTimeout))
	}
	return o, nil
}
