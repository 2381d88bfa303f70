package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/headroom"
)

// class is one kind of traffic the load generator sends.
type class struct {
	name     string
	tenant   string // x-llm-d-inference-fairness-id
	priority int    // requested, in x-llm-d-priority
	band     int    // the band that serves it: priority, or the fallback band
	share    float64
	slosMS   []int  // x-llm-d-slo-ttft-ms values, one drawn per request; nil: none
	prompt   [2]int // prompt tokens, drawn uniformly from [min, max]
	output   [2]int // max_tokens, drawn uniformly from [min, max]
	chat     bool   // sent to /v1/chat/completions, not /v1/completions
}

// classes is the traffic mix. Priority 5 has no band: it falls back to band 0.
var classes = []class{
	{name: "interactive", tenant: "chat-app", priority: 10, band: 10, share: 0.25,
		slosMS: []int{150, 300, 1000}, prompt: [2]int{50, 400}, output: [2]int{8, 32}, chat: true},
	{name: "standard", tenant: "api", priority: 0, band: 0, share: 0.25,
		slosMS: []int{2000}, prompt: [2]int{200, 1500}, output: [2]int{16, 48}},
	{name: "unprovisioned", tenant: "legacy-app", priority: 5, band: fallbackPriority, share: 0.10,
		prompt: [2]int{200, 800}, output: [2]int{16, 32}},
	// Two tenants share the sheddable band: a heavy batch job and a light
	// evaluation suite, with a tenth of its rate and short prompts.
	{name: "batch", tenant: "batch-etl", priority: -10, band: -10, share: 0.36,
		prompt: [2]int{1000, 3000}, output: [2]int{32, 64}},
	{name: "eval", tenant: "eval-suite", priority: -10, band: -10, share: 0.04,
		prompt: [2]int{50, 300}, output: [2]int{8, 24}},
}

// meanServiceTime is the mean time a model server of configuration cfg
// works on a request of the mix, once it has a slot.
func meanServiceTime(cfg modelserver.Config) time.Duration {
	var mean float64
	for _, c := range classes {
		s := cfg.ServiceTime((c.prompt[0]+c.prompt[1])/2, (c.output[0]+c.output[1])/2)
		mean += c.share * float64(s)
	}
	return time.Duration(mean)
}

// classStats is what the clients of one class saw.
type classStats struct {
	mu        sync.Mutex
	sent      int
	completed int
	dropped   map[string]int // by x-llm-d-request-dropped-reason
	failed    int            // transport errors, other statuses, cut bodies
	sloMet    int            // completed within the SLO
	sloDone   int            // requests with an SLO that ended (completed or not)
	ttfts     []time.Duration

	headroomSeen int       // completed responses with a headroom header
	headroomBad  int       // malformed, or larger than the band's capacity
	lastHeadroom string    // last value seen
	lastAt       time.Time // when it was seen
}

// clientStats holds the classStats of every class, in the order of classes.
type clientStats []*classStats

func newClientStats() clientStats {
	s := make(clientStats, len(classes))
	for i := range s {
		s[i] = &classStats{dropped: map[string]int{}}
	}
	return s
}

// generator sends the mix to the gateway as a Poisson process.
type generator struct {
	client *http.Client
	url    string  // the gateway's, without a path
	rate   float64 // requests per second
	rng    *rand.Rand
	stats  clientStats
	wg     sync.WaitGroup // requests in progress
}

// run starts requests until ctx ends; each runs with reqCtx. Call wait
// afterwards for the requests still in progress.
func (g *generator) run(ctx, reqCtx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	next := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		// A generator that falls behind catches up, but not past the end
		// of its run.
		for ctx.Err() == nil && !next.After(time.Now()) {
			g.start(reqCtx)
			next = next.Add(time.Duration(g.rng.ExpFloat64() / g.rate * float64(time.Second)))
		}
		timer.Reset(time.Until(next))
	}
}

// wait waits for the requests in progress.
func (g *generator) wait() { g.wg.Wait() }

// start draws one request and sends it on a new goroutine.
func (g *generator) start(ctx context.Context) {
	i := 0
	for x := g.rng.Float64(); i < len(classes)-1 && x >= classes[i].share; i++ {
		x -= classes[i].share
	}
	c := classes[i]
	body := requestBody(c, between(g.rng, c.prompt), between(g.rng, c.output))
	slo := 0
	if len(c.slosMS) > 0 {
		slo = c.slosMS[g.rng.IntN(len(c.slosMS))]
	}
	st := g.stats[i]
	st.mu.Lock()
	st.sent++
	st.mu.Unlock()
	g.wg.Go(func() { g.send(ctx, c, st, body, slo) })
}

// requestBody is a streamed OpenAI request of class c: a completion or a
// chat completion of a prompt of promptTokens words (a token each, for the
// model servers) and max_tokens outputTokens.
func requestBody(c class, promptTokens, outputTokens int) []byte {
	prompt := strings.TrimSpace(strings.Repeat("lorem ", promptTokens))
	req := map[string]any{"model": modelName, "max_tokens": outputTokens, "stream": true}
	if c.chat {
		req["messages"] = []map[string]string{{"role": "user", "content": prompt}}
	} else {
		req["prompt"] = prompt
	}
	body, _ := json.Marshal(req)
	return body
}

// path is where requests of class c go.
func (c class) path() string {
	if c.chat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// between draws an integer uniformly from [r[0], r[1]].
func between(rng *rand.Rand, r [2]int) int { return r[0] + rng.IntN(r[1]-r[0]+1) }

// send sends one request and records what came back.
func (g *generator) send(ctx context.Context, c class, st *classStats, body []byte, sloMS int) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url+c.path(), bytes.NewReader(body))
	if err != nil {
		st.fail(sloMS > 0)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-llm-d-inference-fairness-id", c.tenant)
	req.Header.Set(priorityHeader, strconv.Itoa(c.priority))
	if sloMS > 0 {
		req.Header.Set(sloHeader, strconv.Itoa(sloMS))
	}
	resp, err := g.client.Do(req)
	if err != nil {
		st.fail(sloMS > 0)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		st.drop(resp.Header.Get(flowcontrol.DroppedReasonHeader), sloMS > 0)
		return
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		st.fail(sloMS > 0)
		return
	}
	ttft := time.Since(start)
	rest, err := io.ReadAll(r)
	if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		st.fail(sloMS > 0)
		return
	}
	st.complete(ttft, sloMS, resp.Header, bandCapacity(c.band))
}

// bandCapacity returns the request capacity of band priority.
func bandCapacity(priority int) int64 {
	for _, b := range bands {
		if b.priority == priority {
			return b.capacity
		}
	}
	return 0
}

func (s *classStats) fail(hasSLO bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed++
	if hasSLO {
		s.sloDone++
	}
}

func (s *classStats) drop(reason string, hasSLO bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if reason == "" {
		s.failed++
	} else {
		s.dropped[reason]++
	}
	// A request still queued when the demo stops says nothing about the
	// gateway: it does not count against the SLO.
	if hasSLO && reason != flowcontrol.OutcomeRejectedShuttingDown.String() {
		s.sloDone++
	}
}

func (s *classStats) complete(ttft time.Duration, sloMS int, h http.Header, capacity int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completed++
	s.ttfts = append(s.ttfts, ttft)
	if sloMS > 0 {
		s.sloDone++
		if ttft <= time.Duration(sloMS)*time.Millisecond {
			s.sloMet++
		}
	}
	switch n, err := headroom.Parse(h); {
	case errors.Is(err, headroom.ErrAbsent):
	case err != nil || n > int64(capacity):
		s.headroomSeen++
		s.headroomBad++
	default:
		s.headroomSeen++
		s.lastHeadroom, s.lastAt = strconv.FormatInt(n, 10), time.Now()
	}
}

// percentile returns the p-th percentile (0 < p ≤ 1) of ds, or 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
