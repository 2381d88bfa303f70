package main

// The README's recipes for interactive traffic beside a batch dispatcher,
// run as the README writes them, over HTTP, against two examples/modelserver
// servers: the gateway and the servers run in a synctest bubble over pipes
// (internal/pipenet), so every duration below is the bubble's fake time,
// exact and the same on a loaded machine as on an idle one.

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/internal/pipenet"
)

// readmeRecipe is one of the README's files for a batch dispatcher and the
// commands after it.
type readmeRecipe struct {
	name   string   // the file's name, "eviction.yaml" or "preempt.yaml"
	file   string   // its text
	args   []string // the gateway's arguments, the file's name as written
	policy string   // the servers' -scheduling-policy
}

// readmeRecipeFor returns the README's file name, from the section on a
// batch dispatcher, with the sh block that follows it: the gateway's
// command and, if the block starts the simulated servers, their
// scheduling policy (else Try it's servers, first-come).
func readmeRecipeFor(t *testing.T, name string) readmeRecipe {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Interactive traffic beside a batch dispatcher\n")
	if !ok {
		t.Fatal("README.md has no section on a batch dispatcher")
	}
	_, rest, ok := strings.Cut(section, "```yaml\n# "+name)
	if !ok {
		t.Fatalf("the section has no %s", name)
	}
	body, rest, _ := strings.Cut(rest, "```")
	r := readmeRecipe{name: name, file: "# " + name + body, policy: modelserver.PolicyFCFS}
	_, rest, _ = strings.Cut(rest, "```sh\n")
	block, _, _ := strings.Cut(rest, "```")
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 3 && strings.HasSuffix(fields[2], "/fake-vllm"):
			for i, f := range fields[3:] {
				if i+4 >= len(fields) {
					break
				}
				switch v := fields[i+4]; f {
				case "-n":
					if v != "2" {
						t.Fatalf("%s: the README starts %s servers, want 2: %q", name, v, line)
					}
				case "-scheduling-policy":
					r.policy = v
				}
			}
		case len(fields) >= 3 && strings.Join(fields[:3], " ") == "go run ./cmd/sluice-gateway":
			r.args = fields[3:]
		}
	}
	if r.args == nil {
		t.Fatalf("%s: no gateway command after the file:\n%s", name, block)
	}
	return r
}

// without returns args without flag and its value.
func without(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// Timing of the simulated servers in these runs: the fake server's
// defaults (8 slots, a 10 ms prefill), but a 20 ms decode step, so that a
// batch request of 200 tokens holds its slot 4 s with a fifth of the
// default's timer events.
const (
	recipeDecodeStep  = 20 * time.Millisecond
	batchTokens       = 200
	batchClients      = 48              // closed loop, no think time: the pool stays full
	warmUp            = 5 * time.Second // batch alone, before the first interactive burst
	burstEvery        = 1 * time.Second // an interactive burst each second, ...
	bursts            = 10              // ... ten of them, of runRecipe's burst streamed requests each
	interactiveTokens = 4               // each a short answer
	retryPause        = 50 * time.Millisecond
)

// recipeRun is what one run measured.
type recipeRun struct {
	ttft     []time.Duration // the interactive requests answered 200, sorted
	failed   []string        // the interactive requests not answered 200, and why
	batchOK  int             // batch requests answered 200
	batch429 int             // batch requests refused or revoked
}

func (r recipeRun) p95() time.Duration {
	if len(r.ttft) == 0 {
		return 0
	}
	return r.ttft[(len(r.ttft)*95+99)/100-1]
}

// runRecipe runs the gateway with args (file written in place of its
// name) in front of two servers with policy, a batch backlog beside
// interactive bursts of burst requests, and returns what the interactive
// requests saw.
func runRecipe(t *testing.T, r readmeRecipe, args []string, policy string, burst int) recipeRun {
	t.Helper()
	path := filepath.Join(t.TempDir(), r.name)
	if err := os.WriteFile(path, []byte(r.file), 0o600); err != nil {
		t.Fatal(err)
	}
	args = slices.Clone(args)
	for i, a := range args {
		if a == r.name {
			args[i] = path
		}
	}
	var run recipeRun
	synctest.Test(t, func(t *testing.T) {
		opts, err := parseFlags(args, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if len(opts.backends) != 2 {
			t.Fatalf("the README's command names %d backends, want 2", len(opts.backends))
		}
		// The two servers, each on its own in-memory listener, dialled by
		// the address the command gives it.
		servers := map[string]*pipenet.Listener{}
		for i, u := range opts.backends {
			ms, err := modelserver.New(modelserver.Config{Name: "backend-" + strconv.Itoa(i), SchedulingPolicy: policy, DecodeStep: recipeDecodeStep})
			if err != nil {
				t.Fatal(err)
			}
			l := pipenet.Listen()
			srv := &http.Server{Handler: ms}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
			servers[u.Host] = l
		}
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			l, ok := servers[addr]
			if !ok {
				return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrNotExist}
			}
			return l.Dial(ctx, network, addr)
		}
		backendTransport := &http.Transport{DialContext: dial}
		t.Cleanup(backendTransport.CloseIdleConnections)

		g, err := newGateway(opts, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		g.pool.dial = dial
		if g.scraper != nil {
			// The scraper newGateway builds, its client on the pipes.
			if g.scraper, err = g.newScraper(g.cur, &http.Client{Transport: backendTransport}); err != nil {
				t.Fatal(err)
			}
		}
		gl := pipenet.Listen()
		ctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- g.serve(ctx, gl) }()
		t.Cleanup(func() {
			stop()
			if err := <-served; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
		tr := &http.Transport{DialContext: gl.Dial, MaxIdleConnsPerHost: 2 * batchClients}
		t.Cleanup(tr.CloseIdleConnections)
		client := &http.Client{Transport: tr}
		for range 100 {
			if code, _ := bubbleGet(client, "http://gateway/readyz"); code == http.StatusOK {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if code, body := bubbleGet(client, "http://gateway/readyz"); code != http.StatusOK {
			t.Fatalf("the gateway is not ready after 1 s: %d %s", code, body)
		}

		// The dispatcher: batchClients loops, each sending its next batch
		// request as soon as the last one ends, after a short pause when
		// it was refused or revoked.
		batchCtx, stopBatch := context.WithCancel(context.Background())
		var mu sync.Mutex
		var dispatchers sync.WaitGroup
		batchBody := `{"model":"sim","messages":[{"role":"user","content":"summarize the corpus"}],"max_tokens":` + strconv.Itoa(batchTokens) + `}`
		for range batchClients {
			dispatchers.Go(func() {
				for batchCtx.Err() == nil {
					code, _, err := post(batchCtx, client, batchBody, "batch", false)
					mu.Lock()
					switch {
					case err != nil:
					case code == http.StatusOK:
						run.batchOK++
					default:
						run.batch429++
					}
					mu.Unlock()
					if code != http.StatusOK && batchCtx.Err() == nil {
						time.Sleep(retryPause)
					}
				}
			})
		}
		time.Sleep(warmUp)

		// The interactive bursts, streamed: the time to the first token
		// from the moment each request is sent.
		var users sync.WaitGroup
		body := `{"model":"sim","messages":[{"role":"user","content":"hi"}],"max_tokens":` + strconv.Itoa(interactiveTokens) + `,"stream":true}`
		for b := range bursts {
			for i := range burst {
				users.Go(func() {
					code, ttft, err := post(context.Background(), client, body, "interactive", true)
					mu.Lock()
					defer mu.Unlock()
					if err != nil || code != http.StatusOK {
						run.failed = append(run.failed, "burst "+strconv.Itoa(b)+" #"+strconv.Itoa(i)+": "+strconv.Itoa(code)+" "+errString(err))
						return
					}
					run.ttft = append(run.ttft, ttft)
				})
			}
			time.Sleep(burstEvery)
		}
		users.Wait()
		stopBatch()
		dispatchers.Wait()
		slices.Sort(run.ttft)
	})
	return run
}

// post sends body with objective and returns the status and, for a
// stream, the time to its first token; the whole answer is read.
func post(ctx context.Context, client *http.Client, body, objective string, stream bool) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://gateway/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-llm-d-inference-objective", objective)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var ttft time.Duration
	if stream && resp.StatusCode == http.StatusOK {
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if strings.HasPrefix(line, "data: {") {
				ttft = time.Since(start)
				break
			}
			if err != nil {
				return resp.StatusCode, 0, io.ErrUnexpectedEOF // no token streamed
			}
		}
		_, err = io.Copy(io.Discard, br)
		return resp.StatusCode, ttft, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, 0, err
}

func bubbleGet(client *http.Client, u string) (int, string) {
	resp, err := client.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkRecipe fails the test unless every interactive request of run was
// answered, with a p95 time to first token under 1 s, and batch work was
// served beside them.
func checkRecipe(t *testing.T, run recipeRun, burst int) {
	t.Helper()
	t.Logf("recipe: interactive p95 TTFT %v (max %v) of %d; batch %d answered, %d refused or revoked",
		run.p95(), slices.Max(append(run.ttft, 0)), len(run.ttft), run.batchOK, run.batch429)
	if len(run.failed) != 0 {
		t.Errorf("recipe: %d interactive requests not answered: %q", len(run.failed), run.failed)
	}
	if len(run.ttft) != bursts*burst {
		t.Errorf("recipe: %d interactive requests timed, want %d", len(run.ttft), bursts*burst)
	}
	if p := run.p95(); p >= time.Second {
		t.Errorf("recipe: interactive p95 TTFT %v, want under 1 s", p)
	}
	if run.batchOK == 0 {
		t.Error("recipe: no batch request was answered")
	}
}

// checkWorse fails the test unless run, a variant of the recipe, gave
// interactive requests a p95 time to first token at least three times
// the recipe's and at least floor.
func checkWorse(t *testing.T, what string, run, recipe recipeRun, floor time.Duration) {
	t.Helper()
	t.Logf("%s: interactive p95 TTFT %v of %d; batch %d answered, %d refused or revoked",
		what, run.p95(), len(run.ttft), run.batchOK, run.batch429)
	if run.p95() < 3*recipe.p95() || run.p95() < floor {
		t.Errorf("%s: interactive p95 TTFT %v, want at least %v and 3× the recipe's %v", what, run.p95(), floor, recipe.p95())
	}
}

// The README's recipe for servers run with vLLM's priority scheduler
// (preempt.yaml with the priority hand-off), under bursts of 12
// interactive requests, gives them a p95 time to first token under 1 s
// beside a batch backlog, every one answered. Each part counts: without
// the file's gate section (the servers' slots declared) the saturation
// gate cannot tell it may let interactive requests past the queues batch
// fills, and shuts on them, hand-off or not; without the hand-off the
// servers serve first come, and a burst waits for batch requests to end.
func TestREADMEPreemptRecipeOverHTTP(t *testing.T) {
	const burst = 12
	r := readmeRecipeFor(t, "preempt.yaml")
	if r.policy != modelserver.PolicyPriority || !slices.Contains(r.args, "-priority-handoff") {
		t.Fatalf("the README runs preempt.yaml with servers %q, gateway %q: want the priority scheduler and the hand-off", r.policy, r.args)
	}
	recipe := runRecipe(t, r, r.args, r.policy, burst)
	checkRecipe(t, recipe, burst)

	noHandoff := slices.DeleteFunc(slices.Clone(r.args), func(a string) bool { return a == "-priority-handoff" })
	checkWorse(t, "no hand-off, first-come servers", runRecipe(t, r, noHandoff, modelserver.PolicyFCFS, burst), recipe, 0)

	bare := r // the file's bands, without its gate section: llm-d's utilization-detector
	bare.file, _, _ = strings.Cut(r.file, "\ngate:")
	checkWorse(t, "no slots declared, hand-off", runRecipe(t, bare, r.args, r.policy, burst), recipe, time.Second)
	checkWorse(t, "the saturation gate alone, first-come servers", runRecipe(t, bare, noHandoff, modelserver.PolicyFCFS, burst), recipe, time.Second)

	// The slot gate works too with the hand-off: -max-inflight 16, the
	// servers' slots, is then gate.PriorityMaxInFlight, which lets the
	// interactive requests past the slots while batch runs; without the
	// hand-off it is MaxInFlight, and a burst waits for batch to end.
	slots := append(slices.Clone(r.args), "-max-inflight", "16")
	checkRecipe(t, runRecipe(t, bare, slots, r.policy, burst), burst)
	noHandoffSlots := append(slices.Clone(noHandoff), "-max-inflight", "16")
	checkWorse(t, "-max-inflight 16, no hand-off", runRecipe(t, bare, noHandoffSlots, r.policy, burst), recipe, 0)
}

// The README's recipe for first-come servers (eviction.yaml behind
// -max-inflight 16), under bursts of 6 interactive requests, gives them a
// p95 time to first token under 1 s beside a batch backlog, every one
// answered, batch requests revoked to make room; the same file behind the
// saturation gate alone, without -max-inflight, does not: its evictions
// free places in the servers' queues, not running slots.
func TestREADMEEvictionRecipeOverHTTP(t *testing.T) {
	const burst = 6
	r := readmeRecipeFor(t, "eviction.yaml")
	if r.policy != modelserver.PolicyFCFS || !slices.Contains(r.args, "-max-inflight") {
		t.Fatalf("the README runs eviction.yaml with servers %q, gateway %q: want first-come and -max-inflight", r.policy, r.args)
	}
	recipe := runRecipe(t, r, r.args, r.policy, burst)
	checkRecipe(t, recipe, burst)
	if recipe.batch429 == 0 {
		t.Error("recipe: no batch request was revoked: eviction made no room")
	}
	checkWorse(t, "without -max-inflight", runRecipe(t, r, without(r.args, "-max-inflight"), r.policy, burst), recipe, time.Second)
}
