// Package openaierror is the error object of the OpenAI API, which OpenAI
// SDKs decode and raise as an API error: {"error": {"message", "type",
// "param", "code"}}, param and code null unless set. The fake model server,
// sluice-gateway's cut-stream event and the tests that check either share
// it.
package openaierror

import "encoding/json"

// Body is the error object's wire form. Decode a body into it strictly
// (DisallowUnknownFields) to check that form.
type Body struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// JSON encodes the error object of type typ with message, as one line
// without a final newline; param and code are null when empty.
func JSON(typ, message, param, code string) []byte {
	var b Body
	b.Error.Message, b.Error.Type = message, typ
	if param != "" {
		b.Error.Param = &param
	}
	if code != "" {
		b.Error.Code = &code
	}
	js, err := json.Marshal(b)
	if err != nil {
		panic("openaierror: " + err.Error()) // strings and nulls: it cannot fail
	}
	return js
}
