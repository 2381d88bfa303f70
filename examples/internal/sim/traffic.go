package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Tenant is one source of requests: a flow with its own priority, SLO,
// prompt and output sizes, arrival process and retry behaviour.
//
// Arrivals are open-loop (Phases: a Poisson process whose rate changes from
// phase to phase), closed-loop (Clients, each sending its next request a
// think time after the previous one finished), or driven by the scenario's
// own code through [Sim.NewRecord] and [Sim.Send] (neither set).
type Tenant struct {
	// Name is the flow ID of its requests.
	Name string
	// Priority is the band its requests ask for.
	Priority int
	// SLO, if positive, is sent in x-llm-d-slo-ttft-ms; a request meets it
	// when its first token arrives within SLO of its first attempt.
	SLO time.Duration
	// TTL is each attempt's own queue-wait TTL (its client's timeout);
	// 0 means none.
	TTL time.Duration
	// PromptTokens and OutputTokens are the sizes of its requests.
	PromptTokens, OutputTokens Tokens

	// Phases is the open-loop arrival rate over time, cycled until the
	// scenario's Duration. A phase with For 0 lasts to the end.
	Phases []Phase
	// RandomPhases draws each phase's length from an exponential
	// distribution of mean For, instead of using For as is.
	RandomPhases bool

	// Clients is the number of closed-loop clients; each waits a think time
	// (exponential, mean Think) before each request.
	Clients int
	Think   time.Duration

	// Retry is what a client does when an attempt is not served.
	Retry Retry
}

// Phase is a stretch of open-loop arrivals at Rate requests per second
// (0: none, an idle gap). PromptTokens and OutputTokens, when their Mean
// is set, replace the tenant's sizes for the requests that arrive in the
// phase (prompts that double mid-run, say).
type Phase struct {
	Rate                       float64
	For                        time.Duration
	PromptTokens, OutputTokens Tokens
}

// Tokens is a log-normal distribution of token counts with the given mean
// and shape Sigma (0: always Mean), rounded to a whole count.
type Tokens struct {
	Mean  float64
	Sigma float64
}

// draw returns one count. Rounding to a whole count absorbs the last-bit
// differences of math.Exp between platforms, so a seed prints the same
// bytes everywhere.
func (t Tokens) draw(rng *rand.Rand) int {
	if t.Sigma == 0 {
		return int(math.Round(t.Mean))
	}
	mu := math.Log(t.Mean) - float64(t.Sigma*t.Sigma)/2
	// The explicit conversion keeps the compiler from fusing the
	// multiply-add, which some platforms would round differently.
	return int(math.Round(math.Exp(mu + float64(t.Sigma*rng.NormFloat64()))))
}

// Retry is a client's retry policy, modelled on the OpenAI SDKs: after an
// attempt that is not served, it waits the Retry-After that came with it,
// if any (and at most MaxRetryAfter; see [RetryAfterOutcome]), otherwise
// a backoff of Backoff × 2^(retries so far), capped at MaxBackoff and
// shortened by up to a quarter at random; then it sends the same request
// again. It gives up after MaxAttempts attempts, or when the next attempt
// would start more than GiveUpAfter after the first.
type Retry struct {
	MaxAttempts   int // 0 or 1: never retry
	GiveUpAfter   time.Duration
	Backoff       time.Duration
	MaxBackoff    time.Duration
	MaxRetryAfter time.Duration
	// IgnoreRetryAfter makes the client use its backoff always.
	IgnoreRetryAfter bool
}

// SDKRetry is the OpenAI SDKs' default: three attempts, backoff 0.5 s
// doubling to at most 8 s, Retry-After honoured up to 60 s.
var SDKRetry = Retry{MaxAttempts: 3, Backoff: 500 * time.Millisecond, MaxBackoff: 8 * time.Second, MaxRetryAfter: time.Minute}

// delay returns the wait before retry number retries+1 (retries >= 0),
// given the Retry-After of the last response (0: none).
func (r Retry) delay(retries int, retryAfter time.Duration, rng *rand.Rand) time.Duration {
	if retryAfter > 0 && retryAfter <= r.MaxRetryAfter && !r.IgnoreRetryAfter {
		return retryAfter
	}
	d := r.MaxBackoff
	if retries < 30 {
		d = min(r.Backoff<<retries, r.MaxBackoff)
	}
	jitter := 1 - rng.Float64()/4
	return time.Duration(float64(d) * jitter).Round(time.Microsecond)
}

// maxRate bounds a phase's rate: arrival gaps are whole microseconds, and
// far above this they would round to zero and stall the clock.
const maxRate = 100_000

func (t Tenant) validate(i int) error {
	name := fmt.Sprintf("sim: Tenants[%d] (%s)", i, t.Name)
	tokens := []Tokens{t.PromptTokens, t.OutputTokens}
	for j, ph := range t.Phases {
		if !(ph.Rate >= 0 && ph.Rate <= maxRate) || ph.For < 0 || (t.RandomPhases && ph.For < time.Millisecond) {
			return fmt.Errorf("%s.Phases[%d] %+v: want 0 <= Rate <= %d and For >= 0 (>= 1ms with RandomPhases)", name, j, ph, maxRate)
		}
		tokens = append(tokens, ph.PromptTokens, ph.OutputTokens)
	}
	for _, tk := range tokens {
		if !(tk.Mean >= 0 && tk.Mean < 1e9) || !(tk.Sigma >= 0 && tk.Sigma < 5) || (tk.Sigma > 0 && tk.Mean == 0) {
			return fmt.Errorf("%s: tokens %+v: want 0 <= Mean < 1e9 and 0 <= Sigma < 5, Mean > 0 with Sigma", name, tk)
		}
	}
	switch {
	case t.Clients < 0:
		return fmt.Errorf("%s.Clients %d is negative", name, t.Clients)
	case t.Clients > 0 && len(t.Phases) > 0:
		return fmt.Errorf("%s: both Clients and Phases set; a tenant is open- or closed-loop", name)
	case t.Think < 0 || t.SLO < 0 || t.TTL < 0:
		return fmt.Errorf("%s: Think %v, SLO %v and TTL %v must not be negative", name, t.Think, t.SLO, t.TTL)
	case t.Retry.MaxAttempts < 0 || t.Retry.GiveUpAfter < 0 || t.Retry.Backoff < 0 || t.Retry.MaxBackoff < 0:
		return fmt.Errorf("%s.Retry %+v: negative field", name, t.Retry)
	case t.Retry.MaxAttempts > 1 && t.Retry.Backoff < time.Millisecond:
		return fmt.Errorf("%s.Retry.Backoff %v is below 1ms", name, t.Retry.Backoff)
	}
	return nil
}

// exponential draws an exponential duration of the given mean, rounded to
// the microsecond.
func exponential(rng *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(rng.ExpFloat64() * float64(mean)).Round(time.Microsecond)
}

// openLoop generates a tenant's Poisson arrivals, one pending event at a
// time.
type openLoop struct {
	s        *Sim
	tenant   int
	rng      *rand.Rand // arrival gaps and phase lengths
	phase    int
	phaseEnd time.Duration
}

func (o *openLoop) startPhase(at time.Duration) {
	ph := o.s.cfg.Tenants[o.tenant].Phases[o.phase]
	switch {
	case ph.For == 0:
		o.phaseEnd = math.MaxInt64
	case o.s.cfg.Tenants[o.tenant].RandomPhases:
		o.phaseEnd = at + max(exponential(o.rng, ph.For), time.Microsecond)
	default:
		o.phaseEnd = at + ph.For
	}
}

// next schedules the arrival after at. The rate is constant within a
// phase, so a gap that crosses the phase's end is redrawn from there at the
// next phase's rate (Poisson arrivals are memoryless).
func (o *openLoop) next(at time.Duration) {
	t := o.s.cfg.Tenants[o.tenant]
	for at < o.s.cfg.Duration {
		rate := t.Phases[o.phase].Rate
		if rate > 0 {
			gap := time.Duration(o.rng.ExpFloat64() / rate * float64(time.Second)).Round(time.Microsecond)
			if at+gap < o.phaseEnd {
				at += gap
				if at >= o.s.cfg.Duration {
					return
				}
				o.s.clock.At(at, o.arrive)
				return
			}
		}
		at = o.phaseEnd
		o.phase = (o.phase + 1) % len(t.Phases)
		o.startPhase(at)
	}
}

func (o *openLoop) arrive() {
	now := o.s.clock.Elapsed()
	t := &o.s.cfg.Tenants[o.tenant]
	prompt, output := t.PromptTokens, t.OutputTokens
	if ph := t.Phases[o.phase]; ph.PromptTokens.Mean > 0 {
		prompt = ph.PromptTokens
	}
	if ph := t.Phases[o.phase]; ph.OutputTokens.Mean > 0 {
		output = ph.OutputTokens
	}
	o.s.Request(o.s.newRecord(o.tenant, prompt, output), nil)
	o.next(now)
}

// closedLoop is one client that sends a request, waits for its outcome
// (retries included), thinks, and sends the next.
type closedLoop struct {
	s      *Sim
	tenant int
	rng    *rand.Rand
}

func (c *closedLoop) thinkThenSend() {
	c.s.clock.After(exponential(c.rng, c.s.cfg.Tenants[c.tenant].Think), func() {
		if c.s.clock.Elapsed() >= c.s.cfg.Duration {
			return
		}
		c.s.Request(c.s.NewRecord(c.tenant), func(*Record) { c.thinkThenSend() })
	})
}
