package main

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/headroom"
)

// backend is one model server the gateway forwards to.
type backend struct {
	// name is the base URL as configured: the name the scraper, the
	// saturation gate and the metrics know the backend by.
	name  string
	addr  string // host:port, the port filled in from the scheme
	proxy *httputil.ReverseProxy
	// inFlight counts the requests this gateway has sent to the backend
	// and whose responses have not ended.
	inFlight atomic.Int64
	// waiting is vllm:num_requests_waiting at the latest scrape; 0 before
	// any.
	waiting atomic.Int64
	// failing is set while the latest scrape of the backend failed.
	failing atomic.Bool
	// bands counts inFlight by band, with the priority hand-off on.
	bands bandLoad
	health
	outlier
}

// pool is the set of backends and the load balancer over them. It is an
// http.Handler: each request goes to the backend [pool.pick] chooses.
//
// The set is replaced whole on reload; a request holds the backend it was
// sent to, so a backend removed by a reload finishes what it was given.
type pool struct {
	backends  atomic.Pointer[[]*backend]
	next      atomic.Uint64 // where the next pick starts, so ties rotate
	transport http.RoundTripper
	poolConfig

	setMu   sync.Mutex // serializes set
	ejectMu sync.Mutex // serializes ejections, which count the ejected

	healthMu sync.Mutex    // serializes the count told to endpoints
	wake     chan struct{} // a backend may need probing; see watch
}

// poolConfig is what a pool needs besides its backends.
type poolConfig struct {
	log *slog.Logger
	// endpoints, if set, hears how many backends are up (see health).
	endpoints *gate.EndpointsGate
	// stale is the saturation gate's staleness threshold: a backend's
	// scrapes make it down only once they have failed for that long,
	// counted from its last good one; 0: scrapes never make it down.
	stale time.Duration
	// unhealthyThreshold is how many scrapes in a row must fail before a
	// backend is down (once they have failed for stale); 0 means
	// DefaultUnhealthyThreshold. One missed scrape on a busy host is not
	// an outage.
	unhealthyThreshold int
	// unhealthyWindow, if positive, makes a backend down once its last
	// good scrape is that old, however few scrapes failed (slow ones).
	unhealthyWindow time.Duration
	// dial opens the connections to the backends, the proxies' and the
	// probes'; nil means a net.Dialer's, with http.DefaultTransport's
	// timeout and keep-alive.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// clock times the scrapes' staleness, the probes' backoff and the
	// ejections; nil means the real clock.
	clock flowcontrol.Clock
	// outlier configures outlier detection (see outlier.go); the zero
	// value turns it off.
	outlier outlierConfig
	// maxInFlight is the most requests the gate lets be in flight, which
	// sizes the idle connections kept to the backends; 0 when the gate
	// sets no such limit.
	maxInFlight int
	// byBand, set with the priority hand-off on, makes pick weigh only
	// the requests a backend runs ahead of the one being sent: those of
	// its band and above. slots, if positive, is each backend's slots
	// (gate.saturation.slotsPerEndpoint).
	byBand bool
	slots  int
}

// idleConns returns the transport's MaxIdleConns and MaxIdleConnsPerHost
// for a gate that lets at most maxInFlight requests be in flight (0: no
// limit): that many in all and per backend, since they may all go to one;
// without a limit, as many as the load opens (0 is net/http's "no limit"
// in all, but its default of 2 per host).
func idleConns(maxInFlight int) (total, perHost int) {
	if maxInFlight <= 0 {
		return 0, math.MaxInt32
	}
	return maxInFlight, maxInFlight
}

func newPool(urls []*url.URL, cfg poolConfig) *pool {
	if cfg.dial == nil {
		cfg.dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if cfg.clock == nil {
		cfg.clock = flowcontrol.RealClock{}
	}
	if cfg.outlier.baseEjectionTime <= 0 {
		cfg.outlier.baseEjectionTime = DefaultBaseEjectionTime
	}
	if cfg.outlier.maxEjectionPercent <= 0 {
		cfg.outlier.maxEjectionPercent = DefaultMaxEjectionPercent
	}
	if cfg.unhealthyThreshold <= 0 {
		cfg.unhealthyThreshold = DefaultUnhealthyThreshold
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Keep as many idle connections as there can be requests in flight,
	// so that a request never waits for a dial once the load has been
	// seen: net/http's defaults (2 per host, 100 in all) would close most
	// connections a burst opened and dial again for the next one, which
	// under overload spends the CPU the requests need (and leaves sockets
	// in TIME-WAIT). Idle connections still close after IdleConnTimeout.
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = idleConns(cfg.maxInFlight)
	p := &pool{transport: tr, poolConfig: cfg, wake: make(chan struct{}, 1)}
	tr.DialContext = markDialErrors(func(ctx context.Context, network, addr string) (net.Conn, error) {
		return p.dial(ctx, network, addr) // read at each dial, so that a test can swap it
	})
	p.set(urls)
	return p
}

// set replaces the backends by urls. A backend that stays keeps its counts.
func (p *pool) set(urls []*url.URL) {
	p.setMu.Lock()
	defer p.setMu.Unlock()
	old := map[string]*backend{}
	if cur := p.backends.Load(); cur != nil {
		for _, b := range *cur {
			old[b.name] = b
		}
	}
	next := make([]*backend, 0, len(urls))
	for _, u := range urls {
		if b := old[u.String()]; b != nil {
			next = append(next, b)
			continue
		}
		next = append(next, p.newBackend(u))
	}
	p.backends.Store(&next)
	p.healthChanged()
	p.poke() // probe the new backends
}

// list returns the current backends; the slice must not be modified.
func (p *pool) list() []*backend { return *p.backends.Load() }

// find returns the backend named name, or nil.
func (p *pool) find(name string) *backend {
	for _, b := range p.list() {
		if b.name == name {
			return b
		}
	}
	return nil
}

// newBackend returns a backend that proxies to u. It is down until a
// connection to it succeeds.
func (p *pool) newBackend(u *url.URL) *backend {
	b := &backend{name: u.String(), addr: hostPort(u)}
	b.lastScrape.Store(p.clock.Now().UnixNano()) // its scrapes age from now
	target := *u
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&target)
			pr.SetXForwarded()
			sendInMemory(pr)
		},
		Transport:  p.transport,
		BufferPool: copyBuffers,
		// No FlushInterval: the proxy flushes every write of a streamed
		// completion (text/event-stream) and of any response of unknown
		// length at once, so that events reach the client as the model
		// produces them; a response of known length (a completion that is
		// not streamed) is written whole, without a flush per write.
		ModifyResponse: func(resp *http.Response) error {
			p.reach(b) // it answered
			p.record(b, resp.StatusCode, resp.Request.URL.Path)
			// flowhttp strips them again as it writes the header, the 1xx
			// headers and the trailers; this also covers a protocol upgrade
			// (101), whose headers the proxy writes itself, past the Handler.
			return flowhttp.StripRouterOwnedResponse(resp)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				// The client went away; nobody reads an answer.
				p.log.Debug("request abandoned by its client", "backend", b.name, "path", r.URL.Path, "error", err)
				return
			}
			p.log.Warn("backend request failed", "backend", b.name, "path", r.URL.Path, "error", err)
			p.record(b, http.StatusBadGateway, r.URL.Path)
			// The error names the backend's address, and the client has
			// no business knowing it: the log has it.
			msg := "sluice-gateway: the model server failed to answer"
			if de := (*dialError)(nil); errors.As(err, &de) {
				p.unreachable(b, de.err)
				msg = "sluice-gateway: the model server could not be reached"
			}
			flowhttp.ErrorRejection(http.StatusBadGateway, msg).Write(w)
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	return b
}

// copyBufferSize is the size of the buffers the proxies copy response
// bodies through: httputil.ReverseProxy's own.
const copyBufferSize = 32 << 10

// copyBuffers lends the proxies the buffers they copy response bodies
// through. Without it a ReverseProxy allocates one of 32 KiB per
// response, most of what a request allocates, and the collector's work
// grows with it.
var copyBuffers httputil.BufferPool = bufferPool{}

// bufferPool is an httputil.BufferPool over a sync.Pool of arrays, which
// hold no slice header to allocate on Put, and which the collector frees
// when they go unused.
type bufferPool struct{}

var copyArrays = sync.Pool{New: func() any { return new([copyBufferSize]byte) }}

func (bufferPool) Get() []byte { return copyArrays.Get().(*[copyBufferSize]byte)[:] }

func (bufferPool) Put(b []byte) {
	if cap(b) == copyBufferSize {
		copyArrays.Put((*[copyBufferSize]byte)(b[:copyBufferSize]))
	}
}

// pick returns the backend to send the next request to: among the
// backends that are up (all of them when none is: the gate refuses then,
// so only a request admitted as the last one went down gets here), those
// that outlier detection has not ejected (all of them when it has ejected
// every one), those whose latest scrape did not fail (all of them when
// every one failed), the one with the fewest requests in flight from this
// gateway, then the fewest waiting at its latest scrape; ties go to each
// in turn. It returns nil when there is no backend.
func (p *pool) pick() *backend { return p.pickFor(0, false) }

// pickFor is pick for a request of band, when banded. With byBand (the
// hand-off on, so that the backends serve the higher bands first) a
// banded request goes, before the fewest in flight, where the fewest of
// this gateway's requests of its band and above are beyond the slots
// less one: where it starts at once, preempting a lower band if it must,
// rather than queue behind its own band elsewhere. Without declared
// slots, the fewest of its band and above.
func (p *pool) pickFor(band int, banded bool) *backend {
	list := p.list()
	n := len(list)
	if n == 0 {
		return nil
	}
	var now int64
	if p.outlier.consecutive5xx > 0 {
		now = p.clock.Now().UnixNano()
	}
	start := int(p.next.Add(1) % uint64(n))
	byBand := p.byBand && banded
	var best *backend
	var bestDown, bestEjected, bestFailing bool
	var bestBehind, bestInFlight, bestWaiting int64
	for i := range n {
		b := list[(start+i)%n]
		down, failing, inFlight, waiting := !b.up(), b.failing.Load(), b.inFlight.Load(), b.waiting.Load()
		ejected := now != 0 && !p.returned(b, now)
		var behind int64
		if byBand {
			behind = b.bands.atOrAbove(band)
			if p.slots > 0 {
				behind = max(behind-int64(p.slots)+1, 0)
			}
		}
		var better bool
		switch {
		case best == nil:
			better = true
		case bestDown != down:
			better = bestDown
		case bestEjected != ejected:
			better = bestEjected
		case bestFailing != failing:
			better = bestFailing
		case bestBehind != behind:
			better = behind < bestBehind
		default:
			better = inFlight < bestInFlight || (inFlight == bestInFlight && waiting < bestWaiting)
		}
		if better {
			best, bestDown, bestEjected, bestFailing, bestBehind, bestInFlight, bestWaiting = b, down, ejected, failing, behind, inFlight, waiting
		}
	}
	return best
}

// ServeHTTP sends r to the backend pick chooses, and answers 503 when
// there is none.
func (p *pool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	band, banded := headroom.FromContext(r.Context()).Priority()
	b := p.pickFor(band, banded)
	if b == nil {
		flowhttp.ErrorRejection(http.StatusServiceUnavailable, "sluice-gateway: no backend to send the request to").Write(w)
		return
	}
	b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	if p.byBand && banded {
		b.bands.add(band, 1)
		defer b.bands.add(band, -1)
	}
	if sw, ok := w.(*sseWriter); ok {
		sw.backend = b.name // for the log of a response cut off: see streamGuard
	}
	b.proxy.ServeHTTP(w, r)
}

// scraped records a successful scrape of backend name, read at readAt.
func (p *pool) scraped(name string, waiting int, readAt time.Time) {
	if b := p.find(name); b != nil {
		b.waiting.Store(int64(waiting))
		b.failing.Store(false)
		b.scrapeFailures.Store(0)
		p.scrapeOK(b, readAt)
	}
}

// scrapeFailed records a failed scrape of backend name.
func (p *pool) scrapeFailed(name string) {
	if b := p.find(name); b != nil {
		b.failing.Store(true)
		b.scrapeFailures.Add(1)
		p.scrapeStale(b)
	}
}

// closeIdle closes the idle connections to the backends.
func (p *pool) closeIdle() {
	if tr, ok := p.transport.(interface{ CloseIdleConnections() }); ok {
		tr.CloseIdleConnections()
	}
}

// sendInMemory gives the outbound request of an admitted request the
// body flowhttp read before queueing, as flowhttp replays it: the proxy
// wraps the body it forwards in a type of its own, which net/http's
// Transport cannot tell is in memory, so it would write the request's
// header and body in two writes (two packets) rather than one. flowhttp
// sets GetBody on the requests it replays a body to, and nothing reads
// that body before the proxy, so it is forwarded as it is, with no copy
// of the reader to allocate. The outbound request keeps no GetBody, so
// the Transport retries it no more than before. A request passed straight
// through has no GetBody and keeps its body, read as it arrives.
func sendInMemory(pr *httputil.ProxyRequest) {
	if pr.In.GetBody == nil || pr.Out.Body == nil || pr.In.Body == nil {
		return
	}
	pr.Out.Body = pr.In.Body
	pr.Out.GetBody = nil
}
