package vllm

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegate/sluice/examples/modelserver"
)

// TestLoopbackModelServer scrapes the simulated vLLM server over loopback
// while requests load it, and while it is down.
func TestLoopbackModelServer(t *testing.T) {
	const slots, requests = 2, 5
	ms, err := modelserver.New(modelserver.Config{Slots: slots})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ms)
	defer srv.Close()

	readings := make(chan event, 1024)
	failures := make(chan error, 1024)
	s := mustNew(t, Config{
		Targets: []string{srv.URL},
		Sink:    &recorder{notify: readings},
		OnError: func(_ string, err error) {
			sendIfRoom(failures, err)
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	done := goRun(ctx, s)
	defer stopRun(t, cancel, done, readings)

	// waitFor returns the first reading that satisfies ok; a failed scrape
	// meanwhile fails the test unless failuresOK.
	waitFor := func(what string, failuresOK bool, ok func(Metrics) bool) Metrics {
		t.Helper()
		for {
			select {
			case e := <-readings:
				if ok(e.m) {
					return e.m
				}
			case err := <-failures:
				if !failuresOK {
					t.Fatalf("waiting for %s: scrape failed: %v", what, err)
				}
			case <-ctx.Done():
				t.Fatalf("no reading showed %s within 20s", what)
			}
		}
	}

	waitFor("an idle server", false, func(m Metrics) bool { return m.Waiting == 0 && m.Running == 0 && m.KVCache == 0 })

	// Load it: each request would run for about 10s (2,000 tokens at 5ms).
	load, unload := context.WithCancel(ctx)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(load, http.MethodPost, srv.URL+"/v1/completions",
				strings.NewReader(`{"prompt": "one two three four", "max_tokens": 2000}`))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				t.Errorf("a request ended before it was cancelled: %s", resp.Status)
			} else if !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
		})
	}
	loaded := waitFor("the load", false, func(m Metrics) bool { return m.Running == slots && m.Waiting == requests-slots })
	if !(loaded.KVCache > 0 && loaded.KVCache <= 1) {
		t.Errorf("KV-cache usage %v under load, want in (0, 1]", loaded.KVCache)
	}
	if l := ms.Load(); l.Running != slots || l.Waiting != requests-slots {
		t.Errorf("the server's own Load %+v disagrees with the reading %+v", l, loaded)
	}

	unload()
	wg.Wait()
	waitFor("the load gone", false, func(m Metrics) bool { return m.Waiting == 0 && m.Running == 0 && m.KVCache == 0 })

	// Down, /metrics answers 503: errors, no readings.
	ms.SetDown(true)
	for n := 0; n < 3; {
		select {
		case err := <-failures:
			if !errors.Is(err, ErrStatus) || !strings.Contains(err.Error(), "503") {
				t.Fatalf("a down server's error %v is not a 503", err)
			}
			n++
		case <-ctx.Done():
			t.Fatal("a down server caused no scrape errors within 20s")
		}
	}
	before := s.Stats()[0].Scrapes
	for range 2 {
		<-failures
	}
	if after := s.Stats()[0].Scrapes; after != before {
		t.Errorf("%d readings delivered while the server was down", after-before)
	}

	// Back up: readings resume.
	ms.SetDown(false)
	waitFor("the server back", true, func(Metrics) bool { return true })
	if st := s.Stats()[0]; st.ConsecutiveErrors != 0 || st.Errors < 5 {
		t.Errorf("Stats %+v after recovery", st)
	}
}
