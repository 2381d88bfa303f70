package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// ParseBackend parses a model server's base URL as the file's
// gateway.backends does: http or https, with a host.
//
// The URL is the server's base, below which the binaries append /metrics
// to scrape it and a request's own path (/v1/chat/completions) to
// forward it: a URL whose path ends in an OpenAI API segment (/v1, or
// anything below /v1/) would have every scrape answered 404 and every
// request sent to /v1/v1/..., so it is refused, naming the base to write.
func ParseBackend(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("want an http or https URL such as \"http://127.0.0.1:8000\", got %q", truncate(raw))
	}
	p := strings.TrimSuffix(u.Path, "/")
	if i := strings.Index(p+"/", "/v1/"); i >= 0 {
		base := *u
		base.Path, base.RawPath = p[:i], ""
		return nil, fmt.Errorf("%q: a backend URL is the model server's base, to which /metrics and each request's path (/v1/...) are appended; "+
			"with %s in it, every scrape would be answered 404 and every request sent to %s/v1/...: write %q",
			truncate(raw), p[i:], strings.TrimSuffix(u.String(), "/"), base.String())
	}
	return u, nil
}

// CheckListen checks a listen address, host:port, as net.Listen will take
// it: a port is a number from 0 (any free port) to 65535, or a service
// name such as "http". The error says what is wrong, without the address,
// for the caller to name the flag or the key.
func CheckListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("want host:port, such as %q", DefaultListen)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		if strings.Trim(port, "0123456789") == "" {
			return fmt.Errorf("port %s is out of range: a port is from 0 to 65535", truncate(port))
		}
		return fmt.Errorf("port %q is neither a number from 0 to 65535 nor a known service name", truncate(port))
	}
	return nil
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
