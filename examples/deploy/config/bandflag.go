package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/ordering"
)

// BandsFlag is a flag.Value that appends each value, parsed by
// [ParseBand], to Bands: the -band flag of sluice-extproc.
type BandsFlag struct{ Bands *[]flowcontrol.BandConfig }

// String returns each band's priority and request capacity, separated by
// spaces.
func (f BandsFlag) String() string {
	if f.Bands == nil {
		return ""
	}
	parts := make([]string, len(*f.Bands))
	for i, b := range *f.Bands {
		parts[i] = fmt.Sprintf("priority=%d,capacity=%s", b.Priority, b.RequestCapacity)
	}
	return strings.Join(parts, " ")
}

// Set adds one band.
func (f BandsFlag) Set(spec string) error {
	b, err := ParseBand(spec)
	if err != nil {
		return err
	}
	*f.Bands = append(*f.Bands, b)
	return nil
}

// ParseBand parses one -band value, comma-separated key=value pairs such
// as "priority=10,capacity=100,policy=slo-deadline-ordering-policy": the
// keys priority (required), capacity and bytes (see [ParseLimit]), ttl (a
// Go duration), policy (an ordering policy's name) and queue (fifo or
// heap), each at most once.
func ParseBand(spec string) (flowcontrol.BandConfig, error) {
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
			b.RequestCapacity, err = ParseLimit(value)
		case "bytes":
			b.ByteCapacity, err = ParseLimit(value)
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

// ParseLimit parses a capacity flag's value: a count of at least 0, or
// "unbounded".
func ParseLimit(s string) (capacity.Limit, error) {
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
