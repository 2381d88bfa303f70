package flowhttp

// ModelNameHeader is the request header that llm-d's body-based routing
// (and the Gateway API inference extension) sets to the model an
// OpenAI-style request body names, so that routes can match on it. A
// processor that sees headers only, such as an Envoy ext_proc filter in
// its default mode, can read the model from it.
const ModelNameHeader = "x-gateway-model-name"

// Model returns the model an OpenAI-style request body names: its
// top-level "model" string, the last one when the key repeats (as the
// model server reads it), matched exactly. It returns "" for a body that
// is not one JSON object, or whose model is absent or not a string. The
// body is a client's: the value is not checked against any served model,
// so a caller that makes a label of it must bound it. The work is linear
// in the body's size, which the caller has bounded.
func Model(body []byte) string { return readFields(body).modelName() }
