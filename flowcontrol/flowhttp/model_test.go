package flowhttp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

// Model reads the top-level "model" string of one JSON object, the last
// one when it repeats, and nothing from anything else.
func TestModel(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"llama-3","messages":[]}`:            "llama-3",
		`{"messages":[{"model":"inner"}],"model":"m"}`: "m",
		`{"model":"a","model":"b"}`:                    "b",
		`{"model":"a","model":7}`:                      "",
		`{"Model":"case"}`:                             "",
		`{"model":null}`:                               "",
		`{"model":"\u00e9t\u00e9"}`:                    "été",
		`{"messages":[]}`:                              "",
		`{"model":"m"} {"model":"n"}`:                  "",
		`{"model":"m"}x`:                               "",
		`{"model":"m"`:                                 "",
		`["model","m"]`:                                "",
		``:                                             "",
	} {
		require.Equal(t, want, flowhttp.Model([]byte(body)), "body %s", body)
	}
}
