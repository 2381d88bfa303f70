package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// backend is one model server the gateway forwards to.
type backend struct {
	// name is the base URL as configured: the name the scraper, the
	// saturation gate and the metrics know the backend by.
	name  string
	proxy *httputil.ReverseProxy
	// inFlight counts the requests this gateway has sent to the backend
	// and whose responses have not ended.
	inFlight atomic.Int64
	// waiting is vllm:num_requests_waiting at the latest scrape; 0 before
	// any.
	waiting atomic.Int64
	// failing is set while the latest scrape of the backend failed.
	failing atomic.Bool
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
	log       *slog.Logger

	setMu sync.Mutex // serializes set
}

func newPool(urls []*url.URL, log *slog.Logger) *pool {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// One gateway sends everything to a handful of hosts; the default of 2
	// idle connections per host would dial a new connection for most
	// requests under load.
	tr.MaxIdleConnsPerHost = 256
	p := &pool{transport: tr, log: log}
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

// newBackend returns a backend that proxies to u.
func (p *pool) newBackend(u *url.URL) *backend {
	b := &backend{name: u.String()}
	target := *u
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&target)
			pr.SetXForwarded()
		},
		Transport: p.transport,
		// Flush every write at once: a streamed completion's events must
		// reach the client as the model produces them.
		FlushInterval:  -1,
		ModifyResponse: stripRouterOwned,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				// The client went away; nobody reads an answer.
				p.log.Debug("request abandoned by its client", "backend", b.name, "path", r.URL.Path, "error", err)
				return
			}
			p.log.Warn("backend request failed", "backend", b.name, "path", r.URL.Path, "error", err)
			flowhttp.ErrorRejection(http.StatusBadGateway, "sluice-gateway: backend "+b.name+": "+err.Error()).Write(w)
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	return b
}

// pick returns the backend to send the next request to: among the
// backends whose latest scrape did not fail (all of them when every one
// failed), the one with the fewest requests in flight from this gateway,
// then the fewest waiting at its latest scrape; ties go to each in turn.
// It returns nil when there is no backend.
func (p *pool) pick() *backend {
	list := p.list()
	n := len(list)
	if n == 0 {
		return nil
	}
	start := int(p.next.Add(1) % uint64(n))
	var best *backend
	var bestFailing bool
	var bestInFlight, bestWaiting int64
	for i := range n {
		b := list[(start+i)%n]
		failing, inFlight, waiting := b.failing.Load(), b.inFlight.Load(), b.waiting.Load()
		better := best == nil ||
			(bestFailing && !failing) ||
			(bestFailing == failing && (inFlight < bestInFlight || (inFlight == bestInFlight && waiting < bestWaiting)))
		if better {
			best, bestFailing, bestInFlight, bestWaiting = b, failing, inFlight, waiting
		}
	}
	return best
}

// ServeHTTP sends r to the backend pick chooses, and answers 503 when
// there is none.
func (p *pool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b := p.pick()
	if b == nil {
		flowhttp.ErrorRejection(http.StatusServiceUnavailable, "sluice-gateway: no backend to send the request to").Write(w)
		return
	}
	b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	b.proxy.ServeHTTP(w, r)
}

// scraped records a successful scrape of backend name.
func (p *pool) scraped(name string, waiting int) {
	if b := p.find(name); b != nil {
		b.waiting.Store(int64(waiting))
		b.failing.Store(false)
	}
}

// scrapeFailed records a failed scrape of backend name.
func (p *pool) scrapeFailed(name string) {
	if b := p.find(name); b != nil {
		b.failing.Store(true)
	}
}

// closeIdle closes the idle connections to the backends.
func (p *pool) closeIdle() {
	if tr, ok := p.transport.(interface{ CloseIdleConnections() }); ok {
		tr.CloseIdleConnections()
	}
}

// stripRouterOwned is the proxies' ModifyResponse: it removes every copy
// of the router-owned headers (flowhttp.RouterOwnedHeaders) a backend
// sent, from the response header, from the trailers it declared, and from
// the trailers that arrive with the end of the body, declared or not.
// flowhttp's Handler strips them again when it writes the header, the 1xx
// headers (which the proxy forwards through it) and the trailers; this
// also covers a protocol upgrade (101), whose headers the proxy writes
// itself, past the Handler.
func stripRouterOwned(resp *http.Response) error {
	flowhttp.StripRouterOwned(resp.Header)
	flowhttp.StripRouterOwned(resp.Trailer)
	if resp.Body != nil && resp.Body != http.NoBody && resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body = &trailerStrippingBody{ReadCloser: resp.Body, resp: resp}
	}
	return nil
}

// trailerStrippingBody strips the router-owned names from resp.Trailer
// when the body reports its end: the transport fills resp.Trailer before
// the last Read returns, and the proxy copies it after.
type trailerStrippingBody struct {
	io.ReadCloser
	resp *http.Response
}

func (b *trailerStrippingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		flowhttp.StripRouterOwned(b.resp.Trailer)
	}
	return n, err
}
