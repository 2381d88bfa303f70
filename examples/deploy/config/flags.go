package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ParseBackend parses a model server's base URL as the file's
// gateway.backends does: http or https, with a host.
func ParseBackend(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("want an http or https URL such as \"http://127.0.0.1:8000\", got %q", truncate(raw))
	}
	return u, nil
}

// BackendsFlag is a flag.Value that appends each value, parsed by
// [ParseBackend], to URLs, refusing one given twice: the -backend flag of
// the Sluice binaries.
type BackendsFlag struct{ URLs *[]*url.URL }

// String returns the URLs, separated by spaces.
func (f BackendsFlag) String() string {
	if f.URLs == nil {
		return ""
	}
	s := make([]string, len(*f.URLs))
	for i, u := range *f.URLs {
		s[i] = u.String()
	}
	return strings.Join(s, " ")
}

// Set adds one URL.
func (f BackendsFlag) Set(raw string) error {
	u, err := ParseBackend(raw)
	if err != nil {
		return err
	}
	for _, have := range *f.URLs {
		if have.String() == u.String() {
			return fmt.Errorf("%q given twice", raw)
		}
	}
	*f.URLs = append(*f.URLs, u)
	return nil
}

// ObjectivesFlag is a flag.Value that reads name=priority into Objectives,
// the band of each value of x-llm-d-inference-objective, refusing a name
// given twice: the -objective flag of the Sluice binaries.
type ObjectivesFlag struct{ Objectives *map[string]int }

// String returns "": the flag has no default.
func (f ObjectivesFlag) String() string { return "" }

// Set adds one name=priority.
func (f ObjectivesFlag) Set(spec string) error {
	name, value, ok := strings.Cut(spec, "=")
	if !ok || name == "" {
		return fmt.Errorf("objective %q: want name=priority", spec)
	}
	p, err := strconv.Atoi(value)
	if err != nil {
		return fmt.Errorf("objective %q: priority %q is not an integer", spec, value)
	}
	if *f.Objectives == nil {
		*f.Objectives = make(map[string]int)
	}
	if _, dup := (*f.Objectives)[name]; dup {
		return fmt.Errorf("objective %q: %q given twice", spec, name)
	}
	(*f.Objectives)[name] = p
	return nil
}
