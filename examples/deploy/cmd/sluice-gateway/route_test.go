package main

import (
	"io"
	"net/http"
	"testing"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// Under saturation a model list and a health check still get the
// backend's answer: only inference is flow-controlled.
func TestNonInferencePassesThroughSaturation(t *testing.T) {
	hb, g, client := startSaturated(t)

	a, b := runningAndQueued(t, g, client, hb)
	if c := <-send(client, g.url, "c"); c.err != nil || c.status != http.StatusTooManyRequests {
		t.Fatalf("POST /v1/chat/completions: %d %v; want 429", c.status, c.err)
	}
	resp, err := client.Get(g.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || body != holdModels {
		t.Errorf("GET /v1/models: %d %q; want the backend's 200 %q", resp.StatusCode, body, holdModels)
	}
	for _, name := range flowhttp.RouterOwnedHeaders() {
		if v := resp.Header.Values(name); len(v) > 0 {
			t.Errorf("GET /v1/models, which was not admitted, carries %s %q", name, v)
		}
	}
	if code, body := get(t, client, g.url+"/health"); code != http.StatusOK {
		t.Errorf("GET /health: %d %q; want the backend's 200", code, body)
	}
	if got := g.fc.InFlight(); got != 1 {
		t.Errorf("in flight %d, want 1: what passes through takes no slot", got)
	}
	hb.release <- struct{}{}
	<-a
	hb.release <- struct{}{}
	<-b
}

// -inference-path / puts every request through flow control, as before
// the default was the OpenAI inference endpoints alone.
func TestInferencePathsAreConfigurable(t *testing.T) {
	hb, opts := saturatingOptions(t)
	var every config.InferenceRoutes
	if err := (&config.InferenceRoutesFlag{Routes: &every}).Set("/"); err != nil {
		t.Fatal(err)
	}
	opts.inference = every
	g := startGateway(t, opts)
	client := newClient(t)

	a, b := runningAndQueued(t, g, client, hb)
	resp, err := client.Get(g.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("x-llm-d-request-dropped-reason") != "rejected-saturated" {
		t.Errorf("GET /v1/models with every path inference: %d %q; want 429 rejected-saturated", resp.StatusCode, body)
	}
	hb.release <- struct{}{}
	<-a
	hb.release <- struct{}{}
	<-b
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
