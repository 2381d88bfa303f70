package extproc_test

// The header table of flowcontrol/flowhttp's owned_test.go, run against the
// ext_proc adapter: every router-owned name, in every letter case, that a
// backend sends in the response headers, in the response trailers, or in a
// Trailer declaration, is gone once Envoy applies the adapter's mutation,
// and the other headers are not. The fourth path, informational (1xx)
// responses, is Envoy's: its ext_proc filter is never consulted on them,
// and the shipped envoy.yaml leaves proxy_100_continue off, so Envoy
// answers an Expect: 100-continue itself instead of forwarding a backend's.

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/flowhttp"
	"github.com/sluicegate/sluice/headroom"
)

func TestRouterOwnedOnEveryPath(t *testing.T) {
	for _, path := range []string{"header", "trailer", "trailer declaration"} {
		for _, name := range flowhttp.RouterOwnedHeaders() {
			for _, key := range []string{name, strings.ToUpper(name), "X-" + name[2:]} {
				t.Run(path+"/"+key, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						_, s := admitOne(t)
						var sent []header
						switch path {
						case "header":
							sent = []header{{key, "spoofed"}, {key, "again"}, {"x-other", "kept"}}
						case "trailer declaration":
							sent = []header{{"trailer", "x-other, " + key}, {"Trailer", key}}
						}
						var kv []string
						for _, hd := range sent {
							kv = append(kv, hd.name, hd.value)
						}
						m := s.responseHeaders(false, kv...)
						got := applyMutation(pairs(kv...), m)
						if path == "trailer" {
							sent = []header{{key, "spoofed"}, {"x-other", "kept"}}
							kv = []string{key, "spoofed", "x-other", "kept"}
							got = applyMutation(sent, s.responseTrailers(kv...))
						}

						for _, hd := range got {
							if flowhttp.IsRouterOwned(hd.name) && (hd.value == "spoofed" || hd.value == "again") {
								t.Errorf("%s: %q reached the client", hd.name, hd.value)
							}
							if strings.EqualFold(hd.name, "trailer") {
								for elem := range strings.SplitSeq(hd.value, ",") {
									if flowhttp.IsRouterOwned(strings.TrimSpace(elem)) {
										t.Errorf("the response declares the router-owned trailer %q", elem)
									}
								}
							}
						}
						if path != "trailer" {
							if vs := values(got, flowcontrol.DroppedReasonHeader); len(vs) > 0 {
								t.Errorf("a dispatched response carries %s %q", flowcontrol.DroppedReasonHeader, vs)
							}
							if vs := values(got, headroom.HeaderName); !slices.Equal(vs, []string{"10"}) {
								t.Errorf("headroom %q, want the router's [10]", vs)
							}
						}
						want := map[string][]string{
							"header":              {"x-other", "kept"},
							"trailer":             {"x-other", "kept"},
							"trailer declaration": {"trailer", "x-other"},
						}[path]
						if vs := values(got, want[0]); !slices.Equal(vs, want[1:]) {
							t.Errorf("%s = %q, want %q", want[0], vs, want[1:])
						}
						s.close()
					})
				})
			}
		}
	}
}

// The response-headers mutation leaves the client no router-owned name
// that a backend's header of a dispatched response would carry.
func TestResponseMutationRemovesOwned(t *testing.T) {
	for _, c := range []struct {
		name string
		kv   []string // the backend's response header
		gone string   // the header the client must not see
	}{
		// A backend's x-llm-d-request-dropped-reason on a dispatched
		// response (the third review's defect 4) is removed.
		{"backend dropped reason", []string{"x-llm-d-request-dropped-reason", "rejected-saturated"}, flowcontrol.DroppedReasonHeader},
		// A Trailer declaration that names nothing but router-owned names
		// is removed, not left empty.
		{"owned-only trailer declaration", []string{"trailer", "X-Llm-D-Request-Dropped-Reason , x-llm-d-flow-band-headroom"}, "trailer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, s := admitOne(t)
				got := applyMutation(pairs(c.kv...), s.responseHeaders(false, c.kv...))
				if vs := values(got, c.gone); len(vs) > 0 {
					t.Errorf("the client sees %s %q on a dispatched response, want none", c.gone, vs)
				}
				s.close()
			})
		})
	}
}

// The 1xx path: Envoy, not the adapter, decides what happens to a
// backend's informational responses, and the shipped configuration does
// not forward a backend's 100 Continue.
func TestEnvoyConfigDoesNotProxyBackend100Continue(t *testing.T) {
	bs := loadEnvoyConfig(t)
	managers := 0
	visitTyped(t, bs, func(m proto.Message) {
		if hcm, ok := m.(*hcmv3.HttpConnectionManager); ok {
			managers++
			if hcm.GetProxy_100Continue() {
				t.Error("proxy_100_continue is on: a backend's 100 Continue would reach the client unprocessed")
			}
		}
	})
	if managers == 0 {
		t.Fatal("no HttpConnectionManager in envoy.yaml")
	}
}
