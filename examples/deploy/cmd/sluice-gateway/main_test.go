package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/examples/modelserver"
	"github.com/sluicegate/sluice/internal/clitest"
)

// beMain makes the test binary act as the command when set, so that a
// test can run the real program in a child process and signal it.
const beMain = "SLUICE_GATEWAY_TEST_BE_MAIN"

// buildDir holds the binary buildGateway builds, for the whole run.
var buildDir string

func TestMain(m *testing.M) {
	if os.Getenv(beMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	if code == 0 {
		// Every gateway served, every backend and client closed: nothing
		// the tests started may still run.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// proc is the gateway running as a child process.
type proc struct {
	cmd    *exec.Cmd
	url    string // http://host:port it listens on
	stderr *logWatcher
	exited chan error // receives cmd.Wait's result once
}

// logWatcher collects a child's stderr and reports the address of its
// "listening" line.
type logWatcher struct {
	syncBuffer
	once sync.Once
	addr chan string
}

var listeningLine = regexp.MustCompile(`msg=listening addr=(\S+)`)

func (w *logWatcher) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if m := listeningLine.FindStringSubmatch(w.String()); m != nil {
		w.once.Do(func() { w.addr <- m[1] })
	}
	return n, err
}

// startProcess runs bin with args (env added to the test's environment)
// and waits until it listens. The process is killed if it outlives the
// test.
func startProcess(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	w := &logWatcher{addr: make(chan string, 1)}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: w, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-p.exited:
			p.exited <- err
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("gateway stderr:\n%s", w.String())
		}
	})
	select {
	case addr := <-w.addr:
		p.url = "http://" + addr
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("the gateway exited before listening (%v):\n%s", err, w.String())
	case <-time.After(waitLimit):
		t.Fatalf("the gateway did not listen within %s:\n%s", waitLimit, w.String())
	}
	return p
}

// startSelf runs this test binary as the gateway.
func startSelf(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProcess(t, os.Args[0], []string{beMain + "=1"}, args...)
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(waitLimit):
		t.Fatalf("the gateway did not exit within %s", waitLimit)
		return -1
	}
}

// metric reads one series of the process's /metrics.
func (p *proc) metric(t *testing.T, client *http.Client, series string) string {
	t.Helper()
	_, page := get(t, client, p.url+"/metrics")
	v, _ := metricValue(page, series)
	return v
}

func TestBinaryReloadsOnSIGHUP(t *testing.T) {
	urls, _ := modelServers(t, 1, modelserver.Config{Speed: 10})
	path := writeConfig(t, "", bandConfig(3, urls[0]))
	p := startSelf(t, "-config", path, "-listen", "127.0.0.1:0")
	client := newClient(t)

	if code, body := get(t, client, p.url+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, client, p.url+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if got := headroomOf(t, client, p.url); got != "3" {
		t.Fatalf("headroom %q, want 3", got)
	}

	writeConfig(t, path, bandConfig(7, urls[0]))
	p.signal(t, syscall.SIGHUP)
	waitFor(t, "the reload to be counted", func() bool {
		return p.metric(t, client, `sluice_gateway_config_reloads_total{result="success"}`) == "1"
	})
	if got := headroomOf(t, client, p.url); got != "7" {
		t.Errorf("after SIGHUP: headroom %q, want 7", got)
	}

	writeConfig(t, path, "gate:\n  maxInFlight: [4]\n")
	p.signal(t, syscall.SIGHUP)
	waitFor(t, "the failed reload to be counted", func() bool {
		return p.metric(t, client, `sluice_gateway_config_reloads_total{result="failure"}`) == "1"
	})
	if got := p.metric(t, client, "sluice_gateway_config_last_reload_successful"); got != "0" {
		t.Errorf("last reload successful = %q, want 0", got)
	}
	if logs := p.stderr.String(); !strings.Contains(logs, "configuration reload refused") || !strings.Contains(logs, path+":2:") {
		t.Errorf("stderr does not say why the reload was refused (want %s:2):\n%s", path, logs)
	}
	if got := headroomOf(t, client, p.url); got != "7" {
		t.Errorf("after a bad file: headroom %q, want 7 still", got)
	}

	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

func TestBinaryShutsDownOnSIGTERM(t *testing.T) {
	hb := newHoldBackend(t)
	path := writeConfig(t, "", saturatingConfig)
	// No drain delay: the shutdown starts at once (TestBinaryDrainsOnSIGTERM
	// drains).
	p := startSelf(t, "-config", path, "-listen", "127.0.0.1:0", "-backend", hb.url.String(), "-drain-delay", "0")
	client := newClient(t)

	a := send(client, p.url, "a")
	<-hb.arrived
	b := send(client, p.url, "b")
	waitFor(t, "b to be queued", func() bool {
		return p.metric(t, client, `llm_d_epp_flow_control_queue_size{fairness_id="default-flow",model_name="sim",priority="0",target_model_name="sim"}`) == "1"
	})
	p.signal(t, syscall.SIGTERM)

	r := <-b
	if r.err != nil || r.status != http.StatusServiceUnavailable || r.header.Get("x-llm-d-request-dropped-reason") != "rejected-shutting-down" {
		t.Fatalf("queued b: %d %v, dropped reason %q; want 503 rejected-shutting-down",
			r.status, r.err, r.header.Get("x-llm-d-request-dropped-reason"))
	}
	if msg, _, code := openAIError(t, r.body); code != "rejected-shutting-down" || !strings.Contains(msg, "rejected-shutting-down") {
		t.Errorf("b: error %q, code %q", msg, code)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("the gateway exited (%v) with a request in flight", err)
	default:
	}
	hb.release <- struct{}{}
	if r := <-a; r.err != nil || r.status != http.StatusOK || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Fatalf("admitted a: %d %v %q; want its whole answer", r.status, r.err, r.body)
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if logs := p.stderr.String(); !strings.Contains(logs, "shutting down") || !strings.Contains(logs, "msg=stopped") {
		t.Errorf("stderr lacks the shutdown:\n%s", logs)
	}
}

func TestBinaryExitsOnASecondSIGTERM(t *testing.T) {
	hb := newHoldBackend(t)
	p := startSelf(t, "-listen", "127.0.0.1:0", "-backend", hb.url.String(), "-max-inflight", "1")
	a := send(newClient(t), p.url, "a")
	<-hb.arrived
	p.signal(t, syscall.SIGTERM)
	waitFor(t, "the shutdown to begin", func() bool { return strings.Contains(p.stderr.String(), "shutting down") })
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if r := <-a; r.err == nil && strings.HasSuffix(r.body, "[DONE]\n\n") {
		t.Errorf("a finished (%d %q) though the gateway exited first", r.status, r.body)
	}
}

func TestBinaryRefusesABadFile(t *testing.T) {
	path := writeConfig(t, "", "controller:\n  bands:\n    - priority: 0\n      maxRequests: -1\n")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-config", path)
	cmd.Env = append(os.Environ(), beMain+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit %v, want code 2; output:\n%s", err, out)
	}
	if want := fmt.Sprintf("%s:4", path); !strings.Contains(string(out), want) {
		t.Errorf("output does not name %s:\n%s", want, out)
	}
}

// buildGateway builds the command from source, once per run, and returns
// the binary's path.
func buildGateway(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-gateway-test")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		bin := filepath.Join(dir, "sluice-gateway")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, goTool(), "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		buildBin = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// goTool returns the go command that runs these tests.
func goTool() string {
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		if p := filepath.Join(goroot, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// At SIGTERM the gateway turns unready at once and serves on for the drain
// delay, as a pod must while Kubernetes removes its endpoint; then it
// refuses new requests, lets those in flight finish, and exits 0, with
// /metrics answering throughout.
func TestBinaryDrainsOnSIGTERM(t *testing.T) {
	hb := newHoldBackend(t)
	// The drain must outlast the steps below on a loaded machine; the
	// test waits it out once.
	const drain = "5s"
	p := startSelf(t, "-listen", "127.0.0.1:0", "-backend", hb.url.String(), "-max-inflight", "4",
		"-drain-delay", drain, "-grace-period", "20s")
	client := newClient(t)
	if code, body := get(t, client, p.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before SIGTERM: %d %q", code, body)
	}
	a := send(client, p.url, "a")
	if id := <-hb.arrived; id != "a" {
		t.Fatalf("arrived %q, want a", id)
	}

	p.signal(t, syscall.SIGTERM)
	waitFor(t, "/readyz to answer 503", func() bool {
		code, _ := get(t, client, p.url+"/readyz")
		return code == http.StatusServiceUnavailable
	})
	draining := func() bool { return !strings.Contains(p.stderr.String(), `msg="shutting down"`) }
	if !strings.Contains(p.stderr.String(), "msg=\"draining: not ready, still serving\" drain_delay="+drain) {
		t.Errorf("stderr does not announce the drain:\n%s", p.stderr.String())
	}

	// During the drain: a new completion is admitted and served, a model
	// list passes through, /metrics answers.
	c := send(client, p.url, "c")
	if id := <-hb.arrived; id != "c" {
		t.Fatalf("arrived %q, want c", id)
	}
	hb.release <- struct{}{} // one of a and c finishes
	var first result
	var other <-chan result
	select {
	case first = <-a:
		other = c
	case first = <-c:
		other = a
	}
	if first.err != nil || first.status != http.StatusOK || !strings.HasSuffix(first.body, "data: [DONE]\n\n") {
		t.Fatalf("a request during the drain: %d %v %q; want its whole answer", first.status, first.err, first.body)
	}
	if code, body := get(t, client, p.url+"/v1/models"); code != http.StatusOK || body != holdModels {
		t.Errorf("GET /v1/models during the drain: %d %q", code, body)
	}
	b := config.ReadBuildInfo()
	buildInfo := fmt.Sprintf(`sluice_gateway_build_info{goversion=%q,revision=%q,version=%q}`, b.GoVersion, b.Revision, b.Version)
	if got := p.metric(t, client, buildInfo); got != "1" {
		t.Errorf("/metrics during the drain: %s = %q, want 1", buildInfo, got)
	}
	if !draining() {
		t.Fatalf("the drain delay (%s) ended before the test's requests did: a machine this slow needs a longer one", drain)
	}

	// After the drain: new requests are refused, the one in flight
	// finishes, /metrics and the probes still answer. They go on new
	// connections, as a client that finds its idle ones closed does: the
	// gateway closes the idle keep-alive connections as it stops taking
	// requests, and a request sent on one as it closes reads EOF, which
	// net/http does not retry for a POST.
	waitFor(t, "the drain delay to end", func() bool { return !draining() })
	client = newClient(t)
	client.Transport.(*http.Transport).DisableKeepAlives = true
	d := <-send(client, p.url, "d")
	if d.err != nil || d.status != http.StatusServiceUnavailable || d.header.Get("x-llm-d-request-dropped-reason") != "rejected-shutting-down" {
		t.Errorf("a completion after the drain: %d %v, dropped reason %q; want 503 rejected-shutting-down",
			d.status, d.err, d.header.Get("x-llm-d-request-dropped-reason"))
	}
	if code, _ := get(t, client, p.url+"/v1/models"); code != http.StatusServiceUnavailable {
		t.Errorf("GET /v1/models after the drain: %d, want 503", code)
	}
	if got := p.metric(t, client, "llm_d_epp_flow_control_requests_in_flight"); got != "1" {
		t.Errorf("/metrics after the drain: requests in flight %q, want 1", got)
	}
	if code, _ := get(t, client, p.url+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after the drain: %d, want 503", code)
	}
	hb.release <- struct{}{}
	if r := <-other; r.err != nil || r.status != http.StatusOK || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Fatalf("the request in flight: %d %v %q; want its whole answer", r.status, r.err, r.body)
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if logs := p.stderr.String(); !strings.Contains(logs, "msg=stopped") {
		t.Errorf("stderr lacks the end of the shutdown:\n%s", logs)
	}
}

func TestVersionFlag(t *testing.T) {
	clitest.Version(t, run, "sluice-gateway "+config.ReadBuildInfo().String()+"\n")
}
