package modelserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/sluicegate/sluice/examples/modelserver"
)

// A model server on loopback answers an OpenAI completion request, and its
// load reads as its /metrics page would.
func Example() {
	server, err := modelserver.New(modelserver.Config{Model: "sim", Slots: 4, Speed: 10})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(server)
	defer ts.Close()

	resp, err := http.Post(ts.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"sim","prompt":"What does flow control do?","max_tokens":8}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var completion struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&completion); err != nil {
		panic(err)
	}
	fmt.Printf("%q (%s)\n", completion.Choices[0].Text, completion.Choices[0].FinishReason)
	fmt.Printf("%d prompt tokens, %d completion tokens\n", completion.Usage.PromptTokens, completion.Usage.CompletionTokens)
	fmt.Printf("%+v\n", server.Load())
	// Output:
	// "Flow control holds requests in priority bands until" (length)
	// 5 prompt tokens, 8 completion tokens
	// {Waiting:0 Running:0 KVCacheUsage:0 Down:false}
}
