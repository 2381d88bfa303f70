package headroom_test

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/headroom"
)

// A net/http router: the admission step records the band that dispatched the
// request, and Middleware stamps that band's headroom when the response
// headers are written. A dispatcher reads it back with Parse.
func Example() {
	var bands capacity.Bands
	bands.Set(capacity.Snapshot{Priority: 0, QueuedRequests: 81, RequestCapacity: capacity.Bounded(100)})

	model := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Five more requests queue in band 0 while the model works.
		bands.Update(0, func(s *capacity.Snapshot) { s.QueuedRequests += 5 })
		w.Header().Set(headroom.HeaderName, "1000") // a backend's copy is replaced
		fmt.Fprintln(w, "tokens")
	})
	admission := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A real router calls its flow controller here. This request asked
			// for band 5, which is not provisioned, and was dispatched from the
			// fallback band 0.
			ctx := headroom.NewContext(r.Context(), headroom.Admitted(0))
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	router := admission(headroom.Middleware(&bands, model))

	rec := httptest.NewRecorder()
	router.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", nil))

	n, err := headroom.Parse(rec.Result().Header)
	fmt.Println(n, err)
	// Output: 14 <nil>
}

func ExampleRequests() {
	fmt.Println(headroom.Requests(100, 81))
	fmt.Println(headroom.Requests(100, 130))
	fmt.Println(headroom.Requests[int8](math.MaxInt8, math.MinInt8))
	fmt.Println(headroom.Requests[uint](0, 3))
	// Output:
	// 19
	// 0
	// 127
	// 0
}

func ExampleSample() {
	var bands capacity.Bands
	bands.Set(capacity.Snapshot{Priority: 0, QueuedRequests: 81, RequestCapacity: capacity.Bounded(100)})
	bands.Set(capacity.Snapshot{Priority: 1, QueuedRequests: 81}) // unbounded

	for _, b := range []headroom.Band{headroom.Admitted(0), headroom.Admitted(1), headroom.Admitted(2), {}} {
		n, ok := headroom.Sample(&bands, b)
		fmt.Printf("%s: %d %t\n", b, n, ok)
	}
	// Output:
	// band 0: 19 true
	// band 1: 0 false
	// band 2: 0 false
	// not admitted: 0 false
}

// An Envoy ext_proc server answers the response-headers phase with a header
// mutation built from MutationFor, for the band its request context recorded.
func ExampleMutationFor() {
	var bands capacity.Bands
	bands.Set(capacity.Snapshot{Priority: 0, QueuedRequests: 100, RequestCapacity: capacity.Bounded(100)})

	m := headroom.MutationFor(&bands, headroom.Admitted(0))
	fmt.Printf("remove %q\n", m.Remove)
	if m.Set {
		fmt.Printf("set %s: %s\n", headroom.HeaderName, m.Value)
	}
	// Output:
	// remove ["x-llm-d-flow-band-headroom-requests" "x-llm-d-flow-band-headroom"]
	// set x-llm-d-flow-band-headroom-requests: 0
}

func ExampleModifyResponse() {
	var bands capacity.Bands
	bands.Set(capacity.Snapshot{Priority: 2, QueuedRequests: 3, RequestCapacity: capacity.Bounded(8)})

	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "tokens")
	}))
	defer backend.Close()
	target, _ := url.Parse(backend.URL)

	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = headroom.ModifyResponse(&bands)
	admitted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy.ServeHTTP(w, r.WithContext(headroom.NewContext(r.Context(), headroom.Admitted(2))))
	})

	rec := httptest.NewRecorder()
	admitted.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.Header.Get(headroom.HeaderName), string(body))
	// Output: 5 tokens
}

func ExampleParse() {
	for _, h := range []http.Header{
		{"X-Llm-D-Flow-Band-Headroom-Requests": {" 19 "}},
		{"X-Llm-D-Flow-Band-Headroom": {"7"}}, // provisional name
		{"X-Llm-D-Flow-Band-Headroom-Requests": {"-1"}},
		{},
	} {
		n, err := headroom.Parse(h)
		switch {
		case errors.Is(err, headroom.ErrAbsent):
			fmt.Println("absent: keep the current pace")
		case errors.Is(err, headroom.ErrMalformed):
			fmt.Println("malformed:", err)
		default:
			fmt.Println("room for", n)
		}
	}
	// Output:
	// room for 19
	// room for 7
	// malformed: headroom: malformed header: x-llm-d-flow-band-headroom-requests: "-1"
	// absent: keep the current pace
}

// A router whose callers include llm-d-async's dispatcher, which reads the
// provisional name, stamps both.
func ExampleStamp_bothNames() {
	var bands capacity.Bands
	bands.Set(capacity.Snapshot{Priority: 0, QueuedRequests: 81, RequestCapacity: capacity.Bounded(100)})

	h := http.Header{}
	h.Set(headroom.ProvisionalHeaderName, "1000") // a backend's copy
	headroom.Stamp(h, &bands, headroom.Admitted(0), headroom.EmitProvisional)
	fmt.Println(h.Values(headroom.HeaderName), h.Values(headroom.ProvisionalHeaderName))
	// Output: [19] [19]
}
