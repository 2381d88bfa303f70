package openaierror_test

import (
	"fmt"

	"github.com/sluicegate/sluice/internal/openaierror"
)

// The error object an OpenAI SDK raises as an API error: param and code are
// null unless given.
func ExampleJSON() {
	fmt.Println(string(openaierror.JSON("server_error", "the stream was cut off", "", "")))
	fmt.Println(string(openaierror.JSON("invalid_request_error", "bad model", "model", "model_not_found")))
	// Output:
	// {"error":{"message":"the stream was cut off","type":"server_error","param":null,"code":null}}
	// {"error":{"message":"bad model","type":"invalid_request_error","param":"model","code":"model_not_found"}}
}
