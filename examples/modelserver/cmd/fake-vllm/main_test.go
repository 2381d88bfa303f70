package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan []string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-n", "2", "-listen", "127.0.0.1:0", "-speed", "100"}, io.Discard, ready)
	}()
	var urls []string
	select {
	case urls = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	if len(urls) != 2 || urls[0] == urls[1] {
		t.Fatalf("urls %q: want two servers", urls)
	}
	for _, u := range urls {
		resp, err := http.Post(u+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi","max_tokens":3}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"completion_tokens":3`) {
			t.Errorf("%s: %d %s", u, resp.StatusCode, body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestFlags(t *testing.T) {
	// A command line accepted by mistake serves until its context ends:
	// this one has ended.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"-n", "0"},
		{"-listen", "0.0.0.0:8001"},
		{"-listen", "example.com:8001"},
		{"-listen", "127.0.0.1:65535", "-n", "2"},
		{"-slots", "-1"},
		{"-slots", "0"},
		{"-speed", "0"},
		{"-max-model-len", "100", "-kv-cache-tokens", "50"},
		{"-scheduling-policy", "lifo"},
		{"extra"},
	} {
		if err := run(ctx, append([]string{"-listen", "127.0.0.1:0"}, args...), io.Discard, nil); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
