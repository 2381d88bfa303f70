package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/ordering"
)

// Request headers of the demo's traffic.
const (
	priorityHeader = "x-llm-d-priority"
	sloHeader      = ordering.SLOTTFTHeader
)

// bandSpec is one priority band of the gateway.
type bandSpec struct {
	priority int
	name     string
	policy   ordering.Policy
	capacity int64
	ttl      time.Duration
}

// bands are the gateway's priority bands, highest first. Priority 0 is also
// the fallback band of requests whose priority has no band. Every band
// schedules its flows (its tenants) by the fairness policy of -fairness,
// and admits fairly unless -no-displacement.
var bands = []bandSpec{
	{priority: 10, name: "interactive", policy: ordering.SLODeadline(), capacity: 32, ttl: 2 * time.Second},
	{priority: 0, name: "standard", policy: ordering.FCFS(), capacity: 64, ttl: 5 * time.Second},
	{priority: -10, name: "batch", policy: ordering.FCFS(), capacity: 32, ttl: 3 * time.Second},
}

// fallbackPriority is the band that serves unprovisioned priorities.
const fallbackPriority = 0

// quietLog discards net/http's complaints about clients that left, which
// the load generator causes on purpose at shutdown.
var quietLog = log.New(io.Discard, "", 0)

// system is the running demo: the model servers and the gateway in front of
// them, all on loopback.
type system struct {
	fc         *flowcontrol.FlowController
	gates      *gates
	counters   map[int]*bandCounters // by effective band; read-only after start
	gatewayURL string
	slots      int // requests the servers work on at once, in total

	models []*modelserver.Server
	reader *serverReader

	servers   []*http.Server // the gateway first, then the model servers
	transport *http.Transport
	serving   sync.WaitGroup // the Serve goroutines
}

// startSystem starts o.servers model servers of o.concurrency slots each on
// loopback, and the gateway on gatewayAddr (a loopback address; port 0
// picks one) behind g, its bands scheduling flows by o.fairness,
// displacing the heaviest flow's newest request when full unless
// o.noDisplace.
func startSystem(o options, g *gates, gatewayAddr string) (s *system, err error) {
	s = &system{gates: g, counters: map[int]*bandCounters{}, slots: o.servers * o.concurrency}
	defer func() {
		if err != nil {
			s.close(context.Background())
		}
	}()

	s.transport = &http.Transport{
		MaxIdleConnsPerHost: o.concurrency * 4,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	pool := &leastLoaded{}
	for i := range o.servers {
		m, err := modelserver.New(modelConfig(o, i))
		if err != nil {
			return s, err
		}
		s.models = append(s.models, m)
		addr, err := s.serve("127.0.0.1:0", spoofHeadroom(m))
		if err != nil {
			return s, err
		}
		pool.add(s.proxyTo(&url.URL{Scheme: "http", Host: addr}))
	}

	var cfg flowcontrol.Config
	for _, b := range bands {
		cfg.Bands = append(cfg.Bands, flowcontrol.BandConfig{
			Priority:        b.priority,
			RequestCapacity: capacity.Bounded(b.capacity),
			TTL:             b.ttl,
			Policy:          b.policy,
			Fairness:        o.fairness,
		})
		s.counters[b.priority] = newBandCounters(b.priority)
	}
	cfg.FallbackPriority = fallbackPriority
	cfg.NoDisplacement = o.noDisplace
	cfg.NoEndpointsTTL = noEndpointsTTL
	cfg.Gate = g.gate
	cfg.Observer = s.observe
	if s.fc, err = flowcontrol.New(cfg); err != nil {
		return s, err
	}
	// The servers' load is read before the gateway takes its first
	// request, so that a saturation gate knows its endpoints.
	s.reader = readServers(s.models, g.saturation)

	gateway, err := flowhttp.New(flowhttp.Config{
		Controller: s.fc,
		Classify:   classify,
	}, pool)
	if err != nil {
		return s, err
	}
	addr, err := s.serve(gatewayAddr, gateway)
	if err != nil {
		return s, fmt.Errorf("gateway: %w", err)
	}
	s.gatewayURL = "http://" + addr
	return s, nil
}

// modelConfig is the configuration of model server i.
func modelConfig(o options, i int) modelserver.Config {
	return modelserver.Config{
		Name:          "vllm-" + strconv.Itoa(i),
		Model:         modelName,
		Slots:         o.concurrency,
		KVCacheTokens: o.kvCacheTokens,
		MaxModelLen:   min(o.kvCacheTokens, modelserver.DefaultMaxModelLen),
	}
}

// spoofHeadroom wraps a model server that, though it has no business
// advertising the router's headroom, does so anyway: the gateway must
// replace the value.
func spoofHeadroom(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(headroom.HeaderName, "999")
		next.ServeHTTP(w, r)
	})
}

// serve serves h on addr until close and returns the address it listens on.
func (s *system) serve(addr string, h http.Handler) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ErrorLog: quietLog, ReadHeaderTimeout: 5 * time.Second}
	s.servers = append(s.servers, srv)
	s.serving.Go(func() { _ = srv.Serve(l) })
	return l.Addr().String(), nil
}

// close rejects the requests still queued, lets the admitted ones finish
// until ctx ends, then closes every server and connection and waits for the
// servers' goroutines.
func (s *system) close(ctx context.Context) {
	if s.fc != nil {
		s.fc.Close()
	}
	if s.reader != nil {
		s.reader.close()
	}
	// Last started, first stopped: the gateway, then the model servers.
	for _, srv := range slices.Backward(s.servers) {
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}
	s.serving.Wait()
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// headers is the gateway's header classifier: the flow is the
// x-llm-d-inference-fairness-id, the priority x-llm-d-priority.
var headers = flowhttp.HeaderClassifier{PriorityHeader: priorityHeader}

// classify is the gateway's classifier: the flow key and TTL of its
// headers, and as cost the request's estimated tokens, so that the fairness
// policy shares tokens, not requests.
func classify(r *http.Request) (flowhttp.Classification, error) {
	class, err := headers.Classify(r)
	if err != nil {
		return class, err
	}
	body, err := io.ReadAll(r.Body) // the Handler's replay of the body it read
	if err != nil {
		return class, err
	}
	class.Cost = flowhttp.EstimateTokens(body, 0)
	return class, nil
}

// observe counts one flow-control outcome; it is the controller's Observer.
func (s *system) observe(ev flowcontrol.Event) {
	c := s.counters[ev.Effective.Priority]
	if c == nil || int(ev.Outcome) >= numOutcomes {
		return // not a band of this demo, or an outcome it does not know
	}
	c.flow(ev.Requested.ID).count(ev)
}

// proxyTo returns a reverse proxy to the model server at target.
func (s *system) proxyTo(target *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: s.transport,
		ErrorLog:  quietLog,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				http.Error(w, "model server: "+err.Error(), http.StatusBadGateway)
			}
		},
	}
}

// leastLoaded sends each request to the model server with the fewest
// requests in flight from the gateway, the first of them on a tie. The
// product's picker (examples/deploy's cmd/sluice-gateway) also weighs each
// server's scraped queue and health; it is part of a binary in a nested
// module, which this one cannot import, and the demo's servers, always up
// and fed by one gateway, need only the count.
type leastLoaded struct {
	mu       sync.Mutex
	servers  []http.Handler
	inFlight []int // by server; guarded by mu
}

// add adds a server; call it before the first request.
func (p *leastLoaded) add(server http.Handler) {
	p.servers = append(p.servers, server)
	p.inFlight = append(p.inFlight, 0)
}

// ServeHTTP sends r to the least loaded server, counting it there until
// the server's answer ends.
func (p *leastLoaded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	best := slices.Index(p.inFlight, slices.Min(p.inFlight))
	p.inFlight[best]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight[best]--
		p.mu.Unlock()
	}()
	p.servers[best].ServeHTTP(w, r)
}

// checkLoopback returns addr with an empty host replaced by 127.0.0.1, or an
// error if its host is not a loopback address: the demo never listens
// beyond the machine.
func checkLoopback(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("-listen %q: %w", addr, err)
	}
	switch host {
	case "":
		return net.JoinHostPort("127.0.0.1", port), nil
	case "localhost":
		return addr, nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", errors.New("-listen " + addr + ": only loopback addresses (127.0.0.1:PORT, [::1]:PORT, localhost:PORT)")
	}
	return addr, nil
}
