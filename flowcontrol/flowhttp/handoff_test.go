package flowhttp_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
)

func TestSetBodyPriority(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"absent field added", `{"model":"m","prompt":"hi"}`, `{"model":"m","prompt":"hi","priority":-10}`},
		{"empty object", `{}`, `{"priority":-10}`},
		{"empty object with space", " { \n} ", ` {"priority":-10} `},
		{"client number replaced", `{"priority":-1000,"model":"m"}`, `{"model":"m","priority":-10}`},
		{"client value last", `{"model":"m","priority":5}`, `{"model":"m","priority":-10}`},
		{"string", `{"priority":"-1000","model":"m"}`, `{"model":"m","priority":-10}`},
		{"null", `{"model":"m","priority":null}`, `{"model":"m","priority":-10}`},
		{"object value", `{"priority":{"priority":-1},"model":"m"}`, `{"model":"m","priority":-10}`},
		{"array value", `{"priority":[1,"]",{}],"model":"m"}`, `{"model":"m","priority":-10}`},
		{"float", `{"priority":-1e9}`, `{"priority":-10}`},
		{"several times", `{"priority":1,"a":1,"priority":-5,"b":2,"priority":-9999}`, `{"a":1,"b":2,"priority":-10}`},
		{"escaped key", `{"pri\u006frity":-1000,"model":"m"}`, `{"model":"m","priority":-10}`},
		{"fully escaped key", `{"\u0070\u0072\u0069\u006f\u0072\u0069\u0074\u0079":-1000}`, `{"priority":-10}`},
		{"escaped slash is not the key", `{"priority\/":1}`, `{"priority\/":1,"priority":-10}`},
		{"other letter case kept", `{"Priority":-1000,"PRIORITY":1}`, `{"Priority":-1000,"PRIORITY":1,"priority":-10}`},
		{"nested duplicate kept", `{"extra":{"priority":-1000},"priority":3}`, `{"extra":{"priority":-1000},"priority":-10}`},
		{"key text in a string kept", `{"prompt":"\"priority\":-1000,","x":"}"}`, `{"prompt":"\"priority\":-1000,","x":"}","priority":-10}`},
		{"whitespace kept", "{\n  \"model\" : \"m\",\n  \"priority\" : 1,\n  \"n\" : 2\n}\n", "{\n  \"model\" : \"m\",\n  \"n\" : 2,\"priority\":-10\n}\n"},
		{"nested structures", `{"messages":[{"role":"user","content":"{[\"priority\"]}"}],"priority":0,"stream":true}`,
			`{"messages":[{"role":"user","content":"{[\"priority\"]}"}],"stream":true,"priority":-10}`},
	}
	for _, c := range cases {
		in := []byte(c.in)
		orig := bytes.Clone(in)
		got, ok := flowhttp.SetBodyPriority(in, -10)
		if !ok {
			t.Errorf("%s: SetBodyPriority(%s) passed it through", c.name, c.in)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s: SetBodyPriority(%s) = %s, want %s", c.name, c.in, got, c.want)
		}
		if !bytes.Equal(in, orig) {
			t.Errorf("%s: the input was modified: %s", c.name, in)
		}
		if !json.Valid(got) {
			t.Errorf("%s: output %s is not valid JSON", c.name, got)
		}
		// What a model server decodes: the router's value, whatever the
		// client wrote.
		var decoded struct {
			Priority json.RawMessage `json:"priority"`
		}
		if err := json.Unmarshal(got, &decoded); err != nil || string(decoded.Priority) != "-10" {
			t.Errorf("%s: decoded priority %s (%v), want -10", c.name, decoded.Priority, err)
		}
	}
}

func TestSetBodyPriorityPassesNonObjects(t *testing.T) {
	for _, in := range []string{
		``, ` `, `[]`, `[{"priority":1}]`, `"priority"`, `1`, `null`, `true`,
		`{`, `{"priority":1`, `{"priority":1,}`, `{"priority" 1}`, `{priority:1}`,
		`{"a":1}{"priority":-1}`, `{"a":1} x`, `{"priority":NaN}`, `{"priority":-Infinity}`,
		"\xef\xbb\xbf{\"priority\":-1}", "{\"a\":\"\x01\"}", `{"a":01}`, `{'priority':1}`,
	} {
		got, ok := flowhttp.SetBodyPriority([]byte(in), 7)
		if ok || string(got) != in {
			t.Errorf("SetBodyPriority(%q) = %q, %t; want it unchanged and false", in, got, ok)
		}
	}
}

func TestPriorityHandoffValue(t *testing.T) {
	def := flowhttp.PriorityHandoff{Enabled: true}
	for band, want := range map[int]int64{
		10: -10, 0: 0, -1: 1, 1 << 30: -(1 << 30),
		math.MaxInt: max(-int64(math.MaxInt), flowhttp.DefaultHandoffMin), // clamped where int has 64 bits
	} {
		if got := def.Value(band); got != want {
			t.Errorf("default mapping: Value(%d) = %d, want %d", band, got, want)
		}
	}
	if got := def.Value(math.MinInt); got != flowhttp.DefaultHandoffMax {
		t.Errorf("default mapping: Value(MinInt) = %d, want the upper bound %d", got, flowhttp.DefaultHandoffMax)
	}
	bounded := flowhttp.PriorityHandoff{Enabled: true, Min: -5, Max: 100}
	for band, want := range map[int]int64{10: -5, 5: -5, 4: -4, -100: 100, -1000: 100} {
		if got := bounded.Value(band); got != want {
			t.Errorf("bounded [-5, 100]: Value(%d) = %d, want %d", band, got, want)
		}
	}
	table := flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: 0, 0: 5, -1: 100}}
	for band, want := range map[int]int64{
		10: 0, 0: 5, -1: 100, // listed
		20: 0, 7: 5, 1: 5, // the nearest listed band below
		-2: 100, math.MinInt: 100, // below every listed band: the lowest's
	} {
		if got := table.Value(band); got != want {
			t.Errorf("table: Value(%d) = %d, want %d", band, got, want)
		}
	}
	body, err := table.Rewrite([]byte(`{"priority":-1}`), 7)
	if err != nil || string(body) != `{"priority":5}` {
		t.Errorf("table: Rewrite for band 7 = %s, %v; want {\"priority\":5}", body, err)
	}
}

// Rewrite refuses what Python's JSON parser (vLLM's) could read as an
// object though it is not valid JSON, rewrites an object behind a UTF-8
// byte-order mark, and passes everything else as it is.
func TestPriorityHandoffRewriteLenientBodies(t *testing.T) {
	p := flowhttp.PriorityHandoff{Enabled: true}
	utf16 := func(s string, bigEndian bool) string {
		var b []byte
		for _, c := range s {
			if bigEndian {
				b = append(b, 0, byte(c))
			} else {
				b = append(b, byte(c), 0)
			}
		}
		return string(b)
	}
	utf32le := func(s string) string {
		var b []byte
		for _, c := range s {
			b = append(b, byte(c), 0, 0, 0)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, in string
		want     string // "" with refused
		refused  bool
	}{
		{"object", `{"priority":-9}`, `{"priority":-10}`, false},
		{"object behind a BOM", "\xef\xbb\xbf {\"priority\":-9}", "\xef\xbb\xbf {\"priority\":-10}", false},
		{"NaN", `{"priority":-9,"temperature":NaN}`, "", true},
		{"-Infinity, after spaces", ` {"priority":-Infinity}`, "", true},
		{"NaN behind a BOM", "\xef\xbb\xbf{\"priority\":-9,\"t\":NaN}", "", true},
		{"truncated object", `{"priority":-9`, "", true},
		{"UTF-16LE", utf16(` {"priority":-9}`, false), "", true},
		{"UTF-16BE", utf16(`{"priority":-9}`, true), "", true},
		{"UTF-16LE with its BOM", "\xff\xfe" + utf16(`{"priority":-9}`, false), "", true},
		{"UTF-16BE with its BOM", "\xfe\xff" + utf16(`{"priority":-9}`, true), "", true},
		{"UTF-32LE", utf32le(`{"priority":-9}`), "", true},
		{"UTF-32LE with its BOM", "\xff\xfe\x00\x00" + utf32le(`{}`), "", true},
		{"UTF-32BE with its BOM", "\x00\x00\xfe\xff\x00\x00\x00{", "", true},
		{"array", `[{"priority":-9}]`, `[{"priority":-9}]`, false},
		{"UTF-16 array", utf16(`[1]`, false), utf16(`[1]`, false), false},
		{"form", `priority=-9`, `priority=-9`, false},
		{"binary", "\x00\x00\x00\x00\x05hello", "\x00\x00\x00\x00\x05hello", false},
		{"empty", ``, ``, false},
		{"two BOMs", "\xef\xbb\xbf\xef\xbb\xbf{}", "\xef\xbb\xbf\xef\xbb\xbf{}", false},
	} {
		out, err := p.Rewrite([]byte(tc.in), 10)
		switch {
		case tc.refused && !errors.Is(err, flowhttp.ErrHandoffBody):
			t.Errorf("%s: Rewrite(%q) = %q, %v; want ErrHandoffBody", tc.name, tc.in, out, err)
		case !tc.refused && (err != nil || string(out) != tc.want):
			t.Errorf("%s: Rewrite(%q) = %q, %v; want %q", tc.name, tc.in, out, err, tc.want)
		}
	}
}

func TestPriorityHandoffValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		p    flowhttp.PriorityHandoff
		want string // "" for valid
	}{
		{"off", flowhttp.PriorityHandoff{}, ""},
		{"default", flowhttp.PriorityHandoff{Enabled: true}, ""},
		{"monotone with ties", flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: -1, 5: -1, 0: 0, -1: 0}}, ""},
		{"map while off", flowhttp.PriorityHandoff{Map: map[int]int64{1: 1}}, "PriorityHandoff.Enabled is false"},
		{"bounds while off", flowhttp.PriorityHandoff{Max: 3}, "PriorityHandoff.Enabled is false"},
		{"min above max", flowhttp.PriorityHandoff{Enabled: true, Min: 5, Max: 3}, "PriorityHandoff.Min 5 is above PriorityHandoff.Max 3"},
		{"value out of bounds", flowhttp.PriorityHandoff{Enabled: true, Min: 0, Max: 10, Map: map[int]int64{1: 11}}, "PriorityHandoff.Map[1] = 11 is outside [0, 10]"},
		{"value beyond the default bounds", flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{1: math.MinInt64}}, "PriorityHandoff.Map[1]"},
		{"not monotone", flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: 5, 0: 3, -1: 9}}, "PriorityHandoff.Map is not monotone: band 10 maps to 5, above band 0's 3"},
	} {
		err := c.p.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: Validate() = %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestNewRefusesABadHandoff(t *testing.T) {
	fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 10)}})
	okHandler := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, c := range []struct {
		cfg  flowhttp.Config
		want string
	}{
		{flowhttp.Config{Controller: fc, PriorityHandoff: flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{1: 2, 0: 1}}},
			"flowhttp: Config.PriorityHandoff.Map is not monotone: band 1 maps to 2, above band 0's 1"},
		{flowhttp.Config{Controller: fc, MaxBodyBytes: -1, PriorityHandoff: flowhttp.PriorityHandoff{Enabled: true}},
			"Config.PriorityHandoff is enabled but Config.MaxBodyBytes -1 is negative"},
	} {
		_, err := flowhttp.New(c.cfg, okHandler)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want an error containing %q", err, c.want)
		}
	}
}

// referenceMembers decodes a JSON object's members with encoding/json's
// tokenizer, an implementation independent of SetBodyPriority's walk:
// each member's decoded key and its compacted value, in order.
func referenceMembers(t *testing.T, body []byte) (keys []string, values []string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %q", body)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("key of %q: %v", body, err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("value of %q: %v", body, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		values = append(values, compact.String())
	}
	return keys, values
}

// isObject reports whether b is one valid JSON object.
func isObject(b []byte) bool {
	return json.Valid(b) && bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{"))
}

// FuzzPriorityRewrite checks SetBodyPriority on any body: the output is
// valid JSON exactly when the input is; a body that is not one JSON
// object passes unchanged; an object comes out with exactly one top-level
// priority, of the value asked for, and every other member as it was, in
// order, by encoding/json's own tokenizer.
func FuzzPriorityRewrite(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"model":"m","priority":1}`, `{"priority":"x","priority":null,"priority":{"priority":2}}`,
		`{"pri\u006frity":1,"a":[1,{"b":"\"}"}]}`, ` {"a" : 1 , "b":2 } `, `[]`, `{"a":1}{}`, `"s"`, ``,
		`{"\\":"\\\"","priority":[[[]]]}`, `{"a":-1.5e+3,"b":true,"c":false,"d":null}`,
	} {
		f.Add([]byte(seed), int64(-10))
	}
	f.Fuzz(func(t *testing.T, in []byte, value int64) {
		orig := bytes.Clone(in)
		out, ok := flowhttp.SetBodyPriority(in, value)
		if !bytes.Equal(in, orig) {
			t.Fatalf("the input was modified")
		}
		if json.Valid(out) != json.Valid(in) {
			t.Fatalf("valid(in) = %t, valid(out) = %t\nin:  %q\nout: %q", json.Valid(in), json.Valid(out), in, out)
		}
		if !isObject(in) {
			if ok || !bytes.Equal(out, in) {
				t.Fatalf("a body that is not a JSON object was changed (ok %t): %q → %q", ok, in, out)
			}
			return
		}
		if !ok {
			t.Fatalf("a JSON object was passed through: %q", in)
		}
		if len(out) > len(in)+32 {
			t.Fatalf("output %d bytes longer than the input", len(out)-len(in))
		}
		inKeys, inValues := referenceMembers(t, in)
		outKeys, outValues := referenceMembers(t, out)
		var wantKeys, wantValues []string
		for i, k := range inKeys {
			if k != flowhttp.BodyPriorityField {
				wantKeys, wantValues = append(wantKeys, k), append(wantValues, inValues[i])
			}
		}
		wantKeys = append(wantKeys, flowhttp.BodyPriorityField)
		wantValues = append(wantValues, jsonInt(value))
		if !slices.Equal(outKeys, wantKeys) || !slices.Equal(outValues, wantValues) {
			t.Fatalf("members of %q:\n got  %q %q\n want %q %q", out, outKeys, outValues, wantKeys, wantValues)
		}
	})
}

func jsonInt(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// seenBody is what a backend received: the priority member of its body
// as JSON, the declared Content-Length and the bytes it read.
type seenBody struct {
	priority      string
	contentLength int64
	header        string
	body          string
}

// recordingBackend serves 200 and sends what it received on seen.
func recordingBackend(t *testing.T, seen chan<- seenBody) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("backend: reading the body: %v", err)
		}
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(body, &fields)
		seen <- seenBody{priority: string(fields["priority"]), contentLength: r.ContentLength,
			header: r.Header.Get("Content-Length"), body: string(body)}
	})
}

// TestHandoffEndToEnd sends requests through a Handler and a reverse
// proxy to a backend on loopback: the backend sees the priority of the
// band that admitted each request, the fallback band's for a priority
// that has none, whatever the client wrote, with a Content-Length that
// matches the body.
func TestHandoffEndToEnd(t *testing.T) {
	fc := newController(t, flowcontrol.Config{
		Bands:            []flowcontrol.BandConfig{band(10, 5), band(0, 5), band(-1, 5)},
		FallbackPriority: 0,
	})
	for _, c := range []struct {
		name    string
		handoff flowhttp.PriorityHandoff
		want    map[int]string // requested band → the priority the backend sees
	}{
		{"default mapping", flowhttp.PriorityHandoff{Enabled: true},
			map[int]string{10: "-10", 0: "0", -1: "1", 5: "0", -7: "0"}},
		{"table", flowhttp.PriorityHandoff{Enabled: true, Map: map[int]int64{10: 0, 0: 10, -1: 100}},
			map[int]string{10: "0", 0: "10", -1: "100", 5: "10", -7: "10"}},
	} {
		seen := make(chan seenBody, 1)
		be := httptest.NewServer(recordingBackend(t, seen))
		tr := &http.Transport{}
		gw := loopbackServer(t, mustHandler(t, flowhttp.Config{
			Controller:      fc,
			Headers:         flowhttp.HeaderClassifier{PriorityHeader: priorityHeader},
			PriorityHandoff: c.handoff,
		}, proxyTo(t, be.URL, tr)))
		for requested, want := range c.want {
			for _, body := range []string{
				`{"model":"m","prompt":"hi"}`,
				`{"priority":-1000,"model":"m","priority":"-1000","prompt":"hi"}`,
			} {
				req, err := http.NewRequest(http.MethodPost, gw, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set(priorityHeader, itoa(requested))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s: band %d: %v", c.name, requested, err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: band %d: status %d", c.name, requested, resp.StatusCode)
				}
				got := within(t, seen, "the backend saw no request")
				if got.priority != want {
					t.Errorf("%s: requested band %d, body %s: the backend saw priority %s, want %s", c.name, requested, body, got.priority, want)
				}
				if got.contentLength != int64(len(got.body)) || got.header != itoa(len(got.body)) {
					t.Errorf("%s: Content-Length %d (header %q) for a body of %d bytes", c.name, got.contentLength, got.header, len(got.body))
				}
				if want := `{"model":"m","prompt":"hi","priority":` + want + `}`; got.body != want {
					t.Errorf("%s: the backend read %s, want %s", c.name, got.body, want)
				}
			}
		}
		tr.CloseIdleConnections()
		be.Close()
	}
}

// TestHandoffOffLeavesBodies checks that, off, the client's body and its
// priority reach the backend byte for byte; and that, on, a body that is
// not a JSON object does too, a body at the size limit is rewritten while
// one past it is refused before flow control, and one a lenient parser
// could read as an object is refused 400.
func TestHandoffOffLeavesBodies(t *testing.T) {
	fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(10, 5)}, FallbackPriority: 10})
	seen := make(chan seenBody, 1)
	be := httptest.NewServer(recordingBackend(t, seen))
	defer be.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	const limit = 64
	gateway := func(handoff flowhttp.PriorityHandoff) string {
		return loopbackServer(t, mustHandler(t, flowhttp.Config{
			Controller:      fc,
			Headers:         flowhttp.HeaderClassifier{DefaultPriority: 10},
			MaxBodyBytes:    limit,
			PriorityHandoff: handoff,
		}, proxyTo(t, be.URL, tr)))
	}
	off, on := gateway(flowhttp.PriorityHandoff{}), gateway(flowhttp.PriorityHandoff{Enabled: true})
	atLimit := `{"priority":-99,"prompt":"` + strings.Repeat("a", limit-28) + `"}`
	if len(atLimit) != limit {
		t.Fatalf("the body at the limit is %d bytes", len(atLimit))
	}
	for _, c := range []struct {
		name, url, body string
		status          int
		want            string // what the backend reads; "" when it sees nothing
	}{
		{"off", off, `{"priority":-99, "model":"m"}`, 200, `{"priority":-99, "model":"m"}`},
		{"on, an array", on, `[{"priority":-99}]`, 200, `[{"priority":-99}]`},
		{"on, not JSON", on, `priority=-99`, 200, `priority=-99`},
		{"on, at the limit", on, atLimit, 200, `{"prompt":"` + strings.Repeat("a", limit-28) + `","priority":-10}`},
		{"on, past the limit", on, atLimit + " ", http.StatusRequestEntityTooLarge, ""},
		{"on, NaN", on, `{"priority":-99,"t":NaN}`, http.StatusBadRequest, ""},
		{"on, behind a BOM", on, "\xef\xbb\xbf{\"priority\":-99}", 200, "\xef\xbb\xbf{\"priority\":-10}"},
	} {
		resp, err := http.Post(c.url, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
			continue
		}
		if c.want == "" {
			continue
		}
		if got := within(t, seen, "the backend saw no request"); got.body != c.want || got.contentLength != int64(len(c.want)) {
			t.Errorf("%s: the backend read %s (Content-Length %d), want %s", c.name, got.body, got.contentLength, c.want)
		}
	}
	select {
	case got := <-seen:
		t.Errorf("the backend saw a request refused: %+v", got)
	default:
	}

}

// A body the hand-off refuses is answered 400 once admitted, and its slot
// is released: behind a gate of one slot, the next request is served.
func TestHandoffRefusalReleasesTheSlot(t *testing.T) {
	g := newCountingGate(1)
	fc := newController(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{band(0, 5)}, Gate: g})
	seen := make(chan seenBody, 1)
	url := loopbackServer(t, mustHandler(t, flowhttp.Config{Controller: fc, PriorityHandoff: flowhttp.PriorityHandoff{Enabled: true}},
		recordingBackend(t, seen)))
	for _, body := range []string{`{"priority":-9,"t":NaN}`, `{"priority":-9,"t":Infinity}`} {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || decodeError(t, string(msg)).Error.Message != flowhttp.ErrHandoffBody.Error() {
			t.Errorf("%s: %d %s, want 400 with ErrHandoffBody's message", body, resp.StatusCode, msg)
		}
		g.awaitRelease(t)
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"priority":-9}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := within(t, seen, "the backend saw no request"); resp.StatusCode != http.StatusOK || got.priority != "0" {
		t.Errorf("after the refusals: %d, the backend saw priority %s; want 200 and 0", resp.StatusCode, got.priority)
	}
	if a, r := g.acquired.Load(), g.released.Load(); a != 3 || r < 2 {
		t.Errorf("the gate granted %d slots and had %d back, want 3 and at least the 2 refused", a, r)
	}
}

// FuzzPriorityHandoffRewrite checks Rewrite on any body: a JSON object,
// behind a UTF-8 byte-order mark or not, comes out with one priority of
// the band's value (and the mark kept); a body refused is not valid JSON
// and starts, once decoded as Python decodes it, with '{' — and a body
// starting with '{' in UTF-8 is never passed unchanged; anything else
// passes unchanged.
func FuzzPriorityHandoffRewrite(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"priority":NaN}`, "\xef\xbb\xbf{\"a\":1}", "\xff\xfe{\x00}\x00", "\x00{", `[1]`, ``, "\x00\x00\xfe\xff\x00\x00\x00{",
	} {
		f.Add([]byte(seed), 3)
	}
	p := flowhttp.PriorityHandoff{Enabled: true}
	f.Fuzz(func(t *testing.T, in []byte, band int) {
		out, err := p.Rewrite(in, band)
		object, bom := in, []byte(nil)
		if rest, ok := bytes.CutPrefix(in, []byte("\xef\xbb\xbf")); ok && isObject(rest) {
			object, bom = rest, in[:3]
		}
		switch {
		case isObject(object):
			body, ok := bytes.CutPrefix(out, bom)
			if err != nil || !ok {
				t.Fatalf("%q: %q, %v; want the object rewritten behind %q", in, out, err, bom)
			}
			keys, values := referenceMembers(t, body)
			if n := slices.Index(keys, flowhttp.BodyPriorityField); n != len(keys)-1 || values[n] != jsonInt(p.Value(band)) {
				t.Fatalf("%q → %q: keys %q values %q", in, out, keys, values)
			}
		case err != nil:
			if !errors.Is(err, flowhttp.ErrHandoffBody) || json.Valid(in) || out != nil {
				t.Fatalf("%q refused with %v (out %q)", in, err, out)
			}
		default:
			if !bytes.Equal(out, in) {
				t.Fatalf("%q changed to %q", in, out)
			}
			if trimmed := bytes.TrimLeft(in, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
				t.Fatalf("%q starts with '{', is not a JSON object, and passed", in)
			}
		}
	})
}
