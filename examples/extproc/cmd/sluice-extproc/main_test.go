package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/flowcontrol/gate"
	"github.com/sluicegate/sluice/headroom"
	"github.com/sluicegate/sluice/internal/clitest"
	"github.com/sluicegate/sluice/internal/pipenet"
)

// beMain makes the test binary act as the command when set, so a test can
// run the real program in a child process and signal it.
const beMain = "SLUICE_EXTPROC_TEST_BE_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(beMain) == "1" {
		if os.Getenv(answerCPU) == "1" {
			go answerCPUTime(os.Stdin, os.Stdout)
		}
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(beNoop) == "1" {
		go answerCPUTime(os.Stdin, os.Stdout)
		os.Exit(serveNoop(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func TestHelpPrintsUsage(t *testing.T) {
	clitest.Usage(t, run, "Usage: sluice-extproc", "-listen", "-band", "-max-inflight", "slo-deadline-ordering-policy", "-emit-provisional-headroom", "x-llm-d-inference-ttl", "-config", "-metrics-listen", "-backend", "/readyz", "SIGHUP", "A reload may change", "Only a restart changes", "sluice_extproc_config_reloads_total")
}

func TestBadFlagsExit2(t *testing.T) {
	cases := map[string][]string{
		"unknown flag":          {"-nope"},
		"band without prio":     {"-band", "capacity=10"},
		"band unknown key":      {"-band", "priority=1,size=3"},
		"band bad capacity":     {"-band", "priority=1,capacity=-1"},
		"band bad policy":       {"-band", "priority=1,policy=lifo"},
		"band twice the key":    {"-band", "priority=1,priority=2"},
		"band bad ttl":          {"-band", "priority=1,ttl=soon"},
		"duplicate band":        {"-band", "priority=1", "-band", "priority=1"},
		"policy on wrong queue": {"-band", "priority=1,policy=slo-deadline-ordering-policy,queue=fifo"},
		"fallback missing":      {"-band", "priority=1"},
		"bad objective":         {"-objective", "chat"},
		"bad log level":         {"-log-level", "loud"},
		"stray argument":        {"serve"},
		"negative inflight":     {"-max-inflight", "-1"},
		"bad priority header":   {"-priority-header", "x priority"},
		"bad objective header":  {"-objective-header", "x-objective:"},
	}
	clitest.BadArgs(t, run, cases)
}

// startServe runs serve in-process, in the current synctest bubble, with a
// controller the test can inspect; the shutdown timeout runs on the bubble's
// clock.
func startServe(t *testing.T, cfg flowcontrol.Config, gracePeriod time.Duration) (fc *flowcontrol.FlowController, client extprocv3.ExternalProcessorClient, shutdown context.CancelFunc, done <-chan error) {
	t.Helper()
	return startServeOptions(t, options{controller: cfg, gracePeriod: gracePeriod})
}

// startServeOptions is startServe for parsed options.
func startServeOptions(t *testing.T, opts options) (fc *flowcontrol.FlowController, client extprocv3.ExternalProcessorClient, shutdown context.CancelFunc, done <-chan error) {
	t.Helper()
	fc, err := flowcontrol.New(opts.controller)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	lis := pipenet.Listen()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	go func() {
		errc <- serve(ctx, fc, opts, func() time.Duration { return opts.drainDelay }, func() time.Duration { return opts.gracePeriod }, lis, slog.New(slog.DiscardHandler))
	}()
	conn, err := grpc.NewClient("passthrough:///pipe",
		grpc.WithContextDialer(lis.DialAddr),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return fc, extprocv3.NewExternalProcessorClient(conn), cancel, errc
}

// sendRequestHeaders sends the request headers of a completion.
func sendRequestHeaders(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient) {
	t.Helper()
	sendHeaders(t, s, ":path", "/v1/completions")
}

// sendHeaders sends request headers of kv, each name followed by its
// value.
func sendHeaders(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient, kv ...string) {
	t.Helper()
	var hs []*corev3.HeaderValue
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	err := s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// responseHeaders sends response_headers and returns the headroom the reply
// sets, or "" when it sets none.
func responseHeaders(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient) string {
	t.Helper()
	err := s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
			{Key: ":status", RawValue: []byte("200")},
		}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetResponseHeaders() == nil {
		t.Fatalf("got %v, want a response_headers reply", resp)
	}
	for _, opt := range resp.GetResponseHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		if opt.GetHeader().GetKey() == "x-llm-d-flow-band-headroom-requests" {
			return string(opt.GetHeader().GetRawValue())
		}
	}
	return ""
}

func expectContinue(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient) {
	t.Helper()
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetRequestHeaders() == nil {
		t.Fatalf("got %v, want CONTINUE", resp)
	}
}

func closeStream(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient) {
	t.Helper()
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
}

func TestShutdownRejectsQueuedAndDrainsAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := flowcontrol.Config{
			Bands: []flowcontrol.BandConfig{{Priority: 0, RequestCapacity: capacity.Bounded(10)}},
			Gate:  gate.MaxInFlight(1),
		}
		fc, client, shutdown, done := startServe(t, cfg, time.Minute)
		ctx := t.Context()

		a, err := client.Process(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sendRequestHeaders(t, a)
		expectContinue(t, a)
		b, err := client.Process(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sendRequestHeaders(t, b)
		synctest.Wait()
		if s, _ := fc.CapacitySnapshot(0); s.QueuedRequests != 1 {
			t.Fatalf("band 0 holds %d requests, want b queued", s.QueuedRequests)
		}

		shutdownAt := time.Now()
		shutdown() // what SIGTERM does
		resp, err := b.Recv()
		if err != nil {
			t.Fatal(err)
		}
		ir := resp.GetImmediateResponse()
		if ir.GetStatus().GetCode() != 503 {
			t.Fatalf("queued request at shutdown: got %v, want ImmediateResponse 503", resp)
		}
		reason := ""
		for _, opt := range ir.GetHeaders().GetSetHeaders() {
			if opt.GetHeader().GetKey() == flowcontrol.DroppedReasonHeader {
				reason = string(opt.GetHeader().GetRawValue())
			}
		}
		if reason != "rejected-shutting-down" {
			t.Errorf("dropped reason %q, want rejected-shutting-down", reason)
		}

		// The admitted request still gets its response processed.
		responseHeaders(t, a)
		closeStream(t, a)
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		// On the bubble's clock the drain takes no time; the timeout would
		// take exactly a minute.
		if took := time.Since(shutdownAt); took >= time.Minute {
			t.Errorf("shutdown took %v: the drain, not the %v timeout, should end it", took, time.Minute)
		}
	})
}

func TestShutdownTimeoutCancelsStragglers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 0}}, Gate: gate.MaxInFlight(1)}
		fc, client, shutdown, done := startServe(t, cfg, 10*time.Millisecond)
		a, err := client.Process(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		sendRequestHeaders(t, a)
		expectContinue(t, a)
		shutdownAt := time.Now()
		shutdown() // a never finishes its response
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if took := time.Since(shutdownAt); took != 10*time.Millisecond {
			t.Errorf("shutdown took %v, want the 10ms timeout", took)
		}
		if _, err := a.Recv(); err == nil {
			t.Error("the straggler's stream is still open after shutdown")
		}
		if n := fc.InFlight(); n != 0 {
			t.Errorf("in flight = %d after shutdown, want 0: the straggler's slot must be released", n)
		}
	})
}

var listeningAddr = regexp.MustCompile(`msg=listening addr=(\S+)`)

// TestBinaryServesAndStopsOnSIGTERM runs the program in its own process:
// it starts, serves one stream the way Envoy would, and exits 0 on SIGTERM.
func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	c := startChild(t, "-listen", "127.0.0.1:0", "-metrics-listen", "off", "-max-inflight", "4",
		"-band", "priority=0,capacity=10", "-band", "priority=10,capacity=100,policy=slo-deadline-ordering-policy")

	if got := c.oneStream(t); got != "10" {
		t.Errorf("headroom = %q, want 10 (band 0, capacity 10, empty)", got)
	}

	c.stop(t)
	if !strings.Contains(strings.Join(c.log, "\n"), "msg=stopped") {
		t.Errorf("no stopped record in the log:\n%s", strings.Join(c.log, "\n"))
	}
}

// TestClassifierAndStampFlags: the flags reach the adapter. With
// -emit-provisional-headroom the headroom is stamped under both names; a
// request whose x-llm-d-inference-ttl is malformed is answered 400; the
// default objective header is x-llm-d-inference-objective, and its
// deprecated alias is read too.
func TestClassifierAndStampFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	opts, err := parseFlags([]string{"-emit-provisional-headroom", "-band", "priority=0,capacity=10",
		"-band", "priority=5,capacity=10", "-objective", "chat=5"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("parseFlags: %v\n%s", err, stderr.String())
	}
	if !opts.emitProvisionalHeadroom || opts.classifier.ObjectiveHeader != flowhttp.DefaultObjectiveHeader {
		t.Fatalf("parsed %+v", opts)
	}
	synctest.Test(t, func(t *testing.T) {
		_, client, shutdown, done := startServeOptions(t, opts)
		ctx := t.Context()

		s, err := client.Process(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sendHeaders(t, s, flowhttp.DeprecatedObjectiveHeader, "chat")
		expectContinue(t, s)
		err = s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
			ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		set := map[string]string{}
		for _, opt := range resp.GetResponseHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
			set[opt.GetHeader().GetKey()] = string(opt.GetHeader().GetRawValue())
		}
		// Band 5 (the objective's), empty: headroom 10 under both names.
		if set[headroom.HeaderName] != "10" || set[headroom.ProvisionalHeaderName] != "10" {
			t.Errorf("set headers %q, want headroom 10 under both names", set)
		}
		closeStream(t, s)

		bad, err := client.Process(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sendHeaders(t, bad, flowhttp.TTLHeader, "-1s")
		resp, err = bad.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.GetImmediateResponse().GetStatus().GetCode(); code != 400 {
			t.Errorf("malformed TTL: %v, want an ImmediateResponse 400", resp)
		}

		shutdown()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

// waitLog reads c's log until a line contains want, within a bound.
func (c *child) waitLog(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("the program exited before logging %q:\n%s", want, strings.Join(c.log, "\n"))
			}
			c.log = append(c.log, line)
			if strings.Contains(line, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no log line with %q within 20s:\n%s", want, strings.Join(c.log, "\n"))
		}
	}
}

// At SIGTERM the adapter's gRPC health turns NOT_SERVING and /readyz 503
// at once; it admits new streams for the drain delay, then accepts none,
// lets the admitted one finish, and exits 0, /metrics answering
// throughout.
func TestBinaryDrainsOnSIGTERM(t *testing.T) {
	c := startChild(t, "-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0", "-max-inflight", "4",
		"-drain-delay", "5s", "-grace-period", "20s")
	conn, err := grpc.NewClient(c.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := extprocv3.NewExternalProcessorClient(conn)
	health := healthpb.NewHealthClient(conn)
	open := func() extprocv3.ExternalProcessor_ProcessClient {
		t.Helper()
		s, err := client.Process(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := open()
	sendRequestHeaders(t, a)
	expectContinue(t, a)

	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.waitLog(t, `msg="draining: not serving, still admitting" drain_delay=5s`)
	if resp, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health during the drain: %v, %v; want NOT_SERVING", resp.GetStatus(), err)
	}
	if code, body := get(t, c.metrics, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the drain: %d %q, want 503", code, body)
	}
	// During the drain a new stream is admitted, and /metrics answers.
	b := open()
	sendRequestHeaders(t, b)
	expectContinue(t, b)
	responseHeaders(t, b)
	closeStream(t, b)
	build := config.ReadBuildInfo()
	series := fmt.Sprintf(`sluice_extproc_build_info{goversion=%q,revision=%q,version=%q} 1`, build.GoVersion, build.Revision, build.Version)
	if code, page := get(t, c.metrics, "/metrics"); code != http.StatusOK || !strings.Contains(page, series) {
		t.Errorf("/metrics during the drain: %d, want 200 with %s", code, series)
	}
	if strings.Contains(strings.Join(c.log, "\n"), `msg="shutting down"`) {
		t.Fatalf("the drain delay ended before the test's stream did: a machine this slow needs a longer one")
	}

	// After the drain: no new stream, the admitted one finishes, /metrics
	// still answers until exit.
	c.waitLog(t, `msg="shutting down"`)
	// The server stops accepting streams as it closes the controller: a
	// stream that slips in between is refused by the closed controller,
	// and soon none is accepted at all.
	refused := time.After(20 * time.Second)
	for {
		err := lateStream(t, client)
		if status.Code(err) == codes.Unavailable {
			break
		}
		if err != nil {
			t.Fatalf("a stream after the drain: %v, want Unavailable or a 503", err)
		}
		select {
		case <-refused:
			t.Fatal("streams are still accepted 20s after the drain")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if code, page := get(t, c.metrics, "/metrics"); code != http.StatusOK || !strings.Contains(page, "llm_d_epp_flow_control_requests_in_flight 1") {
		t.Errorf("/metrics after the drain: %d; want 200 with the stream in flight", code)
	}
	responseHeaders(t, a)
	closeStream(t, a)
	for line := range c.lines {
		c.log = append(c.log, line)
	}
	if err := <-c.exited; err != nil {
		t.Errorf("exit: %v, want status 0\n%s", err, strings.Join(c.log, "\n"))
	}
	if !strings.Contains(strings.Join(c.log, "\n"), "msg=stopped") {
		t.Errorf("no stopped record in the log:\n%s", strings.Join(c.log, "\n"))
	}
}

// lateStream opens a stream for a completion after the drain delay: it
// returns the gRPC error that refuses it, or nil when the adapter answers
// 503 rejected-shutting-down; anything else fails the test.
func lateStream(t *testing.T, client extprocv3.ExternalProcessorClient) error {
	t.Helper()
	s, err := client.Process(t.Context())
	if err != nil {
		return err
	}
	err = s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
			{Key: ":method", RawValue: []byte("POST")},
			{Key: ":path", RawValue: []byte("/v1/completions")},
		}}},
	}})
	if err != nil {
		return err
	}
	resp, err := s.Recv()
	if err != nil {
		return err
	}
	ir := resp.GetImmediateResponse()
	if ir.GetStatus().GetCode() != http.StatusServiceUnavailable || ir.GetDetails() != "rejected-shutting-down" {
		t.Fatalf("a completion after the drain: %v, want 503 rejected-shutting-down or no stream", resp)
	}
	return nil
}

func TestVersionFlag(t *testing.T) {
	clitest.Version(t, run, "sluice-extproc "+config.ReadBuildInfo().String()+"\n")
}
